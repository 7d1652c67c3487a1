"""Reads from copies in the call core's plans (waggle.copies.planning.choose, waggle.call.plan.plan, the fan-out's
merge and the plain relay's lane), with plain values: a Routes snapshot carrying Copies, health as a set of
members that are down. No socket, no metastore, no Java."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from thrift.Thrift import TMessageType

from tests.support.copies_core import client_wire, lake_routes
from tests.support.health import PlainHealth
from waggle.call import finish, merge
from waggle.call.lane import lane_for
from waggle.call.plan import plan
from waggle.call.values import Answer, Call, FanOut, Kind, Learned, Paired, Refusal, Send, Session
from waggle.config.model import WaggleConfig
from waggle.copies import planning
from waggle.copies.catalog import Copies, Copy
from waggle.hms.decode import decode_message
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.rewrite import CALL_NAMES
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header
from waggle.routes.snapshot import Routes
from waggle.routing.federation import Refused
from waggle.synced import objects as o
from waggle.upstream.outcome import Outcome

SHARED_READ, SHARED_WRITE, EXCLUSIVE = T.LockType.SHARED_READ, T.LockType.SHARED_WRITE, T.LockType.EXCLUSIVE
TABLE_LEVEL = 2
METADATA = "hdfs://main/warehouse/ice_copy.db/t2/metadata/00003-abc.metadata.json"


@dataclass
class Core:
    config: WaggleConfig
    routes: Routes
    health: PlainHealth = field(default_factory=PlainHealth)

    def down(self, name: str = "lake") -> Core:
        self.health.down.add(name)
        return self


def _core(root: Path, copies: list[Copy] | None = None, **lake: Any) -> Core:
    return Core(*lake_routes(root, _copies() if copies is None else copies, **lake))


def _copies(t2_mode: str = o.COPY, age: float = 60.0) -> list[Copy]:
    """lake's ice.t2 (partitioned by dt, an Iceberg copy) and ice.t3 copied into the primary's ice_copy;
    lake's web has no copies."""
    at = time.time() - age
    return [Copy("lake", "ice", "t2", "ice_copy", "t2", t2_mode, at, ("dt",), METADATA, "hdfs://main/ice_copy.db/t2"),
            Copy("lake", "ice", "t3", "ice_copy", "t3", o.COPY, at)]


def _when_down(root: Path, **settings: Any) -> Core:
    return _core(root / "when-down", **{"read-from-copies": "when-down", **settings})


def _prefer(root: Path, copies: list[Copy] | None = None, **settings: Any) -> Core:
    return _core(root / "prefer", copies, **{"read-from-copies": "prefer", **settings})


def _call(core: Core, method: str, /, **fields: Any) -> Call:
    io = METHOD_IO[method]
    args = io.args(**fields)
    raw = client_wire(core.config).encode(method, TMessageType.CALL, 7, args)
    return Call(Header(method, TMessageType.CALL, 7), METHODS[method], io, args, raw, Session(),
                core.config.server.wire)


def _plan(core: Core, method: str, /, **fields: Any) -> Any:
    return plan(_call(core, method, **fields), core.routes, core.health, {}, Learned())


def _decoded(core: Core, answer: Answer, method: str) -> Any:
    assert answer.raw is not None
    return decode_message(answer.raw, core.config.server.wire.protocol, METHOD_IO[method].result,
                          core.config.server.limits)[1]


def _error(result: Any) -> T.MetaException:
    """The MetaException a decoded result carries (whichever field it is declared in)."""
    (error,) = [getattr(result, f[2]) for f in type(result).thrift_spec if f and getattr(result, f[2]) is not None]
    assert isinstance(error, T.MetaException), error
    return error


def _choose(core: Core, method: str, up: bool, /, **fields: Any) -> planning.Choice | None:
    call = _call(core, method, **fields)
    lake = core.config.federation.member("lake")
    facts = planning.Facts(core.routes.copies, up, True, time.time(), "main")
    return planning.choose(METHODS[method], METHOD_IO[method], call.args, CALL_NAMES.names_in(call.args),
                           core.routes.planner.naming(lake), facts)


