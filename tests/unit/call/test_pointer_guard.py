"""The Iceberg pointer guard's decision and its place in the plan, from plain values: which alters would lose
Iceberg commits, the metastore's check added to the ones that pass, and the plan that sends alters through it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from thrift.Thrift import TMessageType

from tests.support.health import PlainHealth
from waggle.call import pointer_guard as rule
from waggle.call.plan import plan
from waggle.call.values import Call, Kind, Refusal, Send, Session
from waggle.config.loader import load
from waggle.hms.fields import value_at
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header, Wire
from waggle.routes.snapshot import Routes
from waggle.routing.databases import PrefixedMap
from waggle.routing.federation import Planner
from waggle.upstream.capabilities import Capabilities

OLD, NOW, NEXT = "file:///w/t/metadata/00001.json", "file:///w/t/metadata/00002.json", "file:///w/t/metadata/3.json"
ICEBERG = {"table_type": "ICEBERG", "metadata_location": NOW, "previous_metadata_location": OLD}
GUARDED = ("alter_table", "alter_table_with_environment_context", "alter_table_with_cascade", "alter_table_req")


# -- the decision -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("new", "passes"), [
    ({**ICEBERG, "owner": "bob"}, True),  # the pointer kept as it is: any other change passes
    ({"table_type": "ICEBERG", "metadata_location": NEXT, "previous_metadata_location": NOW}, True),  # a commit
    (ICEBERG | {"metadata_location": OLD, "previous_metadata_location": "file:///w/t/metadata/00000.json"}, False),
    ({"table_type": "ICEBERG", "metadata_location": NEXT}, False),  # a new pointer, on top of nothing said
    ({"table_type": "ICEBERG", "metadata_location": NEXT, "previous_metadata_location": OLD}, False),  # too old
    ({"EXTERNAL": "TRUE", "numRows": "3"}, False),  # HiveServer2's stats alter: the pointer dropped
    ({}, False),
])
def test_an_iceberg_tables_alter_passes_only_when_it_keeps_or_commits_on_the_pointer(new: dict[str, str],
                                                                                     passes: bool) -> None:
    why = rule.why_refused(ICEBERG, new)
    assert (why is None) is passes, why


def test_a_table_without_a_pointer_is_no_iceberg_table_and_its_alters_pass() -> None:
    for current in (None, {}, {"EXTERNAL": "TRUE"}, {"table_type": "ICEBERG"}):
        assert rule.why_refused(current, {}) is None
        assert rule.why_refused(current, {"metadata_location": NEXT}) is None
    assert rule.pointer({"EXTERNAL": "TRUE"}) is None and rule.pointer(ICEBERG) == NOW


def test_the_refusal_says_what_the_alter_does_and_names_the_table_metastore_pointer_and_remedy() -> None:
    dropped = rule.why_refused(ICEBERG, {"EXTERNAL": "TRUE"})
    assert dropped == "drops metadata_location"
    stale = rule.why_refused(ICEBERG, {"metadata_location": OLD})
    assert stale is not None and OLD in stale and "previous_metadata_location unset" in stale
    text = rule.refusal("alter_table", "ops_scratch", "events", "ops", NOW, dropped)
    for part in ("alter_table", "Iceberg pointer guard", "'ops_scratch.events'", "metastore 'ops'", NOW,
                 "drops metadata_location", "Re-read the table and retry"):
        assert part in text, part


# -- the method table and the call's arguments ------------------------------------------------------------------
def _args(method: str, db: str = "fed_sales", table: str = "events", parameters: dict[str, str] | None = None,
          context: T.EnvironmentContext | None = None) -> Any:
    new = T.Table(dbName=db, tableName=table, parameters=parameters)
    io = METHOD_IO[method]
    if method == "alter_table_req":
        return io.args(req=T.AlterTableRequest(catName="hive", dbName=db, tableName=table, table=new,
                                               environmentContext=context))
    if method == "alter_table_with_environment_context":
        return io.args(dbname=db, tbl_name=table, new_tbl=new, environment_context=context)
    return io.args(dbname=db, tbl_name=table, new_tbl=new)


def test_every_alter_of_a_whole_table_object_is_guarded_and_nothing_else_is() -> None:
    assert {name for name, spec in METHODS.items() if spec.pointer_guard is not None} == set(GUARDED)
    for method in GUARDED:
        guard = METHODS[method].pointer_guard
        assert guard is not None
        args = _args(method, "@hive#sales" if method != "alter_table_req" else "sales", "events", ICEBERG)
        assert rule.named(args, guard)[1] == "events"
        assert rule.new_parameters(args, guard) == ICEBERG
        read = rule.read_request(args, guard)
        assert (read.catName, read.dbName, read.tblName) == ("hive", "sales", "events")
        assert METHOD_IO[guard.reads].args(req=read).req is read


def test_the_metastores_own_check_is_added_where_the_call_carries_a_context_and_the_client_set_none() -> None:
    for method in ("alter_table_with_environment_context", "alter_table_req"):
        guard = METHODS[method].pointer_guard
        assert guard is not None
        for context in (None, T.EnvironmentContext(properties={"DO_NOT_UPDATE_STATS": "true"})):
            args = _args(method, parameters=ICEBERG, context=context)
            checked = rule.with_expectation(args, guard, NOW)
            properties = value_at(checked, guard.context).properties
            assert properties["expected_parameter_key"] == "metadata_location"
            assert properties["expected_parameter_value"] == NOW
            assert ("DO_NOT_UPDATE_STATS" in properties) is (context is not None)
            assert value_at(args, guard.context) is context  # the call's own arguments stay as they came
            assert context is None or "expected_parameter_key" not in (context.properties or {})
        own = T.EnvironmentContext(properties={"expected_parameter_key": "metadata_location",
                                               "expected_parameter_value": OLD})
        assert rule.with_expectation(_args(method, parameters=ICEBERG, context=own), guard, NOW) is None
    for method in ("alter_table", "alter_table_with_cascade"):
        guard = METHODS[method].pointer_guard
        assert guard is not None and rule.with_expectation(_args(method, parameters=ICEBERG), guard, NOW) is None


# -- the plan ---------------------------------------------------------------------------------------------------
FEDERATION = {
    "primary-meta-store": {"name": "main", "remote-meta-store-uris": "thrift://127.0.0.1:9",
                           "access-control-type": "READ_AND_WRITE_AND_CREATE"},
    "federated-meta-stores": [
        {"name": "fed", "remote-meta-store-uris": "thrift://127.0.0.1:9", "database-prefix": "fed_",
         "access-control-type": "READ_AND_WRITE_ON_DATABASE_WHITELIST", "writable-database-white-list": ["sales"]},
        {"name": "ro", "remote-meta-store-uris": "thrift://127.0.0.1:9", "database-prefix": "ro_"},
    ],
}


def _routes(root: Path) -> Routes:
    (root / "server.yml").write_text(yaml.safe_dump({"database-resolution": "PREFIXED"}))
    (root / "federation.yml").write_text(yaml.safe_dump(FEDERATION))
    config = load(str(root / "server.yml"), str(root / "federation.yml"))
    fed = config.federation
    caps = {m.name: Capabilities(m) for m in fed.members}
    for known in caps.values():
        known.learn_catalogs(True)
    return Routes.of(config, planner=Planner(fed, config.server.database_resolution, PrefixedMap(fed)), caps=caps)


def _call(routes: Routes, method: str, args: Any) -> Call:
    wire = Wire(None, routes.config.server.wire, routes.config.server.limits)  # type: ignore[arg-type]
    raw = wire.encode(method, TMessageType.CALL, 5, args)
    return Call(Header(method, TMessageType.CALL, 5), METHODS[method], METHOD_IO[method], args, raw, Session(),
                routes.config.server.wire)


@pytest.mark.parametrize("method", GUARDED)
def test_an_alter_is_planned_through_the_guard_in_the_members_names(tmp_path: Path, method: str) -> None:
    routes = _routes(tmp_path)
    guard = METHODS[method].pointer_guard
    assert guard is not None
    for db, member, member_db in (("fed_sales", "fed", "sales"), ("sales", "main", "sales")):
        call = _call(routes, method, _args(method, db, "events", ICEBERG))
        step = plan(call, routes, PlainHealth(), {})
        assert isinstance(step, Send) and (step.kind, step.metastore) == (Kind.POINTER_GUARD, member)
        assert rule.named(step.args, guard) == (member_db, "events")  # the table is read by the member's names
        assert rule.named(call.args, guard) == (db, "events")  # and refused by the client's
    refused = plan(_call(routes, method, _args(method, "ro_web", "events", ICEBERG)), routes, PlainHealth(), {})
    assert isinstance(refused, Refusal) and refused.kind is Kind.REFUSE  # access control comes first
    down = plan(_call(routes, method, _args(method)), routes, PlainHealth({"fed"}), {})
    assert isinstance(down, Refusal) and down.kind is Kind.DOWN


def test_calls_that_are_no_whole_table_alter_are_sent_as_they_are(tmp_path: Path) -> None:
    routes = _routes(tmp_path)
    call = _call(routes, "drop_table", METHOD_IO["drop_table"].args(dbname="fed_sales", name="t", deleteData=False))
    step = plan(call, routes, PlainHealth(), {})
    assert isinstance(step, Send) and step.kind is Kind.SEND
