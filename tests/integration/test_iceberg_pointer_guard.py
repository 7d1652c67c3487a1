"""The Iceberg pointer guard with real metastores: a client that does not know Iceberg sends an alter with a table
object read before someone else's commit, and waggle refuses it (on the primary and on a member behind its prefix)
before it reaches the metastore; the table keeps every commit, honest Iceberg commits go on, and a table that is
no Iceberg table is altered as before."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.integration.test_iceberg_pyiceberg import _catalog, _rows, _schema
from tests.support.audit import audit_text
from tests.support.clients import hive2_client

pytestmark = pytest.mark.integration


def _plain_table(db: str, name: str, location: str) -> Any:
    """A Hive table (no Iceberg), as hmsclient spells it."""
    from hmsclient.genthrift.hive_metastore import ttypes as h

    serde = h.SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", parameters={})
    sd = h.StorageDescriptor(cols=[h.FieldSchema("id", "bigint", None)], location=location,
                             inputFormat="org.apache.hadoop.mapred.TextInputFormat",
                             outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                             serdeInfo=serde, bucketCols=[], sortCols=[], parameters={})
    return h.Table(tableName=name, dbName=db, owner="alice", sd=sd, partitionKeys=[], parameters={"EXTERNAL": "TRUE"},
                   tableType="EXTERNAL_TABLE")


def _refused(alter: Any) -> str:
    """The refusal's text: a MetaException from waggle's guard."""
    with pytest.raises(Exception) as refused:
        alter()
    assert type(refused.value).__name__ == "MetaException", repr(refused.value)
    message = str(getattr(refused.value, "message", refused.value))
    assert "Iceberg pointer guard" in message and "Re-read the table and retry" in message, message
    return message


@pytest.mark.parametrize("where", ["primary", "member"])
def test_a_stale_alter_of_an_iceberg_table_is_refused_and_the_table_keeps_its_commits(where, waggle, primary, ops,
                                                                                     tmp_path):
    from hmsclient.genthrift.hive_metastore import ttypes as h

    cat = _catalog(waggle, tmp_path)
    name = f"guarded_{uuid.uuid4().hex[:8]}"
    if where == "primary":
        db = member_db = f"ice_{uuid.uuid4().hex[:8]}"
        cat.create_namespace(db)
        store, metastore = primary, "primary"
    else:
        db, member_db, store, metastore = "ops_scratch", "scratch", ops, "ops"
    table = cat.create_table(f"{db}.{name}", schema=_schema())
    table.append(_rows(3))
    with hive2_client(waggle.port) as c:
        stale = c.get_table(db, name)  # read through waggle, in waggle's names
    table.append(_rows(2, start=3))  # someone else's commit moves the pointer
    pointer = table.metadata_location
    assert stale.parameters["metadata_location"] != pointer

    before = len(audit_text(store))
    with hive2_client(waggle.port) as c:
        message = _refused(lambda: c.alter_table(db, name, stale))
        assert f"'{db}.{name}'" in message and f"metastore '{metastore}'" in message and pointer in message
        _refused(lambda: c.alter_table_with_environment_context(
            db, name, stale, h.EnvironmentContext(properties={"DO_NOT_UPDATE_STATS": "true"})))
        # an object read after the commit, whose parameters lack the pointer (HiveServer2's stats alter)
        dropped = c.get_table(db, name)
        dropped.parameters = {"EXTERNAL": "TRUE", "numRows": "5"}
        assert "drops metadata_location" in _refused(lambda: c.alter_table(db, name, dropped))
        assert "default" in c.get_all_databases()  # the connection goes on
    reached = audit_text(store)[before:]
    assert "alter_table" not in reached, reached  # the guard read the table; nothing was altered

    with hive2_client(store.port) as c:
        current = c.get_table(member_db, name)
        assert current.parameters["metadata_location"] == pointer
        # the check waggle adds to a passing alter's context, enforced by the metastore itself (HIVE-26882)
        moved = h.EnvironmentContext(properties={"expected_parameter_key": "metadata_location",
                                                 "expected_parameter_value": stale.parameters["metadata_location"]})
        with pytest.raises(h.MetaException, match="The table has been modified"):
            c.alter_table_with_environment_context(member_db, name, current, moved)
    loaded = cat.load_table(f"{db}.{name}")
    assert sorted(loaded.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]
    loaded.append(_rows(1, start=5))  # an honest commit passes (sent with the metastore's own check)
    assert cat.load_table(f"{db}.{name}").scan().to_arrow().num_rows == 6

    with hive2_client(waggle.port) as c:  # an alter that keeps the current pointer passes
        fresh = c.get_table(db, name)
        fresh.parameters["comment"] = "kept"
        c.alter_table(db, name, fresh)
        assert c.get_table(db, name).parameters["comment"] == "kept"
        plain = f"plain_{name}"  # a table that is no Iceberg table: its alters pass, pointer or not
        c.create_table(_plain_table(db, plain, f"file://{tmp_path}/{plain}"))
        hive = c.get_table(db, plain)
        hive.parameters["numRows"] = "7"
        c.alter_table(db, plain, hive)
        assert c.get_table(db, plain).parameters["numRows"] == "7"
        c.drop_table(db, plain, False)
    assert cat.load_table(f"{db}.{name}").scan().to_arrow().num_rows == 6
    cat.drop_table(f"{db}.{name}")
    if where == "primary":
        cat.drop_namespace(db)