def _from_copy(step: Any, reason: str, args: Any) -> Send:
    """A Send to the primary about the copy, its reply to be made the source's."""
    assert isinstance(step, Send), step
    assert (step.kind, step.metastore, step.args) == (Kind.COPY, "main", args)
    assert step.copy is not None and step.copy.reason == reason and step.copy.member == "lake"
    assert step.rewrite_reply and not step.stream and step.raw is None
    return step


def _to_lake(step: Any, args: Any) -> Send:
    assert isinstance(step, Send), step
    assert (step.kind, step.metastore, step.args, step.copy) == (Kind.SEND, "lake", args, None)
    return step


# -- choose: the pure decision -------------------------------------------------------------------------------------
def test_choose_answers_a_down_members_table_from_its_copy_and_an_up_one_not(tmp_path: Path) -> None:
    core = _when_down(tmp_path)
    chosen = _choose(core, "get_table", False, dbname="lake_ice", tbl_name="T2")
    assert isinstance(chosen, planning.FromCopy)
    served = chosen.served
    assert (served.member, served.reason, served.copy_db, served.client_db) == ("lake", "down", "ice_copy", "lake_ice")
    assert served.tables == {"t2": "T2"} and served.partition_keys == ("dt",) and 59 <= served.staleness < 70
    assert _choose(core, "get_table", True, dbname="lake_ice", tbl_name="t2") is None  # up: the member answers
    assert _choose(core, "get_table", False, dbname="lake_ice", tbl_name="t9") is None  # no copy: as today


def test_choose_prefers_only_copies_with_files_of_their_own(tmp_path: Path) -> None:
    core = _prefer(tmp_path, _copies(t2_mode=o.MIRROR))
    assert _choose(core, "get_table", True, dbname="lake_ice", tbl_name="t2") is None  # a mirror: the source's files
    assert isinstance(_choose(core, "get_table", True, dbname="lake_ice", tbl_name="t3"), planning.FromCopy)
    # down, a mirror answers too: its metadata is all there is
    assert isinstance(_choose(core, "get_table", False, dbname="lake_ice", tbl_name="t2"), planning.FromCopy)


def test_choose_never_uses_a_copy_older_than_max_staleness(tmp_path: Path) -> None:
    for core in (_when_down(tmp_path, **{"max-staleness": "1h"}), _prefer(tmp_path, **{"max-staleness": "1h"})):
        stale = replace(core, routes=replace(core.routes, copies=Copies.of(_copies(age=3601 + 60))))
        assert _choose(stale, "get_table", False, dbname="lake_ice", tbl_name="t2") is None
        assert _choose(stale, "get_table", True, dbname="lake_ice", tbl_name="t2") is None
        fresh = replace(core, routes=replace(core.routes, copies=Copies.of(_copies(age=3000))))
        assert isinstance(_choose(fresh, "get_table", False, dbname="lake_ice", tbl_name="t2"), planning.FromCopy)


# -- when-down -----------------------------------------------------------------------------------------------------
def test_when_down_a_read_of_a_copied_table_goes_to_the_primary_in_the_copys_names(tmp_path: Path) -> None:
    core = _when_down(tmp_path).down()
    call = _call(core, "get_table", dbname="lake_ice", tbl_name="t2")
    step = _from_copy(plan(call, core.routes, core.health, {}, Learned()), "down",
                      H.get_table_args(dbname="ice_copy", tbl_name="t2"))
    assert call.args == H.get_table_args(dbname="lake_ice", tbl_name="t2")  # the call's own args as they came
    _from_copy(_plan(core, "get_partitions", db_name="lake_ice", tbl_name="t2", max_parts=-1), "down",
               H.get_partitions_args(db_name="ice_copy", tbl_name="t2", max_parts=-1))
    _from_copy(_plan(core, "get_partition_names", db_name="lake_ice", tbl_name="t2", max_parts=-1), "down",
               H.get_partition_names_args(db_name="ice_copy", tbl_name="t2", max_parts=-1))
    request = T.GetPartitionsByNamesRequest(db_name="lake_ice", tbl_name="t2", names=["dt=2024-01-01"])
    by_names = _from_copy(_plan(core, "get_partitions_by_names_req", req=request), "down",
                          H.get_partitions_by_names_req_args(req=T.GetPartitionsByNamesRequest(
                              db_name="ice_copy", tbl_name="t2", names=["dt=2024-01-01"])))
    assert request.db_name == "lake_ice" and by_names.copy is not None and not by_names.copy.listing
    assert step.copy is not None and step.copy.describe() == "ice_copy.t2" and step.copy.client_db == "lake_ice"


