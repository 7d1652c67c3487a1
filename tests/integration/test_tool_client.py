"""The one client every tool uses (waggle.upstream.blocking), against a real Hive 2.3 metastore that speaks
framed Thrift with the compact protocol (Hive's own ``hive.metastore.thrift.framed.transport.enabled`` and
``hive.metastore.thrift.compact.protocol.enabled``): the member's wire format comes from the federation file, as
the proxy reads it, and the sync mirrors through it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from thrift.transport.TTransport import TTransportException

from tests.support.env import ROOT, java_available, require
from tests.support.federation import federation_yaml
from waggle.config.loader import load
from waggle.config.model import ProtocolKind, TransportKind
from waggle.local.client import hms_client
from waggle.local.metastore import COMPACT_KEY, FRAMED_KEY, LocalMetastore
from waggle.local.seed import ensure_database, ensure_table
from waggle.upstream.blocking import MetastoreUnavailable, client, reach

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def framed_compact(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalMetastore]:
    require(java_available(), "Java 17 is needed to run the local Hive metastores")
    store = LocalMetastore(tmp_path_factory.mktemp("framed-compact"),
                           extra_conf={FRAMED_KEY: "true", COMPACT_KEY: "true"}).start()
    try:
        store.wait_ready(180)
        yield store
    finally:
        store.stop()


def federation(tmp_path: Path, primary: Any, store: LocalMetastore) -> Path:
    path = tmp_path / "federation.yml"
    path.write_text(federation_yaml(primary.uri, "federated-meta-stores:\n"
                                                 "- name: dense\n"
                                                 f"  remote-meta-store-uris: {store.uri}\n"
                                                 "  database-prefix: dense_\n"
                                                 "  configuration-properties:\n"
                                                 f"    {FRAMED_KEY}: true\n"
                                                 f"    {COMPACT_KEY}: true\n"))
    return path


def test_a_framed_compact_member_is_reached_and_mirrored(framed_compact: LocalMetastore, primary: Any,
                                                         tmp_path: Path) -> None:
    fed = federation(tmp_path, primary, framed_compact)
    member = next(m for m in load(None, str(fed)).federation.members if m.name == "dense")
    assert (member.wire.transport, member.wire.protocol) == (TransportKind.FRAMED, ProtocolKind.COMPACT)
    wh = f"file://{framed_compact.warehouse}/dense_src.db"
    with client(member, None, 60) as c:
        ensure_database(c, "dense_src", wh)
        ensure_table(c, "dense_src", "people", f"{wh}/people", [("id", "int"), ("name", "string")],
                     rows=["1,ann", "2,bob"])
    assert reach(member, None).startswith(f"{framed_compact.uri}, no Kerberos; ")
    # the plain client (unframed binary) is refused by it: the wire format really is the member's
    with pytest.raises(TTransportException), hms_client("127.0.0.1", framed_compact.port, timeout=5) as c:
        c.get_all_databases()

    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "waggle", "sync", "--federation-config", str(fed), "--source",
                           "dense", "--tables", "dense_src.people", "--target-database", "dense_mirror",
                           "--report", str(report), "--no-progress"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [t["status"] for t in json.loads(report.read_text())["tables"]] == ["ok"]
    with hms_client("127.0.0.1", primary.port) as c:
        assert str(framed_compact.warehouse) in c.get_table("dense_mirror", "people").sd.location


def test_an_unreachable_member_is_an_error_naming_it(primary: Any, tmp_path: Path) -> None:
    from waggle.local.jvm import free_port

    fed = tmp_path / "federation.yml"
    dead = free_port()
    fed.write_text(federation_yaml(primary.uri, "federated-meta-stores:\n- name: gone\n"
                                                f"  remote-meta-store-uris: thrift://127.0.0.1:{dead}\n"))
    member = next(m for m in load(None, str(fed)).federation.members if m.name == "gone")
    with pytest.raises(MetastoreUnavailable, match=rf"^metastore 'gone' is unreachable: thrift://127.0.0.1:{dead}: "):
        reach(member, None)
