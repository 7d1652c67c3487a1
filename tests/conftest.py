"""Session-wide real components: Hive metastores, waggle through its CLI, and a local Spark session.

Each component starts once per test session. Tests get their own databases (``unique_db``) so they can
share the components. When Java or Spark is missing, tests that need them skip locally with the reason,
and fail when ``CI`` is set: CI must never pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import fixed_ports
from tests.support.clients import hive2_client
from tests.support.compat import CompatFederation, seed_compat_db
from tests.support.env import java_available, require
from tests.support.federation import federated_members, federation_yaml
from tests.support.kerberos import KERBEROS_PRINCIPALS, PARTNER_REALM, secure_waggle_process
from tests.support.proxy import WaggleProcess

#: Every JVM the tests start (Spark drivers, metastores, the Java clients) compiles with C1 alone and collects with
#: the serial collector: a test's JVM lives seconds and runs little, and the optimizing compiler's threads cost a
#: short-lived Spark session about 40% more CPU (measured: 42 s against 24 s for a session that makes, fills and reads
#: a table), and the suite is CPU-bound on two cores. ``java`` reads the variable and
#: says so on stderr ("Picked up JDK_JAVA_OPTIONS"); production JVMs never see it.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config: pytest.Config) -> None:
    """The JVMs' options (:data:`JVM_OPTIONS`), and the ports.

    The run's first process keeps the tutorial's fixed ports out of the kernel's choice for the run
    (:mod:`tests.support.fixed_ports`). Each pytest worker takes its components' ports from a range of its own
    (``waggle.local.jvm.use_ports``). Two workers asking the kernel for a free port can be handed the same one, and
    a metastore started on a port the other worker's metastore took would find that one answering. The ranges lie
    below the kernel's own (32768 and up), so no port the kernel hands a process (a ``waggle demo``'s, say) lands
    in one."""
    from waggle.local.jvm import use_ports

    os.environ.setdefault("JDK_JAVA_OPTIONS", JVM_OPTIONS)
    if not hasattr(config, "workerinput"):  # the run's first process, before its workers start anything
        restore = fixed_ports.reserve(fixed_ports.page_ports(fixed_ports.TUTORIAL.read_text()))
        if restore is not None:
            config.stash[_RESTORE_PORTS] = restore
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ...; a run without workers is one
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    if index < PORT_RANGES:
        first = FIRST_PORT + index * PORTS_EACH
        use_ports(first, first + PORTS_EACH - 1)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The kernel's reserved ports as they were before the run (see :mod:`tests.support.fixed_ports`)."""
    restore = config.stash.get(_RESTORE_PORTS, None)
    if restore is not None:
        restore()


_RESTORE_PORTS = pytest.StashKey[Callable[[], None]]()

#: the workers' port ranges: 20000-21999 for the first, 22000-23999 for the next, ... (beyond six: the kernel's)
FIRST_PORT, PORTS_EACH, PORT_RANGES = 20000, 2000, 6

