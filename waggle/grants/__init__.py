"""Who may see and change what: per-user and per-group grants, from waggle's own rules or Apache Ranger's
policies, decided before anything reaches a metastore and applied on every door (the Thrift port, the Iceberg REST
port, the merged notification log, reads from copies and the cache).

* :mod:`~waggle.grants.verdict`: the caller, a verdict, and what a source of grants answers;
* :mod:`~waggle.grants.patterns`: name patterns (``*``, ``?``), case-insensitive;
* :mod:`~waggle.grants.rules`: waggle's own rules (``authorization.rules``, a policy file);
* :mod:`~waggle.grants.ranger`: a Ranger Hive service's policies, in the JSON Ranger admin's download returns;
* :mod:`~waggle.grants.policy`: the sources together, a default, remembered decisions, filtered listings;
* :mod:`~waggle.grants.groups`: a caller's groups (a file, NSS, LDAP), cached with a TTL, refreshed in the
  background.
"""
