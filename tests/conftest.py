"""Session-wide real components: Hive metastores, waggle through its CLI, and a local Spark session.

Each component starts once per test session. Tests get their own databases (``unique_db``) so they can
share the components. When Java or Spark is missing, tests that need them skip locally with the reason,
and fail when ``CI`` is set: CI must never pass by skipping.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

sys.path.insert(0, str(ROOT / "tests"))


def require(condition: bool, reason: str) -> None:
    """Skip locally, fail in CI."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required component missing in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    return bool((java_home and Path(java_home, "bin", "java").exists()) or shutil.which("java"))


# -- clients ---------------------------------------------------------------------------------------------
@contextmanager
def hive2_client(port: int, timeout: float = 30.0, framed: bool = False) -> Iterator[Any]:
    """hmsclient: the generated Hive 2 client many users already run (unframed, or framed)."""
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore
    from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
    from thrift.transport.TSocket import TSocket
    from thrift.transport.TTransport import TBufferedTransport, TFramedTransport

    sock = TSocket("127.0.0.1", port)
    sock.setTimeout(timeout * 1000)
    transport = TFramedTransport(sock) if framed else TBufferedTransport(sock)
    transport.open()
    try:
        yield ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(transport))
    finally:
        transport.close()


def encode_call(name: str, args: Any, seqid: int = 1, mtype: int | None = None) -> bytes:
    """A message exactly as a Thrift peer puts it on the wire (unframed, strict binary); a call by default."""
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.Thrift import TMessageType
    from thrift.transport.TTransport import TMemoryBuffer

    buf = TMemoryBuffer()
    proto = TBinaryProtocol(buf)
    proto.writeMessageBegin(name, TMessageType.CALL if mtype is None else mtype, seqid)
    args.write(proto)
    proto.writeMessageEnd()
    return buf.getvalue()


# -- waggle as a subprocess through the real CLI ------------------------------------------------------
class WaggleProcess:
    def __init__(self, workdir: Path, federation_yaml: str, server_yaml: str = "", args: tuple[str, ...] = ()) -> None:
        """``args``: more ``waggle serve`` arguments (``--workers 2``)."""
        from waggle.local.metastore import free_port

        self.args = args
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.port = free_port()
        self.http_port = free_port()
        self.server_file = workdir / "server.yml"
        self.federation_file = workdir / "federation.yml"
        self.server_file.write_text(f"port: {self.port}\nbind-address: 127.0.0.1\nendpoint:\n  port: {self.http_port}\n"
                                    f"{server_yaml}")
        self.federation_file.write_text(federation_yaml)
        self.log_path = workdir / "waggle.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True) -> WaggleProcess:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "waggle", "serve", "--server-config", str(self.server_file),
             "--federation-config", str(self.federation_file), *self.args],
            stdout=subprocess.DEVNULL, stderr=open(self.log_path, "ab"), env=env, cwd=ROOT,
        )
        if wait:
            self.wait_listening()
        return self

    def wait_listening(self, timeout: float = 30.0) -> None:
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"waggle exited with {self.proc.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"waggle not listening after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def events(self, event: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        """The JSON log entries (of ``event``, if given) written after character ``since`` of the log."""
        import json

        found = []
        for line in self.log()[since:].splitlines():
            if line.startswith("{") and (event is None or f'"{event}"' in line):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                if event is None or entry.get("event") == event:
                    found.append(entry)
        return found

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of the ``/metrics`` sample ``name`` with exactly these labels, or None when absent."""
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(self.http("/metrics")):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        return None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def client(self, timeout: float = 30.0) -> Any:
        return hive2_client(self.port, timeout)

    def http(self, path: str) -> str:
        """GET a path of waggle's HTTP endpoint (``/healthz``, ``/metrics``)."""
        from urllib.request import urlopen

        with urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=10) as response:
            return str(response.read().decode())


def wait_for(what: Any, timeout: float = 30.0, message: str = "") -> Any:
    """Poll ``what()`` until it returns something true, and return that; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g}s: {message}")


# -- which worker of `waggle serve --workers` serves a connection ---------------------------------------
def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def owner(proxy: WaggleProcess, client: Any, pids: list[int]) -> int:
    """The pid of the worker that accepted this client connection (from /proc/net/tcp and each pid's fds)."""
    if isinstance(client, socket.socket):
        sock = client
    else:  # hmsclient: a TBufferedTransport over a TSocket
        trans = client._iprot.trans
        sock = getattr(trans, "_TBufferedTransport__trans", trans).handle
    local = sock.getsockname()[1]
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    inode = next(r[9] for r in rows
                 if int(r[1].split(":")[1], 16) == proxy.port and int(r[2].split(":")[1], 16) == local)
    return next(pid for pid in pids if inode in _socket_inodes(pid))


def federation_yaml(primary_uri: str, extra: str = "", access: str = "READ_AND_WRITE_AND_CREATE") -> str:
    return (f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary_uri}\n"
            f"  access-control-type: {access}\n{extra}")


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


