"""The federation's notification log: events renamed to waggle's names, the merged journal, its merger and its readers.
"""
