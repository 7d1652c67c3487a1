"""The call core's last step on plain values: the outcome a reply is logged with, and the tables ``mapped-tables``
leaves out of a member's replies. No Runtime, no socket."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from thrift.Thrift import TMessageType

from waggle.call import finish
from waggle.config.loader import load
from waggle.config.model import MetastoreConfig
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header
from waggle.upstream.client import Reply

FEDERATION = """\
primary-meta-store: {name: p, remote-meta-store-uris: "thrift://h:1"}
federated-meta-stores:
- name: analytics
  remote-meta-store-uris: thrift://h:2
  database-prefix: an_
  mapped-tables:
  - database: sales
    mapped-tables: [orders, tbl_.*]
"""


@pytest.fixture
def member(tmp_path: Path) -> MetastoreConfig:
    (tmp_path / "s.yml").write_text("database-resolution: PREFIXED\n")
    (tmp_path / "f.yml").write_text(FEDERATION)
    return load(str(tmp_path / "s.yml"), str(tmp_path / "f.yml")).federation.member("analytics")


def _reply(mtype: int, first_field: int) -> Reply:
    return Reply(Header("get_table", mtype, 1), b"", first_field, 0)


def test_a_reply_is_logged_as_what_it_carries() -> None:
    io = METHOD_IO["get_table"]
    assert finish.outcome(None, io) == "sent"
    assert finish.outcome(_reply(TMessageType.EXCEPTION, 0), io) == "application_error"
    assert finish.outcome(_reply(TMessageType.REPLY, 0), io) == "ok"
    assert finish.outcome(_reply(TMessageType.REPLY, -1), io) == "ok"  # a void reply
    assert finish.outcome(_reply(TMessageType.REPLY, 1), io) == "MetaException"
    assert finish.outcome(_reply(TMessageType.REPLY, 2), io) == "NoSuchObjectException"
    assert finish.outcome(_reply(TMessageType.REPLY, 9), io) == "exception"  # a field the method does not declare
    assert finish.outcome(_reply(TMessageType.REPLY, 1), None) == "exception"


def _tables(*names: str, db: str = "sales") -> list[T.Table]:
    return [T.Table(dbName=db, tableName=n) for n in names]


def test_mapped_tables_filters_a_listing_of_table_names(member: MetastoreConfig) -> None:
    result = METHOD_IO["get_all_tables"].result(success=["orders", "tbl_a", "secret"])
    finish._filter_tables(result, member, SimpleNamespace(requested=("sales",)), METHODS["get_all_tables"])
    assert result.success == ["orders", "tbl_a"]
    other = METHOD_IO["get_all_tables"].result(success=["anything"])  # a database mapped-tables does not list
    finish._filter_tables(other, member, SimpleNamespace(requested=("web",)), METHODS["get_all_tables"])
    assert other.success == ["anything"]
    unnamed = METHOD_IO["get_all_tables"].result(success=["secret"])  # no database asked: nothing to judge by
    finish._filter_tables(unnamed, member, SimpleNamespace(requested=()), METHODS["get_all_tables"])
    assert unnamed.success == ["secret"]


def test_mapped_tables_filters_table_objects_in_a_list_and_in_a_request_result(member: MetastoreConfig) -> None:
    decision = SimpleNamespace(requested=("sales",))
    listed = METHOD_IO["get_table_objects_by_name"].result(success=_tables("orders", "secret", "tbl_b"))
    finish._filter_tables(listed, member, decision, METHODS["get_table_objects_by_name"])
    assert [t.tableName for t in listed.success] == ["orders", "tbl_b"]
    wrapped = METHOD_IO["get_table_objects_by_name_req"].result(
        success=T.GetTablesResult(tables=_tables("secret", "orders") + _tables("secret", db="web")))
    finish._filter_tables(wrapped, member, decision, METHODS["get_table_objects_by_name_req"])
    assert [(t.dbName, t.tableName) for t in wrapped.success.tables] == [("sales", "orders"), ("web", "secret")]
    failed = METHOD_IO["get_table_objects_by_name"].result()  # an exception reply: no success to filter
    finish._filter_tables(failed, member, decision, METHODS["get_table_objects_by_name"])
    assert failed.success is None