#: The longest test files, longest first (seconds on two workers, measured with ``--durations=0``): they run
#: first, so that no worker starts one of them while the other has nothing left to do (the file order of
#: ``--dist loadfile`` is the order of collection). The rest keep their order.
LONGEST_FIRST = (
    "tests/integration/test_images.py",  # 420 s the first time on a machine (the images' builds), 60 s after
    "tests/integration/test_sync.py",  # 380 s
    "tests/integration/test_cache.py",  # 230 s
    "tests/integration/test_follow_process.py",  # 200 s
    "tests/integration/test_follow.py",  # 200 s (its change matrix also through waggle's merged log)
    "tests/integration/test_copies.py",  # 160 s
    "tests/integration/test_grants_kerberos.py",  # 150 s (four Kerberized Spark sessions, two at a time)
    "tests/integration/test_failover.py",  # 150 s
    "tests/clients/test_client_sequences.py",  # 150 s
    "tests/integration/test_tutorial.py",  # 120 s
    "tests/integration/test_remotes.py",  # 115 s
    "tests/integration/test_merged_log.py",  # 100 s (a member killed for 20 s)
    "tests/integration/test_iceberg_spark.py",  # 90 s (one Spark session through the Thrift and REST ports)
    "tests/integration/test_iceberg_rest_writers.py",  # 80 s (one JVM of six writers)
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of :data:`LONGEST_FIRST` first, in that order (a stable sort: each file's tests keep theirs)."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


# -- fixtures -------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def metastores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    """Real Hive 2.3 metastores (Derby), started once, in parallel."""
    require(java_available(), "Java 17 is needed to run the local Hive metastores")
    from waggle.local.metastore import start_metastores

    root = tmp_path_factory.mktemp("metastores")
    stores = start_metastores([root / "primary", root / "secondary", root / "tertiary"])
    yield stores
    for s in stores:
        s.stop()


@pytest.fixture(scope="session")
def primary(metastores: list[Any]) -> Any:
    return metastores[0]


@pytest.fixture(scope="session")
def analytics(metastores: list[Any]) -> Any:
    """Federated member 'analytics' (prefix analytics_): sales, web (mapped-tables), secret (hidden)."""
    return metastores[1]


@pytest.fixture(scope="session")
def ops(metastores: list[Any]) -> Any:
    """Federated member 'ops' (prefix ops_): telemetry (alias metrics), scratch (writable), sales."""
    return metastores[2]


@pytest.fixture(scope="session")
def federation_data(analytics: Any, ops: Any) -> dict[str, Any]:
    """Databases and tables written straight into the federated metastores."""
    from waggle.local.seed import seed_federation

    return seed_federation(analytics, ops)


@pytest.fixture(scope="session")
def waggle(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    """waggle in PREFIXED mode over the primary and two federated metastores."""
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle"),
                         federation_yaml(primary.uri, federated_members(analytics.uri, ops.uri)),
                         "database-resolution: PREFIXED\nlogging:\n  level: debug\n"
                         "limits:\n  stream-replies-after-bytes: 1024\n").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def manual_waggle(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    """waggle in MANUAL mode over the same three metastores, refreshing its database map every second."""
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle-manual"),
                         federation_yaml(primary.uri, federated_members(analytics.uri, ops.uri, prefixed=False)),
                         "database-resolution: MANUAL\ndatabase-resolution-refresh: 1\n").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def event_check(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Hive's MessageDeserializer as a command (tests.support.event_check), compiled once per session."""
    from tests.support.event_check import CHECKER
    from tests.support.java import compiled

    return compiled(CHECKER, tmp_path_factory.mktemp("event-check"))


@pytest.fixture
def unique_db(primary: Any) -> Iterator[str]:
    """A fresh database name, dropped (cascade) afterwards."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    yield name
    with hive2_client(primary.port) as c:
        try:
            c.drop_database(name, True, True)
        except Exception:
            pass


@pytest.fixture(scope="session")
def spark(waggle: WaggleProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local Spark session whose Hive catalog is waggle."""
    require(java_available(), "Java 17 is needed for Spark")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        require(False, "pyspark is not installed")
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[1]")
        .appName("waggle-tests")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", f"thrift://127.0.0.1:{waggle.port}")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .enableHiveSupport()
        .getOrCreate()
    )
    yield session
    session.stop()


# -- version bridging: stub Hive 3.1 / 4 metastores (wrapping the real 2.3 ones) behind one waggle ----------------
@pytest.fixture(scope="session")
def compat(primary: Any, analytics: Any, ops: Any, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[CompatFederation]:
    from tests.support.hive_stubs import Hive4StubMetastore, Hive31StubMetastore
    from waggle.hms.gen.hive_metastore.ttypes import TruncateTableResponse

    databases = {"2.3": ("compat23", "compat23"), "3.1": ("v31_compat31", "compat31"),
                 "4.x": ("v4_compat4", "compat4")}
    metastores = {"2.3": primary, "3.1": analytics, "4.x": ops}
    for release, store in metastores.items():
        seed_compat_db(store, databases[release][1])
    stub31 = Hive31StubMetastore("127.0.0.1", analytics.port).start()
    # the Hive 4 stub answers truncate_table_req itself (recorded, nothing deleted): Hive 2.3 underneath has none
    stub4 = Hive4StubMetastore("127.0.0.1", ops.port,
                               local={"truncate_table_req": lambda _args: TruncateTableResponse()}).start()
    hinted = Hive4StubMetastore("127.0.0.1", ops.port).start()
    writable = ("  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n"
                "  writable-database-white-list: ['.*']\n")
    members = (
        "federated-meta-stores:\n"
        f"- name: hive31\n  remote-meta-store-uris: {stub31.uri}\n  database-prefix: v31_\n{writable}"
        f"- name: hive4\n  remote-meta-store-uris: {stub4.uri}\n  database-prefix: v4_\n{writable}"
        f"- name: hive4hinted\n  remote-meta-store-uris: {hinted.uri}\n  database-prefix: v4h_\n"
        "  hive-version: 4.0.1\n"
    )
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle-compat"), federation_yaml(primary.uri, members),
                         "database-resolution: PREFIXED\nlogging:\n  level: debug\n").start()
    yield CompatFederation(proc, {"3.1": stub31, "4.x": stub4}, metastores, databases, hinted)
    proc.stop()
    for stub in (stub31, stub4, hinted):
        stub.stop()


@pytest.fixture(scope="session")
def hive4_primary(primary: Any, analytics: Any, federation_data: dict[str, Any],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WaggleProcess, Any]]:
    """waggle whose primary is a stub Hive 4.0.1 metastore (no get_table) around the real primary, with the
    real analytics metastore federated as ``an_``. Yields (waggle, stub)."""
    from tests.support.hive_stubs import Hive4StubMetastore

    stub = Hive4StubMetastore("127.0.0.1", primary.port).start()
    members = f"federated-meta-stores:\n- name: analytics\n  remote-meta-store-uris: {analytics.uri}\n" \
              "  database-prefix: an_\n"
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle-hive4"), federation_yaml(stub.uri, members),
                         "database-resolution: PREFIXED\nlogging:\n  level: debug\n").start()
    yield proc, stub
    proc.stop()
    stub.stop()


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Any]:
    """Dispatch tests: a factory of waggle runtimes in front of in-memory metastores
    (tests/support/memory_metastore.py), every one closed at the end."""
    from tests.support.memory_metastore import harnesses

    with harnesses(tmp_path) as build:
        yield build