def federated_members(analytics_uri: str, ops_uri: str, prefixed: bool = True) -> str:
    """The federated part of the session federation (PREFIXED, or the same members for MANUAL)."""
    tables = ("  mapped-databases: [sales, web, default]\n"
              "  mapped-tables:\n  - database: web\n    mapped-tables: [visits, page_.*]\n")
    return (
        "federated-meta-stores:\n"
        f"- name: analytics\n  remote-meta-store-uris: {analytics_uri}\n"
        + ("  database-prefix: analytics_\n" if prefixed else "") + tables +
        f"- name: ops\n  remote-meta-store-uris: {ops_uri}\n"
        "  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n"
        "  writable-database-white-list: [scratch]\n"
        "  database-name-mapping: {telemetry: metrics}\n"
    )


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
class CompatFederation:
    """waggle (PREFIXED) over a real Hive 2.3 primary and stub Hive 3.1 / 4.0.1 members, each holding the same
    seeded database. ``upstream(release)`` gives what a test needs to reach one of them."""

    RELEASES = ("2.3", "3.1", "4.x")

    def __init__(self, waggle: WaggleProcess, stubs: dict[str, Any], metastores: dict[str, Any],
                 databases: dict[str, tuple[str, str]], hinted: Any) -> None:
        self.waggle = waggle
        self.stubs = stubs  # release -> stub (no stub for the real 2.3)
        self.metastores = metastores  # release -> the real metastore underneath
        self.databases = databases  # release -> (name through waggle, name in the metastore)
        self.hinted = hinted  # a second Hive 4 stub, behind member v4h_ with hive-version 4.0.1


def _seed_compat_db(store: Any, db: str) -> None:
    from waggle.hms.gen.hive_metastore import ttypes
    from waggle.local.seed import ensure_database, ensure_table, text_sd

    root = f"file://{store.warehouse}/{db}.db"
    with hive2_client(store.port) as c:
        ensure_database(c, db, root)
        ensure_table(c, db, "plain", f"{root}/plain", [("id", "int"), ("name", "string")], rows=["1,a", "2,b"])
        ensure_table(c, db, "parts", f"{root}/parts", [("id", "int")], [("ds", "string")])
        have = set(c.get_partition_names(db, "parts", -1))
        for ds in ("2024-01-01", "2024-01-02", "2024-01-03"):
            if f"ds={ds}" not in have:
                c.add_partition(ttypes.Partition(values=[ds], dbName=db, tableName="parts", createTime=0,
                                                 lastAccessTime=0, parameters={},
                                                 sd=text_sd(f"{root}/parts/ds={ds}", [("id", "int")])))
    with hive2_client(store.port) as c:
        from hmsclient.genthrift.hive_metastore import ttypes as h2

        try:
            c.get_table(db, "keyed")
        except h2.NoSuchObjectException:
            table = c.get_table(db, "plain")
            table.tableName = "keyed"
            table.sd.location = f"{root}/keyed"
            c.create_table_with_constraints(table, [h2.SQLPrimaryKey(
                table_db=db, table_name="keyed", column_name="id", key_seq=1, pk_name="keyed_pk",
                enable_cstr=False, validate_cstr=False, rely_cstr=False)], [])


