"""The client-sequence suite's federation: waggle (PREFIXED, links enabled) over the session's real Hive 2.3
primary and analytics metastores, plus stub Hive 3.1 / 4 metastores around the same two (the "direct" side of
the Hive 3.1 and Hive 4 sequences), started once for the suite.

* primary: the real primary, unprefixed, read-write, ``cache: events``.
* ``an_``: the real analytics metastore, writable for databases ``cs_*`` (the suite's own), ``cache: events``.
* ``gone_``: a member whose port has nothing listening (a metastore that is down).
* links: ``remote-databases`` enabled for member ``an``, read-only (the default).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.clients import hive2_client
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess

SERVER = """\
database-resolution: PREFIXED
remote-databases:
  enabled: true
  allowed-metastores: [an]
logging:
  level: debug
  format: json
"""


@dataclass
class ClientsFederation:
    waggle: WaggleProcess
    stores: dict[str, Any]  # "primary" / "member" -> the real metastore
    stubs: dict[tuple[str, str], Any]  # (release, "primary" | "member") -> stub around that metastore
    read_db: str  # seeded in both metastores
    link: str  # a link (through waggle) to the member's read_db
    dead_member: str = "gone"

    def direct_port(self, release: str, where: str) -> int:
        if release in ("3.1", "4.x") and (release, where) in self.stubs:
            return int(self.stubs[(release, where)].port)
        return int(self.stores[where].port)


def seed_database(port: int, warehouse: Any, db: str) -> None:
    """``plain`` (two rows, column statistics) and ``parts`` (three partitions by ``ds``, partition column
    statistics), written straight into a metastore."""
    from hmsclient.genthrift.hive_metastore import ttypes as t

    from tests.clients.sequences import SEEDED_PARTITIONS, Names, long_stats, new_partition, new_table

    root = f"file://{warehouse}/{db}.db"
    n = Names(db)
    with hive2_client(port) as c:
        c.create_database(t.Database(name=db, description="client sequences", locationUri=root, parameters={}))
        plain = new_table(t, n, "plain", owner="seed", params={"EXTERNAL": "FALSE"})
        c.create_table(plain)
        parts = new_table(t, n, "parts", parts=[("ds", "string")], owner="seed")
        c.create_table(parts)
        c.add_partitions([new_partition(t, n, "parts", v) for v in SEEDED_PARTITIONS])
        c.update_table_column_statistics(long_stats(t, n, "plain"))
        for v in SEEDED_PARTITIONS:
            c.update_partition_column_statistics(long_stats(t, n, "parts", f"ds={v}"))


def drop_database(port: int, db: str) -> None:
    with hive2_client(port) as c:
        try:
            c.drop_database(db, True, True)
        except Exception:
            pass


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def clients_fed(primary: Any, analytics: Any, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[ClientsFederation]:
    from tests.support.hive_stubs import Hive4StubMetastore, Hive31StubMetastore
    from waggle.local.jvm import free_port

    members = ("  cache: events\n"  # every sequence runs with the cache on: its replies must still be direct's
               "federated-meta-stores:\n"
               f"- name: an\n  remote-meta-store-uris: {analytics.uri}\n  database-prefix: an_\n"
               "  cache: events\n"
               "  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n"
               "  writable-database-white-list: ['cs_.*']\n"
               f"- name: gone\n  remote-meta-store-uris: thrift://127.0.0.1:{free_port()}\n"
               "  database-prefix: gone_\n")
    stores = {"primary": primary, "member": analytics}
    read_db = unique("cs_r")
    for store in stores.values():
        seed_database(store.port, store.warehouse, read_db)
    stubs: dict[tuple[str, str], Any] = {}
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle-clients"), federation_yaml(primary.uri, members), SERVER)
    try:
        for where, store in stores.items():
            stubs[("3.1", where)] = Hive31StubMetastore("127.0.0.1", store.port).start()
            stubs[("4.x", where)] = Hive4StubMetastore("127.0.0.1", store.port).start()
        proc.start()
        link = unique("cs_link")
        make_link(proc.port, link, read_db)
        yield ClientsFederation(proc, stores, stubs, read_db, link)
    finally:
        proc.stop()
        for stub in stubs.values():
            stub.stop()
        for store in stores.values():
            drop_database(store.port, read_db)


def make_link(port: int, name: str, remote_db: str) -> None:
    from hmsclient.genthrift.hive_metastore import ttypes as t

    with hive2_client(port) as c:
        c.create_database(t.Database(name=name, description="", parameters={
            "waggle.remote.metastore": "an", "waggle.remote.database": remote_db}))
