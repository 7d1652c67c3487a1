"""What the sync leaves in a metastore and the proxy reads back: the one contract between them. Pure.

- :mod:`.objects`: a copy made from its source (its table and partitions) and the bookkeeping parameters it
  carries (its source, fingerprints, mode, when it was synced);
- :mod:`.coverage`: the records of which tables a run or a follower keeps current, and since when.

The sync (:mod:`waggle.sync`) writes them; the proxy (:mod:`waggle.copies`) reads them to know the copies and
how fresh they are. Neither side is imported here.
"""
