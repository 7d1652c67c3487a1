"""Error types Trino acts on, through waggle (real Hive 2.3 metastores; STUB Hive 3.1 / 4 members where named).

Trino's ThriftHiveMetastoreClient#getTable is ``alternativeCall(get_table_req, get_table)`` with
``defaultIsValidExceptionalResponse``: only NoSuchObjectException (or an "AccessControlException" message) is a
valid answer; any other error makes it try ``get_table``, and the first alternative that succeeds is remembered for
the catalog's lifetime. So waggle must answer ``get_table_req`` itself wherever it can (bridges, refusals as "no
such table"), and never with a MetaException that ``get_table`` would then answer. Trino's RetryDriver
(ThriftHiveMetastore#retry) retries every error but NoSuchObjectException: a member that is down must give a
MetaException naming it, never NoSuchObjectException, or the query fails without a retry.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.conftest import ClientsFederation
from tests.clients.replay import _Connection
from tests.support.compat import CompatFederation

pytestmark = pytest.mark.integration
CAPS = [2]  # ClientCapability.INSERT_ONLY_TABLES, as ThriftHiveMetastoreClient#getTable sends it


def _call(port: int, method: str, *args: Any) -> tuple[str, Any]:
    """("ok", reply) or (error type, error), on a connection of its own (Trino opens one per call)."""
    conn = _Connection("4.x", port, set_ugi=True)
    try:
        return "ok", getattr(conn.client, method)(*args)
    except Exception as exc:  # the type is the assertion
        return type(exc).__name__, exc
    finally:
        conn.close()


def _get_table_req(t: Any, db: str, table: str) -> Any:
    return t.GetTableRequest(dbName=db, tblName=table, capabilities=t.ClientCapabilities(values=CAPS))


def test_get_table_req_answers_wherever_get_table_would(clients_fed: ClientsFederation,
                                                        compat: CompatFederation) -> None:
    """Through waggle, get_table_req either answers or says NoSuchObjectException: on the primary, a prefixed
    member, a link, STUB Hive 3.1 and Hive 4.0.1 members (the latter without get_table: the fallback is bridged
    too), and for tables that do not exist or databases that are unknown."""
    from waggle.hms.gen.hive_metastore import ttypes as t

    fed = clients_fed
    present = [(fed.waggle.port, fed.read_db, "parts"), (fed.waggle.port, f"an_{fed.read_db}", "parts"),
               (fed.waggle.port, fed.link, "parts")]
    for release in ("3.1", "4.x"):
        present.append((compat.waggle.port, compat.databases[release][0], "plain"))
    for port, db, table in present:
        kind, reply = _call(port, "get_table_req", _get_table_req(t, db, table))
        assert kind == "ok" and reply.table.tableName == table and reply.table.dbName == db, (db, kind, reply)
        kind, reply = _call(port, "get_table", db, table)  # Trino's alternative, were it ever pinned
        assert kind == "ok" and reply.tableName == table, (db, kind, reply)
    absent = [(fed.waggle.port, fed.read_db, "nope"), (fed.waggle.port, f"an_{fed.read_db}", "nope"),
              (fed.waggle.port, fed.link, "nope"), (fed.waggle.port, "an_no_such_db", "t"),
              (compat.waggle.port, compat.databases["4.x"][0], "nope")]
    for port, db, table in absent:
        kind, reply = _call(port, "get_table_req", _get_table_req(t, db, table))
        assert kind == "NoSuchObjectException", (db, table, kind, reply)


def test_get_table_req_on_hidden_names_is_no_such_object(waggle: Any) -> None:
    """Refusals by mapped-databases and mapped-tables (session federation: analytics shows sales, web and
    default, and of web only visits and page_*) answer get_table_req as NoSuchObjectException, which Trino
    takes as "no such table" without leaving get_table_req."""
    from waggle.hms.gen.hive_metastore import ttypes as t

    for db, table in (("analytics_secret", "keys"), ("analytics_web", "internal")):
        kind, reply = _call(waggle.port, "get_table_req", _get_table_req(t, db, table))
        assert kind == "NoSuchObjectException", (db, table, kind, reply)
    kind, reply = _call(waggle.port, "get_table_req", _get_table_req(t, "analytics_web", "visits"))
    assert kind == "ok" and reply.table.dbName == "analytics_web"


def test_a_down_member_gives_trino_a_retryable_error(clients_fed: ClientsFederation) -> None:
    """Every read Trino sends, on a database of a member that is down (``gone_``: nothing listens on its port),
    is a MetaException naming the member: RetryDriver retries it; NoSuchObjectException would stop the retries
    and report a missing table. Neither get_table_req nor get_table succeeds, so Trino's alternativeCall
    remembers no alternative."""
    from waggle.hms.gen.hive_metastore import ttypes as t

    db = "gone_sales"
    calls = [
        ("get_database", (db,)),
        ("get_table_req", (_get_table_req(t, db, "orders"),)),
        ("get_table", (db, "orders")),
        ("get_table_meta", (db, "*", [])),
        ("get_all_tables", (db,)),
        ("get_tables_by_type", (db, ".*", "VIRTUAL_VIEW")),
        ("get_partition_names", (db, "orders", -1)),
        ("get_partition_names_ps", (db, "orders", ["x"], -1)),
        ("get_partitions_by_names", (db, "orders", ["ds=1"])),
        ("get_table_statistics_req", (t.TableStatsRequest(dbName=db, tblName="orders", colNames=["id"]),)),
        ("get_partitions_statistics_req", (t.PartitionsStatsRequest(dbName=db, tblName="orders", colNames=["id"],
                                                                   partNames=["ds=1"]),)),
        ("get_fields", (db, "orders")),
    ]
    for method, args in calls:
        kind, reply = _call(clients_fed.waggle.port, method, *args)
        assert kind == "MetaException", (method, kind, reply)
        assert "'gone'" in str(reply.message), (method, reply.message)
