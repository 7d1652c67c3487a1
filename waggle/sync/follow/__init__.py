"""``waggle sync --follow``: a policy's tables kept in step with its source by reading the source's notification
log, as Hive REPL reads ``NOTIFICATION_LOG``: a bootstrap (today's batch sync) first, then pages of events, each
applied to the target and checkpointed in the primary.

- :mod:`.events`: notification events as typed changes (pure), from ``json-0.2`` and ``gzip(json-2.0)`` messages;
- :mod:`.scope`: the tables a policy covers, and the databases they can be in (pure);
- :mod:`.plan`: a page of changes as per-table, per-database and per-function work, and gaps in the log (pure);
- :mod:`.apply`: the work done at the target, state-based and idempotent (databases and functions:
  :mod:`.databases`);
- :mod:`.records`: checkpoints and leases, as parameters of ``waggle_sys`` in the primary;
- :mod:`.follower`: one policy's batches (:class:`~.follower.Follower`), driven by :mod:`waggle.sync.service`.
"""
