"""Version bridging: waggle over a real Hive 2.3 primary and stub Hive 3.1 / 4.0.1 members."""

from __future__ import annotations

from typing import Any

from tests.support.clients import hive2_client
from tests.support.proxy import WaggleProcess


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


def seed_compat_db(store: Any, db: str) -> None:
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
