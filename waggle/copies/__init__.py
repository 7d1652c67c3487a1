"""Reads from copies: the tables ``waggle sync`` made in the primary, known as copies of members' tables, and
reads of those tables answered from them (``read-from-copies``).

- :mod:`.catalog`: the copies as values, built from the primary's tables and the sync's coverage records
  (:mod:`waggle.synced`, the contract with the sync) (pure);
- :mod:`.planning`: whether a call is answered from a copy, and how (pure, asked by the call core);
- :mod:`.serve`: a copy's reply in the client's names, and a source's partitions with the copy's storage (pure);
- :mod:`.registry`: reading the copies from the primary (I/O); :mod:`waggle.routes.copies` serves them (a new
  routes snapshot).
"""
