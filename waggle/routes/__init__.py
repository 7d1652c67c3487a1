"""The routes snapshot every call reads once, and what keeps it current.

- :mod:`.snapshot`: :class:`~.snapshot.Routes`, the federation as the call path sees it (configuration, pools,
  planner, links, copies, what each member can do), and what the call core remembers for it (:mod:`.memo`);
- :mod:`.planners`: the planner of a snapshot, from the configuration's database map and the links served now
  (in MANUAL mode, from the members' listings);
- :mod:`.links` and :mod:`.copies`: the links, data connectors and copies read from the primary, each change
  served as a new snapshot (the runtime's loops run their rounds).

The call core (:mod:`waggle.call`) plans from a snapshot; nothing here knows the call core.
"""