# -- Kerberos: a real MIT KDC and a Kerberized metastore -----------------------------------------------------
@pytest.fixture(scope="session")
def lake(primary: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The member ``lake``, with copies of its tables in the primary made by ``waggle sync --mode copy``
    (tests/support/lake.py): the copies and failover tests share it."""
    from tests.support.lake import lake_with_copies

    yield from lake_with_copies(primary, tmp_path_factory)


@pytest.fixture
def short_lived_events(tmp_path: Path) -> Iterator[Any]:
    """A metastore of its own whose notification events live 2 seconds (purged every second)."""
    require(java_available(), "Java 17 is needed to run a local Hive metastore")
    from waggle.local.metastore import LocalMetastore

    store = LocalMetastore(tmp_path / "ttl", event_ttl=2, event_cleaner_interval=1).start().wait_ready()
    yield store
    store.stop()


@pytest.fixture(scope="session")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One MIT KDC (realm WAGGLE.TEST) per session, with principals and keytabs (``kdc.keytab_path(name)``) for
    waggle/localhost, hive/localhost, alice and bob. Its KRB5_CONFIG is this process's for the session, so
    python-gssapi finds it."""
    require(shutil.which("krb5kdc") is not None or Path("/usr/sbin/krb5kdc").exists(),
            "MIT Kerberos (krb5kdc) is needed: apt-get install krb5-kdc krb5-admin-server krb5-user")
    from waggle.local.kdc import LocalKdc, kdc_available

    require(kdc_available(), "MIT Kerberos tools (krb5kdc, kdb5_util, kadmin.local, kinit) are needed")
    server = LocalKdc(tmp_path_factory.mktemp("kdc")).start()
    saved = {key: os.environ.get(key) for key in server.env()}
    try:
        for name in KERBEROS_PRINCIPALS:
            server.add_principal(name)
        os.environ.update(server.env())
        yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture(scope="session")
def kerberized_metastore(kdc: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Hive 2.3 metastore that only speaks SASL (GSSAPI as hive/localhost, DIGEST-MD5 with delegation
    tokens), trusting ``waggle`` as a proxy user and mapping PARTNER.TEST's principals to their short names."""
    require(java_available(), "Java 17 is needed to run the local Hive metastores")
    from waggle.local.metastore import KerberosSetup, LocalMetastore

    setup = KerberosSetup(principal=kdc.principal("hive/localhost"), keytab=kdc.keytab_path("hive/localhost"),
                          krb5_conf=kdc.krb5_conf, proxy_users=("waggle",), local_realms=(PARTNER_REALM,))
    store = LocalMetastore(tmp_path_factory.mktemp("metastore-kerberos"), kerberos=setup).start()
    try:
        store.wait_ready(180)
        yield store
    finally:
        store.stop()


@pytest.fixture(scope="session")
def secure_waggle(kdc: Any, kerberized_metastore: Any, analytics: Any, federation_data: dict[str, Any],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    """:func:`secure_waggle_process`, shared by the session (its tokens live 6 seconds unless renewed)."""
    proc = secure_waggle_process(kdc, kerberized_metastore, analytics, tmp_path_factory.mktemp("waggle-kerberos"))
    try:
        yield proc
    finally:
        proc.stop()