def test_when_down_the_member_up_reads_go_to_it(tmp_path: Path) -> None:
    core = _when_down(tmp_path)
    _to_lake(_plan(core, "get_table", dbname="lake_ice", tbl_name="t2"), H.get_table_args(dbname="ice", tbl_name="t2"))
    _to_lake(_plan(core, "get_partitions", db_name="lake_ice", tbl_name="t2", max_parts=-1),
             H.get_partitions_args(db_name="ice", tbl_name="t2", max_parts=-1))
    core.down()  # the same calls while it is down: from the copy
    _from_copy(_plan(core, "get_table", dbname="lake_ice", tbl_name="t2"), "down",
               H.get_table_args(dbname="ice_copy", tbl_name="t2"))
    core.health.down.clear()  # back: to the member again
    _to_lake(_plan(core, "get_table", dbname="lake_ice", tbl_name="t2"), H.get_table_args(dbname="ice", tbl_name="t2"))


def test_never_a_down_member_fails_as_today_whatever_copies_exist(tmp_path: Path) -> None:
    core = _core(tmp_path / "never").down()
    step = _plan(core, "get_table", dbname="lake_ice", tbl_name="t2")
    assert isinstance(step, Refusal) and (step.kind, step.metastore) == (Kind.DOWN, "lake")
    when_down = _when_down(tmp_path).down()  # the same copies, read-from-copies: when-down
    _from_copy(_plan(when_down, "get_table", dbname="lake_ice", tbl_name="t2"), "down",
               H.get_table_args(dbname="ice_copy", tbl_name="t2"))


def test_a_table_without_a_copy_on_a_down_member_is_refused_at_once(tmp_path: Path) -> None:
    core = _when_down(tmp_path).down()
    for method, fields in (("get_table", {"dbname": "lake_ice", "tbl_name": "t9"}),
                           ("get_table", {"dbname": "lake_web", "tbl_name": "t2"}),
                           ("get_partitions", {"db_name": "lake_web", "tbl_name": "t2", "max_parts": -1})):
        step = _plan(core, method, **fields)
        assert isinstance(step, Refusal) and (step.kind, step.metastore) == (Kind.DOWN, "lake"), fields
        answer = finish.down(step, client_wire(core.config))
        assert answer.outcome == "member_down"
        assert "metastore 'lake' is down" in _error(_decoded(core, answer, method)).message
    # the copied table of the same database is answered
    _from_copy(_plan(core, "get_table", dbname="lake_ice", tbl_name="t3"), "down",
               H.get_table_args(dbname="ice_copy", tbl_name="t3"))


@pytest.mark.parametrize(("method", "fields"), [
    ("drop_table", {"dbname": "lake_ice", "name": "t2", "deleteData": False}),
    ("alter_table", {"dbname": "lake_ice", "tbl_name": "t2", "new_tbl": T.Table(dbName="lake_ice", tableName="t2")}),
    ("add_partition", {"new_part": T.Partition(dbName="lake_ice", tableName="t2", values=["2024-01-09"])}),
    ("create_table", {"tbl": T.Table(dbName="lake_ice", tableName="t9")}),
    ("truncate_table", {"dbName": "lake_ice", "tableName": "t2", "partNames": None}),
])
def test_writes_to_a_down_member_are_refused_saying_reads_are_served_from_copies(
        tmp_path: Path, method: str, fields: dict[str, Any]) -> None:
    core = _when_down(tmp_path).down()
    step = _plan(core, method, **fields)
    assert isinstance(step, Refusal) and (step.kind, step.metastore) == (Kind.DOWN, "lake")
    assert step.refusal.startswith("metastore 'lake' is down; ")  # the member's down message first
    assert "reads of its tables are served from copies" in step.refusal and "'main'" in step.refusal
    error = _error(_decoded(core, finish.down(step, client_wire(core.config)), method))
    assert "reads of its tables are served from copies" in error.message
    # up, the write goes to the member: the table's primary cluster
    core.health.down.clear()
    up = _plan(core, method, **fields)
    assert isinstance(up, Send) and up.metastore == "lake" and up.copy is None


