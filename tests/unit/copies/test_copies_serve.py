"""Replies answered from copies (waggle.copies.serve) and their finish in the call core (finish.reply of a Send to
the copy, finish.paired of a prefer read): decoded values and encoded replies, no socket, no metastore."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from thrift.Thrift import TMessageType

from tests.support.copies_core import client_wire, lake_routes
from tests.support.health import PlainHealth
from waggle.call import finish
from waggle.call.plan import plan
from waggle.call.values import Answer, Call, Learned, Paired, Send, Session
from waggle.copies.catalog import Copy
from waggle.copies.serve import (
    SERVED_FROM,
    SERVED_REASON,
    SERVED_STALENESS,
    Served,
    as_source,
    partition_name,
    with_copy_storage,
)
from waggle.hms.decode import decode_message
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header
from waggle.synced import objects as o
from waggle.upstream.client import Reply

T0 = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC).timestamp()
SYNCED = "2026-11-25T10:00:00Z"
BOOKKEEPING = {o.SOURCE: "lake", o.SOURCE_OBJECT: "ice.t2", o.FINGERPRINT: "f", o.SYNCED_AT: SYNCED, o.MODE: o.COPY}
SERVED_KEYS = {SERVED_FROM, SERVED_STALENESS, SERVED_REASON}


def _served(reason: str = "down", tables: dict[str, str] | None = None, listing: bool = False,
            refuse: bool = False) -> Served:
    return Served("lake", reason, "ice_copy", "lake_ice", tables or {"t2": "t2"}, 42.9, listing=listing,
                  refuse_partial=refuse, partition_keys=("dt",))


def _table(db: str = "ice_copy", name: str = "t2") -> T.Table:
    return T.Table(dbName=db, tableName=name, sd=T.StorageDescriptor(location=f"hdfs://main/{db}.db/{name}"),
                   partitionKeys=[T.FieldSchema(name="dt", type="string")],
                   parameters={**BOOKKEEPING, "metadata_location": "hdfs://main/m/00003.metadata.json",
                               "comment": "kept"})


def _partition(day: str, where: str = "main", db: str = "ice_copy", synced: str | None = SYNCED,
               changed: float | str | None = None) -> T.Partition:
    params: dict[str, str] = {}
    if synced is not None:
        params.update({o.SOURCE: "lake", o.SOURCE_OBJECT: f"ice.t2/dt={day}", o.SYNCED_AT: synced})
    if changed is not None:
        params["transient_lastDdlTime"] = str(changed)
    return T.Partition(values=[day], dbName=db, tableName="t2", parameters=params,
                       sd=T.StorageDescriptor(location=f"hdfs://{where}/t2/dt={day}"))


def _shown(params: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (params or {}).items() if k in SERVED_KEYS}


# -- as_source -----------------------------------------------------------------------------------------------------
def test_a_copys_table_is_shown_as_the_source_table_saying_where_it_comes_from() -> None:
    result = H.get_table_result(success=_table())
    as_source(result, _served())
    table = result.success
    assert (table.dbName, table.tableName) == ("lake_ice", "t2")
    assert table.sd.location == "hdfs://main/ice_copy.db/t2"  # the copy's storage
    assert table.parameters == {"metadata_location": "hdfs://main/m/00003.metadata.json", "comment": "kept",
                                SERVED_FROM: "ice_copy.t2", SERVED_STALENESS: "42", SERVED_REASON: "down"}
    assert not any(k.startswith("waggle.sync.") for k in table.parameters)  # the bookkeeping is not shown


def test_a_copy_with_another_name_is_shown_by_the_name_the_client_asked_for() -> None:
    result = H.get_table_req_result(success=T.GetTableResult(table=_table(name="t2_copy")))
    as_source(result, _served("prefer", {"t2_copy": "T2"}))
    table = result.success.table
    assert (table.dbName, table.tableName) == ("lake_ice", "T2")
    assert _shown(table.parameters) == {SERVED_FROM: "ice_copy.t2_copy", SERVED_STALENESS: "42",
                                        SERVED_REASON: "prefer"}


def test_a_copys_partitions_are_shown_as_the_sources() -> None:
    result = H.get_partitions_result(success=[_partition("2024-01-01"), _partition("2024-01-02")])
    as_source(result, _served())
    for p in result.success:
        assert (p.dbName, p.tableName) == ("lake_ice", "t2") and p.sd.location.startswith("hdfs://main/")
        assert _shown(p.parameters) == {SERVED_FROM: "ice_copy.t2", SERVED_STALENESS: "42", SERVED_REASON: "down"}
        assert not any(k.startswith("waggle.sync.") for k in p.parameters)
    spec = H.get_partitions_by_names_req_result(success=T.GetPartitionsByNamesResult(
        partitions=[_partition("2024-01-01")]))
    as_source(spec, _served())
    assert spec.success.partitions[0].dbName == "lake_ice" and SERVED_FROM in spec.success.partitions[0].parameters


def test_a_copy_database_is_shown_as_the_members_database() -> None:
    result = H.get_database_result(success=T.Database(
        name="ice_copy", locationUri="hdfs://main/ice_copy.db", parameters={o.SOURCE: "lake", "owner": "x"}))
    as_source(result, _served(listing=True, tables={"t2": "t2", "t3": "t3"}))
    database = result.success
    assert database.name == "lake_ice" and database.locationUri == "hdfs://main/ice_copy.db"
    assert database.parameters == {"owner": "x", SERVED_FROM: "ice_copy", SERVED_STALENESS: "42",
                                   SERVED_REASON: "down"}


def test_listings_of_a_database_answered_from_copies_name_the_copied_tables_only() -> None:
    served = _served(listing=True, tables={"t2": "t2", "t3_copy": "t3"})
    names = H.get_all_tables_result(success=["t2", "T3_COPY", "own", "other_copy"])
    as_source(names, served)
    assert names.success == ["t2", "t3"]
    objects = H.get_table_objects_by_name_result(success=[_table(name="t2"), _table(name="own")])
    as_source(objects, served)
    assert [(t.dbName, t.tableName) for t in objects.success] == [("lake_ice", "t2")]
    request = H.get_table_objects_by_name_req_result(success=T.GetTablesResult(
        tables=[_table(name="own"), _table(name="t3_copy")]))
    as_source(request, served)
    assert [(t.dbName, t.tableName) for t in request.success.tables] == [("lake_ice", "t3")]
    # a table's own call is not a listing: nothing is left out
    whole = H.get_all_tables_result(success=["t2", "own"])
    as_source(whole, _served())
    assert whole.success == ["t2", "own"]


def test_names_of_other_databases_are_left_as_they_are() -> None:
    result = H.get_table_result(success=_table(db="elsewhere"))
    as_source(result, _served())
    assert result.success.dbName == "elsewhere"


# -- with_copy_storage ---------------------------------------------------------------------------------------------
def _source(*days: str, changed: float = T0 - 60) -> H.get_partitions_result:
    return H.get_partitions_result(success=[_partition(d, "lake", "ice", None, changed) for d in days])


def _prefer(confirmed: float = T0) -> Served:
    return replace(_served("prefer"), copy_location="hdfs://main/t2/", confirmed_at=confirmed)


def test_the_source_partitions_the_copy_holds_get_the_copys_storage() -> None:
    source = _source("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04")
    source.success[1].parameters["transient_lastDdlTime"] = str(int(T0 + 100))  # changed after it was copied
    source.success[3].values = ["2024-01-04", "extra"]  # not a partition of these keys
    missing = with_copy_storage(source, {"dt=2024-01-01", "dt=2024-01-02", "dt=2024-01-04"}, _prefer())
    assert missing == ["dt=2024-01-02", "dt=2024-01-03", "2024-01-04/extra"]
    held, changed, absent, foreign = source.success
    assert held.sd.location == "hdfs://main/t2/dt=2024-01-01"
    assert _shown(held.parameters) == {SERVED_FROM: "ice_copy.t2", SERVED_STALENESS: "42", SERVED_REASON: "prefer"}
    assert (held.dbName, held.tableName) == ("ice", "t2")  # the source's names: renamed for the client later
    for p in (changed, absent, foreign):
        assert p.sd.location.startswith("hdfs://lake/") and not _shown(p.parameters)


def test_a_partition_is_current_within_a_seconds_slack_of_its_copy() -> None:
    for changed, current in ((T0 - 1, True), (T0, True), (T0 + 1, True), (T0 + 2, False), ("soon", False)):
        source = H.get_partitions_result(success=[_partition("2024-01-01", "lake", "ice", None, changed)])
        missing = with_copy_storage(source, {"dt=2024-01-01"}, _prefer())
        assert (missing == []) is current, changed
    # a source partition without transient_lastDdlTime is taken as unchanged
    source = H.get_partitions_result(success=[_partition("2024-01-01", "lake", "ice", None)])
    assert with_copy_storage(source, {"dt=2024-01-01"}, _prefer()) == []
    # a copy never confirmed holds nothing current
    source = H.get_partitions_result(success=[_partition("2024-01-01", "lake", "ice", None, T0)])
    assert with_copy_storage(source, {"dt=2024-01-01"}, _prefer(0.0)) == ["dt=2024-01-01"]


def test_partitions_are_named_as_hive_names_them() -> None:
    assert partition_name(("dt",), ["2024-01-03"]) == "dt=2024-01-03"
    assert partition_name(("dt", "hr"), ["2024-01-03", "7"]) == "dt=2024-01-03/hr=7"
    assert partition_name(("dt",), ["2024/01:03"]) == "dt=2024%2F01%3A03"  # escaped as Hive does


# -- finishing: a reply from a copy, and a prefer read's two replies -----------------------------------------------
class _Core:
    def __init__(self, root: Path, down: bool = False, **lake: Any) -> None:
        copy = Copy("lake", "ice", "t2", "ice_copy", "t2", o.COPY, time.time() - 5, ("dt",), None, "hdfs://main/t2")
        self.config, self.routes = lake_routes(root, [copy], **lake)
        self.health = PlainHealth({"lake"} if down else set())
        self.wire = client_wire(self.config)

    def encode(self, name: str, mtype: int, seqid: int, obj: Any) -> bytes:
        return self.wire.encode(name, mtype, seqid, obj)

    def encode_application_error(self, name: str, seqid: int, kind: int, message: str) -> bytes:
        return self.wire.encode_application_error(name, seqid, kind, message)

    def plan(self, method: str, /, **fields: Any) -> Any:
        args = METHOD_IO[method].args(**fields)
        call = Call(Header(method, TMessageType.CALL, 7), METHODS[method], METHOD_IO[method], args,
                    self.encode(method, TMessageType.CALL, 7, args), Session(), self.config.server.wire)
        return plan(call, self.routes, self.health, {}, Learned())

    def reply(self, method: str, result: Any, first_field: int = 0) -> Reply:
        return Reply(Header(method, TMessageType.REPLY, 7), self.encode(method, TMessageType.REPLY, 7, result),
                     first_field, 0)

    def decoded(self, answer: Answer, method: str) -> Any:
        assert answer.raw is not None
        return decode_message(answer.raw, self.config.server.wire.protocol, METHOD_IO[method].result,
                              self.config.server.limits)[1]


def test_a_reply_from_the_copy_reaches_the_client_in_its_names(tmp_path: Path) -> None:
    core = _Core(tmp_path, down=True, **{"read-from-copies": "when-down"})
    step = core.plan("get_table", dbname="lake_ice", tbl_name="t2")
    assert isinstance(step, Send) and step.metastore == "main" and step.copy is not None
    answer = finish.reply(step, core.reply("get_table", H.get_table_result(success=_table())), core)
    assert (answer.outcome, answer.metastore) == ("ok", "main")
    table = core.decoded(answer, "get_table").success
    assert (table.dbName, table.tableName, table.sd.location) == ("lake_ice", "t2", "hdfs://main/ice_copy.db/t2")
    assert table.parameters[SERVED_FROM] == "ice_copy.t2" and table.parameters[SERVED_REASON] == "down"
    assert int(table.parameters[SERVED_STALENESS]) in range(4, 30) and o.SOURCE not in table.parameters
    # the copy database's listing: the copied tables, by the client's names
    listing = core.plan("get_all_tables", db_name="lake_ice")
    answer = finish.reply(listing, core.reply("get_all_tables", H.get_all_tables_result(success=["t2", "own"])),
                          core)
    assert core.decoded(answer, "get_all_tables").success == ["t2"]


def _paired(core: _Core) -> Paired:
    step = core.plan("get_partitions", db_name="lake_ice", tbl_name="t2", max_parts=-1)
    assert isinstance(step, Paired)
    return step


def _replies(core: _Core) -> tuple[Reply, list[str]]:
    source = H.get_partitions_result(success=[_partition(d, "lake", "ice", None, T0 - 60)
                                              for d in ("2024-01-01", "2024-01-02", "2024-01-03")])
    return core.reply("get_partitions", source), ["dt=2024-01-01", "dt=2024-01-02"]


def test_a_prefer_read_gives_the_sources_partitions_with_the_copys_storage(tmp_path: Path) -> None:
    core = _Core(tmp_path, **{"read-from-copies": "prefer"})
    source, copy = _replies(core)
    answer = finish.paired(_paired(core), source, copy, core)
    assert (answer.outcome, answer.metastore) == ("ok", "lake")
    assert answer.fields == {"served_from": "ice_copy.t2", "from_source": 1}
    parts = core.decoded(answer, "get_partitions").success
    assert [(p.dbName, p.tableName) for p in parts] == [("lake_ice", "t2")] * 3
    assert [p.sd.location for p in parts] == ["hdfs://main/t2/dt=2024-01-01", "hdfs://main/t2/dt=2024-01-02",
                                              "hdfs://lake/t2/dt=2024-01-03"]
    assert [_shown(p.parameters).get(SERVED_REASON) for p in parts] == ["prefer", "prefer", None]


def test_partial_refuse_names_the_partitions_the_copy_lacks(tmp_path: Path) -> None:
    core = _Core(tmp_path, **{"read-from-copies": "prefer", "partial": "refuse"})
    source, copy = _replies(core)
    answer = finish.paired(_paired(core), source, copy, core)
    assert (answer.outcome, answer.metastore) == ("refused", "lake")
    error = core.decoded(answer, "get_partitions").o2
    assert isinstance(error, T.MetaException)
    assert "dt=2024-01-03" in error.message and "dt=2024-01-01" not in error.message
    assert "lake_ice.t2" in error.message and "ice_copy.t2" in error.message and "partial: refuse" in error.message
    # the copy holding them all: answered
    answer = finish.paired(_paired(core), source, [*copy, "dt=2024-01-03"], core)
    assert answer.outcome == "ok" and answer.fields["from_source"] == 0


def test_partial_refuse_names_at_most_twenty_partitions(tmp_path: Path) -> None:
    core = _Core(tmp_path, **{"read-from-copies": "prefer", "partial": "refuse"})
    days = [f"2024-02-{d:02d}" for d in range(1, 26)]
    source = core.reply("get_partitions", H.get_partitions_result(
        success=[_partition(d, "lake", "ice", None) for d in days]))
    answer = finish.paired(_paired(core), source, [], core)
    message = core.decoded(answer, "get_partitions").o2.message
    assert "25 partition(s)" in message and "dt=2024-02-20" in message and "dt=2024-02-21" not in message
    assert message.endswith("and 5 more")


@pytest.mark.parametrize("refuse", [False, True])
def test_without_the_copys_names_or_with_the_members_exception_the_member_answers(tmp_path: Path,
                                                                                 refuse: bool) -> None:
    core = _Core(tmp_path, **{"read-from-copies": "prefer", "partial": "refuse" if refuse else "source"})
    source, _copy = _replies(core)
    # the primary could not say which partitions the copy holds: the member's answer alone
    answer = finish.paired(_paired(core), source, None, core)
    parts = core.decoded(answer, "get_partitions").success
    assert answer.metastore == "lake" and answer.outcome == "ok"
    assert [p.sd.location for p in parts] == [f"hdfs://lake/t2/dt=2024-01-0{d}" for d in (1, 2, 3)]
    assert [p.dbName for p in parts] == ["lake_ice"] * 3 and not any(_shown(p.parameters) for p in parts)
    # the member answered with an exception: that is the client's answer
    failed = core.reply("get_partitions", H.get_partitions_result(o2=T.MetaException(message="boom")), 2)
    answer = finish.paired(_paired(core), failed, _copy, core)
    assert answer.metastore == "lake" and core.decoded(answer, "get_partitions").o2.message == "boom"


def _shared_sd(location: str, db: str, days: list[str], synced: bool) -> T.PartitionSpec:
    """Partitions as Hive's get_partitions_pspec groups those under the table's location: one shared storage
    descriptor, each partition a relative path (no Partition struct)."""
    params = {o.SOURCE: "lake", o.SYNCED_AT: SYNCED} if synced else {"transient_lastDdlTime": str(int(T0 - 60))}
    shared = T.PartitionSpecWithSharedSD(
        partitions=[T.PartitionWithoutSD(values=[d], relativePath=f"/dt={d}", parameters=dict(params)) for d in days],
        sd=T.StorageDescriptor(location=location))
    return T.PartitionSpec(dbName=db, tableName="t2", rootPath=location, sharedSDPartitionSpec=shared)


def test_partitions_under_a_shared_storage_descriptor_are_answered_by_the_member(tmp_path: Path) -> None:
    # get_partitions_pspec (and Hive 4's get_partitions_spec_by_expr) group partitions under one storage
    # descriptor: a prefer read of them is not merged with the copy, the member answers it alone
    core = _Core(tmp_path, **{"read-from-copies": "prefer", "partial": "refuse"})
    step = core.plan("get_partitions_pspec", db_name="lake_ice", tbl_name="t2", max_parts=-1)
    assert isinstance(step, Send) and step.metastore == "lake" and step.copy is None, step
    assert not isinstance(step, Paired)