@pytest.fixture(scope="session")
def compat(primary: Any, analytics: Any, ops: Any, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[CompatFederation]:
    from hive_stubs import Hive4StubMetastore, Hive31StubMetastore

    from waggle.hms.gen.hive_metastore.ttypes import TruncateTableResponse

    databases = {"2.3": ("compat23", "compat23"), "3.1": ("v31_compat31", "compat31"),
                 "4.x": ("v4_compat4", "compat4")}
    metastores = {"2.3": primary, "3.1": analytics, "4.x": ops}
    for release, store in metastores.items():
        _seed_compat_db(store, databases[release][1])
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


@contextmanager
def release_client(release: str, port: int, timeout: float = 30.0) -> Iterator[tuple[Any, Any]]:
    """(client, ttypes) of one Hive release's generated code: hmsclient (2.3), hive-metastore-client (3.1),
    or waggle's own IDL (4.x)."""
    import importlib

    from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
    from thrift.transport.TSocket import TSocket
    from thrift.transport.TTransport import TBufferedTransport

    package = {"2.3": "hmsclient.genthrift.hive_metastore",
               "3.1": "thrift_files.libraries.thrift_hive_metastore_client",
               "4.x": "waggle.hms.gen.hive_metastore"}[release]
    service = importlib.import_module(f"{package}.ThriftHiveMetastore")
    types = importlib.import_module(f"{package}.ttypes")
    sock = TSocket("127.0.0.1", port)
    sock.setTimeout(timeout * 1000)
    transport = TBufferedTransport(sock)
    transport.open()
    try:
        yield service.Client(TBinaryProtocolAccelerated(transport)), types
    finally:
        transport.close()


@pytest.fixture(scope="session")
def hive4_primary(primary: Any, analytics: Any, federation_data: dict[str, Any],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WaggleProcess, Any]]:
    """waggle whose primary is a stub Hive 4.0.1 metastore (no get_table) around the real primary, with the
    real analytics metastore federated as ``an_``. Yields (waggle, stub)."""
    from hive_stubs import Hive4StubMetastore

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
    """Dispatch tests: a factory of waggle runtimes in front of in-memory metastores (tests/memory_metastore.py),
    every one closed at the end."""
    from memory_metastore import harnesses

    with harnesses(tmp_path) as build:
        yield build


# -- Kerberos: a real MIT KDC and a Kerberized metastore -----------------------------------------------------
KERBEROS_PRINCIPALS = ("waggle/localhost", "hive/localhost", "alice", "bob")
#: a second realm that trusts the session's (and is trusted by it), for cross-realm tests
PARTNER_REALM = "PARTNER.TEST"


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


#: how long waggle's delegation tokens live unless renewed (short, so expiry is testable)
SECURE_TOKEN_RENEW_SECONDS = 6


def secure_waggle_process(kdc: Any, kerberized_metastore: Any, analytics: Any, work: Path,
                          renew_seconds: float = SECURE_TOKEN_RENEW_SECONDS,
                          extra_properties: str = "", signing_key: bool = True,
                          args: tuple[str, ...] = ()) -> WaggleProcess:
    """A started waggle with a Kerberos front door (SASL GSSAPI as waggle/localhost, DIGEST-MD5 with its own
    delegation tokens, which live ``renew_seconds`` unless renewed): the Kerberized primary ``secure``, reached
    as each caller (impersonation), and the plain member ``analytics`` behind the prefix ``analytics_``.
    ``extra_properties`` are more YAML lines of its configuration-properties (indented two spaces); without
    ``signing_key`` waggle signs with a random key; ``args``: more ``waggle serve`` arguments."""
    work.mkdir(parents=True, exist_ok=True)
    key_file = work / "token-keys"
    key_file.write_text("1:" + base64.b64encode(b"k" * 32).decode() + "\n")
    server = (
        "database-resolution: PREFIXED\n"
        + (f"delegation-tokens:\n  signing-key-file: {key_file}\n" if signing_key else "") +
        "configuration-properties:\n"
        "  hive.metastore.sasl.enabled: true\n"
        f"  hive.metastore.kerberos.principal: waggle/localhost@{kdc.realm}\n"
        f"  hive.metastore.kerberos.keytab.file: {kdc.keytab_path('waggle/localhost')}\n"
        f"  hive.cluster.delegation.token.renew-interval: {renew_seconds:g}s\n"
        f"{extra_properties}"
        "logging:\n  format: json\n"
    )
    federation = (
        "primary-meta-store:\n"
        "  name: secure\n"
        f"  remote-meta-store-uris: thrift://localhost:{kerberized_metastore.port}\n"
        "  access-control-type: READ_AND_WRITE_AND_CREATE\n"
        "  impersonation-enabled: true\n"
        "  configuration-properties:\n"
        "    hive.metastore.sasl.enabled: true\n"
        f"    hive.metastore.kerberos.principal: hive/_HOST@{kdc.realm}\n"
        "federated-meta-stores:\n"
        "  - name: analytics\n"
        f"    remote-meta-store-uris: {analytics.uri}\n"
    )
    return WaggleProcess(work, federation, server, args).start()


@pytest.fixture(scope="session")
def secure_waggle(kdc: Any, kerberized_metastore: Any, analytics: Any, federation_data: dict[str, Any],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    """:func:`secure_waggle_process`, shared by the session (its tokens live 6 seconds unless renewed)."""
    proc = secure_waggle_process(kdc, kerberized_metastore, analytics, tmp_path_factory.mktemp("waggle-kerberos"))
    try:
        yield proc
    finally:
        proc.stop()