# -- prefer --------------------------------------------------------------------------------------------------------
def test_prefer_get_table_is_answered_from_the_copy(tmp_path: Path) -> None:
    core = _prefer(tmp_path)
    _from_copy(_plan(core, "get_table", dbname="lake_ice", tbl_name="t2"), "prefer",
               H.get_table_args(dbname="ice_copy", tbl_name="t2"))
    request = T.GetTableRequest(dbName="lake_ice", tblName="t2")
    _from_copy(_plan(core, "get_table_req", req=request), "prefer",
               H.get_table_req_args(req=T.GetTableRequest(dbName="ice_copy", tblName="t2")))
    # a table without a copy is the member's
    _to_lake(_plan(core, "get_table", dbname="lake_ice", tbl_name="t9"), H.get_table_args(dbname="ice", tbl_name="t9"))


def test_prefer_partition_reads_ask_the_member_and_the_copy_at_once(tmp_path: Path) -> None:
    core = _prefer(tmp_path, partial="refuse")
    step = _plan(core, "get_partitions", db_name="lake_ice", tbl_name="t2", max_parts=-1)
    assert isinstance(step, Paired) and (step.kind, step.metastore) == (Kind.PAIRED, "lake")
    source, copy = step.source, step.copy
    assert (source.metastore, source.args) == ("lake", H.get_partitions_args(db_name="ice", tbl_name="t2",
                                                                             max_parts=-1))
    assert source.rewrite_reply and not source.stream and source.copy is None
    _from_copy(copy, "prefer", H.get_partitions_args(db_name="ice_copy", tbl_name="t2", max_parts=-1))
    assert copy.copy is not None and copy.copy.refuse_partial and copy.copy.partition_keys == ("dt",)
    by_filter = _plan(core, "get_partitions_by_filter", db_name="lake_ice", tbl_name="t2", filter="dt>'a'",
                      max_parts=-1)
    assert isinstance(by_filter, Paired) and by_filter.copy.args.db_name == "ice_copy"
    one = _plan(core, "get_partition", db_name="lake_ice", tbl_name="t2", part_vals=["2024-01-01"])
    assert isinstance(one, Paired)
    # partial: source (the default) does not refuse
    assert not _plan(_prefer(tmp_path / "source"), "get_partitions", db_name="lake_ice", tbl_name="t2",
                     max_parts=-1).copy.copy.refuse_partial


def test_prefer_other_reads_go_to_the_member(tmp_path: Path) -> None:
    core = _prefer(tmp_path)
    _to_lake(_plan(core, "get_partition_names", db_name="lake_ice", tbl_name="t2", max_parts=-1),
             H.get_partition_names_args(db_name="ice", tbl_name="t2", max_parts=-1))
    _to_lake(_plan(core, "get_database", name="lake_ice"), H.get_database_args(name="ice"))
    _to_lake(_plan(core, "get_all_tables", db_name="lake_ice"), H.get_all_tables_args(db_name="ice"))
    _from_copy(_plan(core, "get_table", dbname="lake_ice", tbl_name="t2"), "prefer",
               H.get_table_args(dbname="ice_copy", tbl_name="t2"))


def test_prefer_never_reads_a_mirror_nor_a_stale_copy(tmp_path: Path) -> None:
    mirror = _prefer(tmp_path / "mirror", _copies(t2_mode=o.MIRROR))
    _to_lake(_plan(mirror, "get_table", dbname="lake_ice", tbl_name="t2"),
             H.get_table_args(dbname="ice", tbl_name="t2"))
    assert isinstance(_plan(mirror, "get_partitions", db_name="lake_ice", tbl_name="t2", max_parts=-1), Send)
    _from_copy(_plan(mirror, "get_table", dbname="lake_ice", tbl_name="t3"), "prefer",  # t3: a copy
               H.get_table_args(dbname="ice_copy", tbl_name="t3"))
    stale = _prefer(tmp_path / "stale", _copies(age=7200), **{"max-staleness": "1h"})
    _to_lake(_plan(stale, "get_table", dbname="lake_ice", tbl_name="t2"),
             H.get_table_args(dbname="ice", tbl_name="t2"))
    _to_lake(_plan(stale, "get_partitions", db_name="lake_ice", tbl_name="t2", max_parts=-1),
             H.get_partitions_args(db_name="ice", tbl_name="t2", max_parts=-1))
    # down, a stale copy is not used either: the member's down answer
    stale.down()
    assert _plan(stale, "get_table", dbname="lake_ice", tbl_name="t2").kind is Kind.DOWN


