"""What the tests share, imported as ``tests.support.<module>`` (pytest puts the project root on the path).

- ``env``: the project root, and ``require`` (skip locally, fail in CI) with the checks it takes.
- ``clients``: Thrift clients of the Hive releases, and messages encoded as peers write them.
- ``proxy``: waggle as a subprocess through its real CLI (``WaggleProcess``), and which worker serves a client.
- ``federation``: federation files as users write them.
- ``waits``: waiting on a condition (``wait_for``), never on the clock alone.
- ``audit``: reading a real metastore's audit log.
- ``kerberos``: waggle with a Kerberos front door over the Kerberized metastore; the realms' names.
- ``compat``: the version-bridging federation (stub Hive 3.1 / 4 members over real Hive 2.3 ones).
- ``sasl_clients``, ``tls_certs``, ``sshd``, ``faults``, ``hive_stubs``, ``memory_metastore``, ``iceberg_spark``:
  SASL clients, certificates, a real sshd, misbehaving peers, stub metastores, in-memory metastores behind a
  waggle runtime, and Spark with Iceberg.

Fixtures stay in ``tests/conftest.py``; no test imports conftest.
"""
