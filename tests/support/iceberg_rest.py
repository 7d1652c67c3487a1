"""The Iceberg REST port in tests: a waggle serving it, and pyiceberg's ``RestCatalog`` pointed at it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.env import require
from tests.support.federation import federated_members, federation_yaml
from tests.support.proxy import WaggleProcess

#: the client every test signs in as, and its secret (written to a file as a Kubernetes Secret would be)
CLIENT_ID = "spark-etl"
CLIENT_SECRET = "rest-secret-0123456789abcdef"
#: the user that client's requests act as
CLIENT_USER = "etl"
#: a member that never answers: its databases (prefix gone_) are down; its database x is writable, so a write to
#: it is down, not refused
DEAD_MEMBER = "- name: gone\n  remote-meta-store-uris: thrift://127.0.0.1:9\n  database-prefix: gone_\n" \
              "  connect-timeout: 500\n  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n" \
              "  writable-database-white-list: [x]\n"


def rest_server_yaml(workdir: Path, rest_port: int, clients: bool = True, extra: str = "") -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    secret = workdir / "rest-client.secret"
    secret.write_text(CLIENT_SECRET + "\n")
    keys = workdir / "signing.key"
    keys.write_text("1:" + "c2lnbmluZy1rZXktMDEyMzQ1Njc4OWFiY2RlZg==\n")
    text = (f"database-resolution: PREFIXED\ndelegation-tokens:\n  signing-key-file: {keys}\n"
            f"iceberg-rest:\n  port: {rest_port}\n")
    if clients:
        text += f"  clients:\n  - id: {CLIENT_ID}\n    secret-file: {secret}\n    user: {CLIENT_USER}\n"
    return text + extra


def start_rest_waggle(workdir: Path, primary_uri: str, analytics_uri: str, ops_uri: str, clients: bool = True,
                      extra_members: str = DEAD_MEMBER, extra: str = "", args: tuple[str, ...] = ()
                      ) -> WaggleProcess:
    from waggle.local.jvm import free_port

    rest_port = free_port()
    proc = WaggleProcess(workdir, federation_yaml(primary_uri, federated_members(analytics_uri, ops_uri)
                                                  + extra_members),
                         rest_server_yaml(workdir, rest_port, clients, extra), args)
    proc.rest_port = rest_port  # type: ignore[attr-defined]
    return proc.start()


def rest_catalog(proc: WaggleProcess, warehouse: str | None = None, credential: str | None = None,
                 **props: str) -> Any:
    try:
        from pyiceberg.catalog.rest import RestCatalog
    except ImportError:
        require(False, "pyiceberg is not installed")
    options = {"uri": f"http://127.0.0.1:{proc.rest_port}"}  # type: ignore[attr-defined]
    if credential is None:
        credential = f"{CLIENT_ID}:{CLIENT_SECRET}"
    if credential:
        options["credential"] = credential
    if warehouse is not None:
        options["warehouse"] = warehouse
    return RestCatalog("waggle-rest", **options, **props)


def schema() -> Any:
    """The tests' table schema: id (long), name (string)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    return Schema(NestedField(1, "id", LongType(), required=False),
                  NestedField(2, "name", StringType(), required=False))


def rows(n: int, start: int = 0) -> Any:
    """``n`` rows of :func:`schema`, ids from ``start``."""
    import pyarrow as pa

    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "name": pa.array([f"n{i}" for i in range(start, start + n)], pa.string())})