def test_prefer_with_the_member_down_answers_from_the_copy_as_when_down(tmp_path: Path) -> None:
    core = _prefer(tmp_path).down()
    _from_copy(_plan(core, "get_partitions", db_name="lake_ice", tbl_name="t2", max_parts=-1), "down",
               H.get_partitions_args(db_name="ice_copy", tbl_name="t2", max_parts=-1))


# -- locks ---------------------------------------------------------------------------------------------------------
def _lock(*components: tuple[int, str, str | None]) -> dict[str, Any]:
    return {"rqst": T.LockRequest(component=[T.LockComponent(type=kind, level=TABLE_LEVEL, dbname=db, tablename=table)
                                             for kind, db, table in components], user="u", hostname="h")}


def test_a_read_lock_on_a_copied_table_is_taken_in_the_primary_on_the_copy(tmp_path: Path) -> None:
    for core in (_when_down(tmp_path).down(), _prefer(tmp_path)):
        call = _call(core, "lock", **_lock((SHARED_READ, "lake_ice", "t2"), (SHARED_READ, "lake_ice", "T3")))
        step = plan(call, core.routes, core.health, {}, Learned())
        assert isinstance(step, Send) and (step.kind, step.metastore) == (Kind.SEND, "main")
        assert [(c.dbname, c.tablename, c.type) for c in step.args.rqst.component] == \
            [("ice_copy", "t2", SHARED_READ), ("ice_copy", "t3", SHARED_READ)]
        assert [(c.dbname, c.tablename) for c in call.args.rqst.component] == [("lake_ice", "t2"), ("lake_ice", "T3")]
        assert step.args.rqst.user == "u"


def test_other_locks_are_not_moved_to_the_primary(tmp_path: Path) -> None:
    down = _when_down(tmp_path).down()
    for lock in (_lock((EXCLUSIVE, "lake_ice", "t2")), _lock((SHARED_WRITE, "lake_ice", "t2")),
                 _lock((SHARED_READ, "lake_ice", "t2"), (SHARED_READ, "lake_ice", "t9")),  # t9: no copy
                 _lock((SHARED_READ, "lake_ice", None))):  # a database's lock
        step = _plan(down, "lock", **lock)
        assert isinstance(step, Refusal) and (step.kind, step.metastore) == (Kind.DOWN, "lake"), lock
    up = _when_down(tmp_path / "up")
    step = _plan(up, "lock", **_lock((SHARED_READ, "lake_ice", "t2")))
    assert isinstance(step, Send) and step.metastore == "lake"  # when-down, up: the member's lock
    prefer = _prefer(tmp_path)
    step = _plan(prefer, "lock", **_lock((EXCLUSIVE, "lake_ice", "t2")))
    assert isinstance(step, Send) and step.metastore == "lake" and step.args.rqst.component[0].dbname == "ice"
    mirror = _prefer(tmp_path / "mirror", _copies(t2_mode=o.MIRROR))
    step = _plan(mirror, "lock", **_lock((SHARED_READ, "lake_ice", "t2")))
    assert isinstance(step, Send) and step.metastore == "lake"  # a mirror is not read under prefer
    step = _plan(down, "lock", **_lock((SHARED_READ, "lake_ice", "t2")))
    assert isinstance(step, Send) and step.metastore == "main"  # a read lock alone: taken in the primary


# -- Iceberg commits on the copy's metadata ------------------------------------------------------------------------
def _iceberg(previous: str) -> T.Table:
    return T.Table(dbName="lake_ice", tableName="t2", parameters={
        "table_type": "ICEBERG", o.METADATA_LOCATION: "hdfs://lake/ice.db/t2/metadata/00004-new.metadata.json",
        o.PREVIOUS_METADATA_LOCATION: previous})


