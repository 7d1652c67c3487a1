"""Session-wide real components: Hive metastores, waggle through its CLI, and a local Spark session.

Each component starts once per test session. Tests get their own databases (``unique_db``) so they can
share the components. When Java or Spark is missing, tests that need them skip locally with the reason,
and fail when ``CI`` is set: CI must never pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import signal
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


# -- waggle as a subprocess through the real CLI ------------------------------------------------------
class WaggleProcess:
    def __init__(self, workdir: Path, federation_yaml: str, server_yaml: str = "") -> None:
        from waggle.local.metastore import free_port

        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.port = free_port()
        self.server_file = workdir / "server.yml"
        self.federation_file = workdir / "federation.yml"
        self.server_file.write_text(f"port: {self.port}\nbind-address: 127.0.0.1\n{server_yaml}")
        self.federation_file.write_text(federation_yaml)
        self.log_path = workdir / "waggle.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True) -> WaggleProcess:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "waggle", "serve", "--server-config", str(self.server_file),
             "--federation-config", str(self.federation_file)],
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
