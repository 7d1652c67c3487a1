"""The plain relay (waggle.call.lane) decides exactly what plan() would: for every method in the table, under
plain, prefixed and MANUAL snapshots, with links, with a member down and with a member lacking methods, a lane
relays a call only where plan() makes a plain relayed Send (unchanged names and bytes, no bridge, nothing done to
the reply) and a success reply is relayed byte for byte; where it plans a call in a member's names, its plan is
plan()'s. Plain values: no Runtime, no socket."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from thrift.Thrift import TMessageType, TType

from tests.support.health import PlainHealth
from waggle.call import finish
from waggle.call.lane import lane_for, lane_of
from waggle.call.plan import plan
from waggle.call.values import Call, Kind, Send, Session
from waggle.config.loader import load
from waggle.config.model import DatabaseResolution
from waggle.hms.fields import replaced
from waggle.hms.methods import METHODS, Access
from waggle.hms.rewrite import CALL_NAMES
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header, Wire
from waggle.remotes.registry import LinkRegistry
from waggle.routes.snapshot import Routes
from waggle.routing.databases import DatabaseMap, ManualMap, PrefixedMap
from waggle.routing.federation import Planner
from waggle.upstream.capabilities import Capabilities
from waggle.upstream.client import Reply

PRIMARY = {"name": "main", "remote-meta-store-uris": "thrift://127.0.0.1:9",
           "access-control-type": "READ_AND_WRITE_AND_CREATE"}
MEMBERS = [
    {"name": "fed", "remote-meta-store-uris": "thrift://127.0.0.1:9", "database-prefix": "fed_",
     "access-control-type": "READ_AND_WRITE_ON_DATABASE_WHITELIST", "writable-database-white-list": ["sales"]},
    {"name": "ro", "remote-meta-store-uris": "thrift://127.0.0.1:9", "database-prefix": "ro_",
     "hive-version": "2.3"},
]
#: the databases calls name: the primary's, a prefixed member's, a Hive 2.3 member's, catalog-qualified, unknown
DATABASES = ("sales", "fed_sales", "ro_web", "fedonly", "web", "@hive#sales", "@spark#fed_sales", "nosuch")


@dataclass
class Snapshot:
    routes: Routes
    health: PlainHealth = field(default_factory=PlainHealth)


def _routes(root: Path, mode: str, members: list[dict[str, Any]], caps: Callable[[Capabilities], None] | None = None,
            server: dict[str, Any] | None = None) -> Routes:
    (root / "server.yml").write_text(yaml.safe_dump({"database-resolution": mode, **(server or {})}))
    (root / "federation.yml").write_text(yaml.safe_dump({"primary-meta-store": PRIMARY,
                                                         "federated-meta-stores": members}))
    config = load(str(root / "server.yml"), str(root / "federation.yml"))
    fed = config.federation
    dbmap: DatabaseMap
    if config.server.database_resolution is DatabaseResolution.PREFIXED:
        dbmap = PrefixedMap(fed)
    else:
        dbmap = ManualMap.build(fed, {"main": ["sales"], "fed": ["fedonly"], "ro": ["web"]})
    planner = Planner(fed, config.server.database_resolution, dbmap)
    known = {m.name: Capabilities(m) for m in fed.members}
    for capabilities in known.values():
        capabilities.learn_catalogs(False)  # asked once: as a Hive 2 metastore answers
        if caps is not None:
            caps(capabilities)
    return Routes.of(config, planner=planner, caps=known)


def _lacking(capabilities: Capabilities) -> None:
    for name, spec in METHODS.items():
        if spec.bridge is not None:
            capabilities.missing.add(name)


def _snapshots(root: Path) -> dict[str, Snapshot]:
    def at(name: str) -> Path:
        (root / name).mkdir()
        return root / name

    prefixed = _routes(at("prefixed"), "PREFIXED", MEMBERS)
    return {
        "plain": Snapshot(_routes(at("plain"), "PREFIXED", [])),
        "prefixed": Snapshot(prefixed),
        "manual": Snapshot(_routes(at("manual"), "MANUAL", [{k: v for k, v in m.items() if k != "database-prefix"}
                                                            for m in MEMBERS])),
        "links": Snapshot(replace(prefixed, registry=LinkRegistry())),
        "primary-down": Snapshot(prefixed, PlainHealth({"main"})),
        "member-down": Snapshot(_routes(at("down"), "MANUAL", [{k: v for k, v in m.items() if k != "database-prefix"}
                                                               for m in MEMBERS]), PlainHealth({"fed"})),
        "lacking": Snapshot(_routes(at("lacking"), "PREFIXED", MEMBERS, _lacking)),
        "catalogs-unknown": Snapshot(_routes(at("unknown"), "PREFIXED", MEMBERS,
                                             lambda c: setattr(c, "catalogs", None))),
    }


def _value(ttype: int, targs: Any, depth: int) -> Any:
    if ttype == TType.STRING:
        return b"t1" if targs == "BINARY" else "t1"
    if ttype in (TType.BYTE, TType.I16, TType.I32, TType.I64):
        return 1
    if ttype == TType.BOOL:
        return False
    if ttype == TType.DOUBLE:
        return 1.0
    if ttype == TType.STRUCT:
        return _filled(targs[0], depth + 1)
    if ttype in (TType.LIST, TType.SET):
        item = _value(targs[0], targs[1], depth + 1)
        return [item] if ttype == TType.LIST else {item}
    return {}


def _filled(cls: type, depth: int = 0) -> Any:
    """An instance of ``cls`` with every field set (one element per list), a few structs deep."""
    obj = cls()
    if depth > 3:
        return obj
    for spec in getattr(cls, "thrift_spec", None) or ():
        if spec is not None:
            try:
                setattr(obj, spec[2], _value(spec[1], spec[3], depth))
            except TypeError:  # an unhashable struct in a set: leave it empty
                setattr(obj, spec[2], None)
    return obj


def _calls(routes: Routes, method: str) -> list[Call]:
    """Calls of ``method`` naming each database, with and without the catalog fields of its request."""
    io, spec = METHOD_IO[method], METHODS[method]
    wire = Wire(None, routes.config.server.wire, routes.config.server.limits)  # type: ignore[arg-type]
    out = []
    for database in DATABASES:
        for catalogs in (False, True):
            args = _filled(io.args)
            CALL_NAMES.rewrite(args, lambda _name, db=database: db)
            if not catalogs:
                args = replaced(args, [(path, None) for path in spec.catalog_fields])
            elif not spec.catalog_fields:
                continue
            try:
                raw = wire.encode(method, TMessageType.CALL, 7, args)
            except Exception:  # a filled value the codec does not take: that call is not made
                continue
            mtype = TMessageType.ONEWAY if io.result is None else TMessageType.CALL
            out.append(Call(Header(method, mtype, 7), spec, io, args, raw, Session(), routes.config.server.wire))
    return out


def test_a_lane_relays_exactly_where_the_plan_is_a_plain_relay(tmp_path: Path) -> None:
    taken: dict[str, set[str]] = {}
    renamed: dict[str, set[str]] = {}
    for label, snapshot in _snapshots(tmp_path).items():
        routes, health = snapshot.routes, snapshot.health
        for method in METHODS:
            lane = lane_for(routes, method, METHODS[method], METHOD_IO.get(method))
            for call in _calls(routes, method):
                step = plan(call, routes, health, {})
                choice = lane.choose(call.args, health, call.wire) if lane is not None else None
                if choice is None:
                    continue
                where = f"{label}: {method} {call.args!r:.200}"
                assert lane is not None and lane.send(call, choice, health) == step, where
                assert isinstance(step, Send) and step.kind is Kind.SEND and not step.bridge, where
                assert step.fill is None and step.link is None and step.table_link is None, where
                assert step.wire == call.wire and step.naming is not None, where
                if choice.renamed:
                    assert step.raw is None and step.args is not call.args and not step.naming.identity, where
                    renamed.setdefault(label, set()).add(method)
                    continue
                assert step.raw is call.raw and step.args is call.args and not step.rewrite_reply, where
                assert step.naming.identity and step.metastore == choice.member.name, where
                # a success is relayed byte for byte, and leaves nothing behind
                assert call.io is not None and call.io.result is not None
                body = Wire(None, routes.config.server.wire, routes.config.server.limits).encode(  # type: ignore[arg-type]
                    method, TMessageType.REPLY, 7, call.io.result())
                answer = finish.reply(step, Reply(Header(method, TMessageType.REPLY, 7), body, 0, 0), _NoEncoder())
                assert (answer.raw, answer.outcome, answer.settled, answer.bridge_instead) == (body, "ok", None, False)
                taken.setdefault(label, set()).add(method)
    # the lane is not idle: reads of the primary's databases, and of MANUAL members' (names unchanged)
    assert {"get_table", "get_database", "get_partitions"} <= taken["plain"]
    assert {"get_table", "get_database"} <= taken["prefixed"] and {"get_table"} <= taken["manual"]
    # never where links may stand for any name, nor for a member that is down
    assert "links" not in taken
    assert "get_table" not in taken.get("primary-down", set())
    # a member lacking a method is never relayed to for it (bridged by the plan)
    # behind a prefix, reads are planned by the lane in the member's names
    assert {"get_table", "get_database"} <= renamed["prefixed"] and "links" not in renamed
    # (the equivalence above covers each call; some bridges apply only to some arguments)
    assert {"get_database_req", "get_partition_req"} <= taken["prefixed"]
    assert taken["lacking"] and not {"get_table", "get_database_req", "get_partition_req"} & taken["lacking"]


class _NoEncoder:
    def encode(self, name: str, mtype: int, seqid: int, obj: Any) -> bytes:
        pytest.fail("a relayed reply is not encoded again")

    def encode_application_error(self, name: str, seqid: int, kind: int, message: str) -> bytes:
        pytest.fail("a relayed reply is not encoded again")


def test_a_lane_is_decided_once_per_snapshot_and_only_for_plain_reads(tmp_path: Path) -> None:
    snapshots = _snapshots(tmp_path)
    routes = snapshots["prefixed"].routes
    get_table = lane_for(routes, "get_table", METHODS["get_table"], METHOD_IO["get_table"])
    assert get_table is not None
    assert lane_for(routes, "get_table", METHODS["get_table"], METHOD_IO["get_table"]) is get_table
    for method in ("create_table", "get_databases", "lock", "check_lock", "set_ugi"):
        assert lane_for(routes, method, METHODS[method], METHOD_IO[method]) is None, method
    assert lane_for(routes, "no_such_method", None, None) is None
    links = snapshots["links"].routes  # shares the memo of the snapshot it was made from
    assert lane_for(links, "get_table", METHODS["get_table"], METHOD_IO["get_table"]) is None


def test_no_lane_relays_an_alter_past_the_iceberg_pointer_guard(tmp_path: Path) -> None:
    """A lane relays reads only; were a guarded method ever a read, the guard alone would still rule it out."""
    routes = _snapshots(tmp_path)["prefixed"].routes
    for name, spec in METHODS.items():
        if spec.pointer_guard is not None:
            io = METHOD_IO[name]
            assert lane_for(routes, name, spec, io) is None, name
            assert lane_of(routes, replace(spec, access=Access.READ), io) is None, name
            assert lane_of(routes, replace(spec, access=Access.READ, pointer_guard=None), io) is not None, name