def test_prefer_an_iceberg_commit_based_on_the_copys_metadata_is_refused(tmp_path: Path) -> None:
    core = _prefer(tmp_path)
    step = _plan(core, "alter_table", dbname="lake_ice", tbl_name="t2", new_tbl=_iceberg(METADATA))
    assert isinstance(step, Refusal) and (step.kind, step.metastore, step.refused_as) == \
        (Kind.REFUSE, "lake", Refused.META)
    assert "read-only" in step.refusal and "ice_copy.t2" in step.refusal and "lake_ice.t2" in step.refusal
    answer = finish.refusal(step, client_wire(core.config))
    assert "read-only" in _error(_decoded(core, answer, "alter_table")).message
    context = _plan(core, "alter_table_with_environment_context", dbname="lake_ice", tbl_name="t2",
                    new_tbl=_iceberg(METADATA), environment_context=T.EnvironmentContext(properties={}))
    assert isinstance(context, Refusal) and context.kind is Kind.REFUSE
    request = T.AlterTableRequest(dbName="lake_ice", tableName="t2", table=_iceberg(METADATA))
    assert _plan(core, "alter_table_req", req=request).kind is Kind.REFUSE
    # a commit based on the source's own metadata goes to the member
    step = _plan(core, "alter_table", dbname="lake_ice", tbl_name="t2",
                 new_tbl=_iceberg("hdfs://lake/ice.db/t2/metadata/00003-src.metadata.json"))
    assert isinstance(step, Send) and step.metastore == "lake"


def test_prefer_an_object_written_back_with_the_copys_storage_is_refused(tmp_path: Path) -> None:
    # under prefer a partition is read with the copy's location; an engine that writes it back (statistics after
    # an INSERT) or adds one below the table's location it read would point the source at the copy
    root = "hdfs://main/ice_copy.db/t2"
    core = _prefer(tmp_path, [Copy("lake", "ice", "t2", "ice_copy", "t2", o.COPY, time.time(), ("dt",), None, root)])

    def part(location: str) -> T.Partition:
        return T.Partition(values=["2024-01-01"], dbName="lake_ice", tableName="t2", parameters={},
                           sd=T.StorageDescriptor(location=location))

    step = _plan(core, "alter_partition", db_name="lake_ice", tbl_name="t2", new_part=part(f"{root}/dt=2024-01-01"))
    assert isinstance(step, Refusal) and (step.kind, step.metastore) == (Kind.REFUSE, "lake"), step
    assert "read-only" in step.refusal and f"{root}/dt=2024-01-01" in step.refusal
    added = _plan(core, "add_partitions", new_parts=[part(f"{root}/dt=2024-01-02")])  # names no table: its parts do
    assert isinstance(added, Refusal) and added.kind is Kind.REFUSE
    # the source's own storage (and a directory that only begins like the copy's) goes to the member
    for location in ("hdfs://lake/ice.db/t2/dt=2024-01-01", f"{root}_old/dt=2024-01-01"):
        step = _plan(core, "alter_partition", db_name="lake_ice", tbl_name="t2", new_part=part(location))
        assert isinstance(step, Send) and step.metastore == "lake", step


def test_when_down_the_member_up_an_iceberg_commit_goes_to_it(tmp_path: Path) -> None:
    core = _when_down(tmp_path)
    step = _plan(core, "alter_table", dbname="lake_ice", tbl_name="t2", new_tbl=_iceberg(METADATA))
    assert isinstance(step, Send) and step.metastore == "lake"
    core.down()  # down: refused as every write is
    assert _plan(core, "alter_table", dbname="lake_ice", tbl_name="t2", new_tbl=_iceberg(METADATA)).kind is Kind.DOWN
    assert "served from copies" in _plan(core, "alter_table", dbname="lake_ice", tbl_name="t2",
                                         new_tbl=_iceberg(METADATA)).refusal


def test_prefer_an_iceberg_commit_on_a_mirrored_table_goes_to_the_member(tmp_path: Path) -> None:
    source_metadata = "hdfs://lake/ice.db/t2/metadata/00003-src.metadata.json"
    mirror = Copy("lake", "ice", "t2", "ice_mirror", "t2", o.MIRROR, time.time(), (), source_metadata)
    core = _prefer(tmp_path, [mirror])
    # the client read lake_ice.t2 from the member (a mirror is not preferred): its base is the source's metadata
    _to_lake(_plan(core, "get_table", dbname="lake_ice", tbl_name="t2"), H.get_table_args(dbname="ice", tbl_name="t2"))
    step = _plan(core, "alter_table", dbname="lake_ice", tbl_name="t2", new_tbl=_iceberg(source_metadata))
    assert isinstance(step, Send) and step.metastore == "lake"


# -- databases while the member is down ----------------------------------------------------------------------------
def test_a_down_members_database_with_copies_is_answered_from_the_copy_database(tmp_path: Path) -> None:
    core = _when_down(tmp_path).down()
    for method, fields, args in (
            ("get_database", {"name": "lake_ice"}, H.get_database_args(name="ice_copy")),
            ("get_all_tables", {"db_name": "lake_ice"}, H.get_all_tables_args(db_name="ice_copy")),
            ("get_tables", {"db_name": "lake_ice", "pattern": "*"}, H.get_tables_args(db_name="ice_copy",
                                                                                      pattern="*"))):
        step = _from_copy(_plan(core, method, **fields), "down", args)
        assert step.copy is not None and step.copy.listing and step.copy.client_db == "lake_ice"
        assert dict(step.copy.tables) == {"t2": "t2", "t3": "t3"}
    # its databases without copies fail as down
    assert _plan(core, "get_database", name="lake_web").kind is Kind.DOWN
    assert _plan(core, "get_all_tables", db_name="lake_web").kind is Kind.DOWN


def test_a_database_split_over_two_copy_databases_is_answered_from_the_larger(tmp_path: Path) -> None:
    at = time.time()
    copies = [Copy("lake", "ice", "t2", "ice_a", "t2", o.COPY, at),
              Copy("lake", "ice", "t3", "ice_b", "t3", o.COPY, at),
              Copy("lake", "ice", "t4", "ice_b", "t4", o.COPY, at)]
    core = _core(tmp_path, copies, **{"read-from-copies": "when-down"}).down()
    step = _from_copy(_plan(core, "get_all_tables", db_name="lake_ice"), "down", H.get_all_tables_args(db_name="ice_b"))
    assert step.copy is not None and dict(step.copy.tables) == {"t3": "t3", "t4": "t4"}


def test_a_down_members_stale_copies_do_not_answer_for_its_database(tmp_path: Path) -> None:
    core = _core(tmp_path, _copies(age=7200), **{"read-from-copies": "when-down", "max-staleness": "1h"}).down()
    assert _plan(core, "get_database", name="lake_ice").kind is Kind.DOWN
    fresh = _core(tmp_path / "fresh", _copies(age=600), **{"read-from-copies": "when-down", "max-staleness": "1h"})
    _from_copy(_plan(fresh.down(), "get_database", name="lake_ice"), "down", H.get_database_args(name="ice_copy"))


# -- listings of databases -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Member:
    name: str


def _merged(core: Core, method: str, lake: list[str] | None, **fields: Any) -> tuple[list[str], dict[str, Any]]:
    """A fan-out in which main answers ["default"], and lake its databases or (None) an error."""
    step = _plan(core, method, **fields)
    assert isinstance(step, FanOut)
    outcomes = []
    for naming, _ in step.jobs:
        outcome = Outcome(_Member(naming.member.name), naming)  # type: ignore[arg-type]
        if naming.member.name == "main":
            outcome.result = METHOD_IO[method].result(success=["default"])
        elif lake is None:
            outcome.error = "metastore 'lake' is down"
        else:
            outcome.result = METHOD_IO[method].result(success=lake)
        outcomes.append(outcome)
    answer = merge.merge(step, outcomes, client_wire(core.config), lambda m: pytest.fail(m))
    return _decoded(core, answer, method).success, answer.fields


def test_database_listings_include_a_down_members_copied_databases(tmp_path: Path) -> None:
    core = _when_down(tmp_path).down()
    listed, fields = _merged(core, "get_all_databases", None)
    assert listed == ["default", "lake_ice"] and fields["omitted"] == ["lake"] and fields["from_copies"] == ["lake"]
    assert _merged(core, "get_databases", None, pattern="lake_*")[0] == ["lake_ice"]
    assert _merged(core, "get_databases", None, pattern="default")[0] == ["default"]
    # the member answering: its own listing, once
    listed, fields = _merged(core, "get_all_databases", ["ice", "web"])
    assert listed == ["default", "lake_ice", "lake_web"] and fields["from_copies"] == []
    never = _core(tmp_path / "never").down()
    assert _merged(never, "get_all_databases", None)[0] == ["default"]


# -- the plain relay -----------------------------------------------------------------------------------------------
def test_the_lane_never_relays_reads_of_a_member_whose_copies_are_preferred(tmp_path: Path) -> None:
    names = H.get_table_args(dbname="lake_ice", tbl_name="t2")
    prefer = _prefer(tmp_path)
    lane = lane_for(prefer.routes, "get_table", METHODS["get_table"], METHOD_IO["get_table"])
    assert lane is not None and lane.choose(names, prefer.health, prefer.config.server.wire) is None
    # the primary's own tables are still relayed
    primary = lane.choose(H.get_table_args(dbname="sales", tbl_name="t"), prefer.health, prefer.config.server.wire)
    assert primary is not None and primary.member.name == "main"
    # without copies of its tables, prefer changes nothing: the lane relays
    none = _prefer(tmp_path / "none", [])
    lane = lane_for(none.routes, "get_table", METHODS["get_table"], METHOD_IO["get_table"])
    assert lane is not None and lane.choose(names, none.health, none.config.server.wire) is not None
    # when-down: relayed while up, planned in full (from the copy) while down
    when_down = _when_down(tmp_path)
    lane = lane_for(when_down.routes, "get_table", METHODS["get_table"], METHOD_IO["get_table"])
    assert lane is not None and lane.choose(names, when_down.health, when_down.config.server.wire) is not None
    when_down.down()
    assert lane.choose(names, when_down.health, when_down.config.server.wire) is None


def test_database_listings_leave_out_databases_whose_copies_are_all_stale(tmp_path: Path) -> None:
    core = _core(tmp_path, _copies(age=7200), **{"read-from-copies": "when-down", "max-staleness": "1h"}).down()
    assert _plan(core, "get_database", name="lake_ice").kind is Kind.DOWN
    assert _merged(core, "get_all_databases", None)[0] == ["default"]


def test_prefer_reads_go_to_the_member_while_the_primary_is_down(tmp_path: Path) -> None:
    core = _prefer(tmp_path).down("main")
    assert isinstance(_plan(core, "get_partitions", db_name="lake_ice", tbl_name="t2", max_parts=-1), Send)
    _to_lake(_plan(core, "get_table", dbname="lake_ice", tbl_name="t2"), H.get_table_args(dbname="ice", tbl_name="t2"))


# -- planned: the call core's one question, answered with the request to send ------------------------------------
def test_planned_answers_with_the_request_in_the_copys_names_and_leaves_the_call_as_it_came(tmp_path: Path) -> None:
    core = _when_down(tmp_path)
    call = _call(core, "get_table", dbname="lake_ice", tbl_name="T2")
    lake = core.config.federation.member("lake")
    facts = planning.Facts(core.routes.copies, False, True, time.time(), "main", primary_catalogs=False)
    chosen = planning.planned(METHODS["get_table"], METHOD_IO["get_table"], call.args, CALL_NAMES.names_in(call.args),
                              core.routes.planner.naming(lake), facts)
    assert isinstance(chosen, planning.FromCopy)
    assert chosen.args == H.get_table_args(dbname="ice_copy", tbl_name="t2") and chosen.fill is None
    assert call.args == H.get_table_args(dbname="lake_ice", tbl_name="T2")
    assert (chosen.served.copy_db, chosen.served.tables) == ("ice_copy", {"t2": "T2"})


def test_a_read_from_a_copy_is_a_kind_waggle_answers_itself_and_counted_once_the_primary_replied(
        tmp_path: Path) -> None:
    from waggle.common import metrics
    from waggle.server import own, own_copies

    core = _when_down(tmp_path).down()
    step = plan(_call(core, "get_table", dbname="lake_ice", tbl_name="t2"), core.routes, core.health, {}, Learned())
    assert isinstance(step, Send) and step.kind is Kind.COPY and own.HANDLERS[Kind.COPY] is own_copies.from_copy
    sent: list[Any] = []

    class _Desk:
        def send(self, step: Send, replied: Any = None) -> Answer:
            sent.append(step)
            replied()
            return Answer(b"", "ok", step.metastore)

    counter = metrics.COPY_READS.labels("lake", "down")
    before = counter._value.get()
    answer = own_copies.from_copy(_Desk(), step)  # type: ignore[arg-type]
    assert (answer.outcome, sent) == ("ok", [step])
    assert counter._value.get() == before + 1
