"""The follower (``waggle.sync.follow``) driven in this process, one :meth:`Follower.step` at a time, against real
Hive 2.3 metastores that write notification events: the analytics member is the source, the primary the target
(reached through a recording stub, so a test can see which calls a batch made).

Every change a source table goes through reaches the target in mirror and in copy mode, and Spark reads the
source's rows from it; a gap in the log bootstraps again; bad input fails its table and nothing else; a crash in
the middle of a page is replayed to the same end; the checkpoint is the last event read; databases and functions
the policy covers are created, altered and dropped as at the source.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.clients import hive2_client
from tests.support.federation import federation_yaml
from tests.support.hive_stubs import HiveStubMetastore
from tests.support.merged_log import journal_positions, wait_merging
from tests.support.waits import wait_for
from waggle.config.loader import load
from waggle.hms.gen.hive_metastore import ttypes
from waggle.local.client import hms_client
from waggle.local.seed import ensure_database, ensure_table, text_sd
from waggle.sync.execution import BOOTSTRAP, INCREMENTAL, PARTIAL, SUCCEEDED, Execution
from waggle.sync.follow import apply, follower
from waggle.sync.follow.follower import FollowContext, Follower
from waggle.sync.follow.records import key as record_key
from waggle.sync.runner import TableSpec
from waggle.sync.system import SYS_DB
from waggle.synced import objects as o
from waggle.upstream.handshake import UpstreamCredentials

pytestmark = pytest.mark.integration
COLS = [("id", "int"), ("name", "string")]
KEYS = [("day", "string")]


# -- the set-up ----------------------------------------------------------------------------------------------------
class Logs:
    """Stands in for the follower's structlog loggers: keeps (level, event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Callable[..., None]:
        return lambda event, **fields: self.lines.append((level, event, fields))

    def find(self, level: str, event: str) -> list[dict[str, Any]]:
        return [f for lv, e, f in self.lines if (lv, e) == (level, event)]


@dataclass
class Env:
    work: Path
    primary: Any
    analytics: Any
    recorder: HiveStubMetastore  # in front of the primary
    followers: list[Follower] = field(default_factory=list)

    def follower(self, spec: TableSpec, name: str | None = None, members: dict[str, str] | None = None,
                 spark: Callable[[], Any] | None = None, page_size: int = 1000) -> Follower:
        """A follower of ``spec`` (its source one of ``members``, name -> URI; the analytics member by default),
        closed at the end of the test."""
        members = members or {"analytics": self.analytics.uri}
        federation = self.work / f"federation-{uuid.uuid4().hex[:6]}.yml"
        federation.write_text(federation_yaml(self.recorder.uri, "federated-meta-stores:\n" + "".join(
            f"- name: {m}\n  remote-meta-store-uris: {uri}\n" for m, uri in members.items())))
        config = load(None, str(federation), serving=False)
        source = next(m for m in config.federation.members if m.name == spec.source)
        ctx = FollowContext(source=source, primary=config.federation.primary, credentials=UpstreamCredentials(None),
                            budget=None, spark=spark, page_size=page_size, lease_seconds=30)
        made = Follower(name or f"p{uuid.uuid4().hex[:8]}", spec, ctx)
        self.followers.append(made)
        return made

    def calls(self) -> list[tuple[str, Any]]:
        return [(c.method, c.args) for c in self.recorder.calls]


@pytest.fixture(scope="module")
def recorder(primary: Any) -> Iterator[HiveStubMetastore]:
    stub = HiveStubMetastore("127.0.0.1", primary.port, version="2.3.10").start()
    yield stub
    stub.stop()


@pytest.fixture
def env(primary: Any, analytics: Any, recorder: HiveStubMetastore, tmp_path: Path) -> Iterator[Env]:
    made = Env(tmp_path, primary, analytics, recorder)
    yield made
    for f in made.followers:
        f.close()
    with hms_client("127.0.0.1", primary.port) as c:  # the policies' records go too
        prefixes = tuple(record_key(f.name, "") for f in made.followers)
        if prefixes and SYS_DB in c.get_all_databases():
            db = c.get_database(SYS_DB)
            db.parameters = {k: v for k, v in (db.parameters or {}).items() if not k.startswith(prefixes)}
            c.alter_database(SYS_DB, db)


@pytest.fixture
def source_db(analytics: Any, primary: Any, tmp_path: Path) -> Iterator[str]:
    """A fresh source database at analytics (its targets at the primary are named after it), dropped after."""
    name = f"fl_{uuid.uuid4().hex[:8]}"
    with hms_client("127.0.0.1", analytics.port) as c:
        ensure_database(c, name, f"file://{tmp_path}/src")
    yield name
    for port, db in ((analytics.port, name), *((primary.port, f"{name}_{s}") for s in ("m", "c", "t", "u"))):
        with hms_client("127.0.0.1", port) as c:
            try:
                c.drop_database(db, False, True)
            except Exception:
                pass


def spec(db: str, suffix: str, mode: str = o.MIRROR, **extra: Any) -> TableSpec:
    return TableSpec(source="analytics", patterns=(rf"{db}\..*",), mode=mode, target_database=f"{db}_{suffix}",
                     propagate_deletes=True, **extra)


def catch_up(f: Follower, limit: int = 10) -> list[Execution]:
    """Step until the follower has nothing left to read; the batches it ran."""
    done = []
    for _ in range(limit):
        execution = f.step(threading.Event())
        if execution is None:
            return done
        done.append(execution)
    raise AssertionError(f"still not caught up after {limit} batches: {done}")


def incremental(f: Follower) -> Execution:
    """The one incremental batch that catches up, succeeded."""
    (execution,) = catch_up(f)
    assert (execution.phase, execution.status, execution.error) == (INCREMENTAL, SUCCEEDED, None), execution
    return execution


def add_partition(port: int, db: str, table: str, day: str, root: Path, rows: list[str] | None = None,
                  where: str | None = None) -> None:
    location = root / table / (where or f"day={day}")
    location.mkdir(parents=True, exist_ok=True)
    if rows is not None:
        (location / "data.csv").write_text("".join(r + "\n" for r in rows))
    with hms_client("127.0.0.1", port) as c:
        c.add_partition(ttypes.Partition(values=[day], dbName=db, tableName=table, parameters={},
                                         sd=text_sd(f"file://{location}", COLS)))


def partitions(port: int, db: str, table: str) -> dict[str, ttypes.Partition]:
    with hms_client("127.0.0.1", port) as c:
        return {f"day={p.values[0]}": p for p in c.get_partitions(db, table, -1)}


def table(port: int, db: str, name: str) -> ttypes.Table | None:
    with hms_client("127.0.0.1", port) as c:
        try:
            return c.get_table(db, name)
        except ttypes.NoSuchObjectException:
            return None


def sys_params(port: int) -> dict[str, str]:
    with hms_client("127.0.0.1", port) as c:
        return dict(c.get_database(SYS_DB).parameters or {})


def current_event(port: int) -> int:
    with hms_client("127.0.0.1", port) as c:
        return int(c.get_current_notificationEventId().eventId)


# -- every kind of change, mirror and copy --------------------------------------------------------------------------
@pytest.fixture
def session(request: pytest.FixtureRequest) -> Any:
    """The session's Spark (its Hive catalog is waggle, whose primary is the target), which also copies files
    (its Python workers run this interpreter, as ``waggle sync``'s own session's do)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = request.getfixturevalue("spark")
    session.sparkContext.pythonExec = sys.executable  # when an earlier test started it without PYSPARK_PYTHON
    return session


@pytest.fixture(scope="module")
def through_waggle(ops: Any, analytics: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A waggle over ops (its primary, which keeps the journal) and analytics (prefix ``an_``) serving the
    federation's merged notification log: a follower whose source is waggle follows analytics through it, under
    waggle's names. The follower's target (the session's primary) is no member of it: its own writes are not in
    the log it follows."""
    from tests.support.federation import prefixed
    from tests.support.proxy import WaggleProcess

    proc = WaggleProcess(tmp_path_factory.mktemp("follow-through"),
                         prefixed(ops.uri, ("analytics", analytics.uri, "an_")),
                         "database-resolution: PREFIXED\nnotification-log: federated\n").start()
    wait_merging(proc, ops.port, ("primary", "analytics"))
    yield proc
    proc.stop()


@pytest.mark.spark
# Two runs cover each change both ways: every change read from the source's own log (a copy, which also moves the
# data), and every change read through waggle's merged log (a mirror). A mirror read from the source's own log adds
# neither a decoding path nor an effect of its own (the other tests of this file follow the source directly).
@pytest.mark.parametrize(("mode", "via"), [(o.COPY, "direct"), (o.MIRROR, "waggle")])
def test_every_change_reaches_the_target_and_spark_reads_the_sources_rows(env: Env, source_db: str, session: Any,
                                                                          mode: str, via: str,
                                                                          request: pytest.FixtureRequest) -> None:
    """Directly from the source, or through waggle's merged log (the source's names are waggle's then)."""
    src, root = source_db, env.work / "src"
    port, tport = env.analytics.port, env.primary.port
    copies = env.work / "copies"
    members = None
    named = src  # the source database as the follower's source names it
    journal = 0  # the port of the metastore keeping the merged log's journal
    if via == "waggle":
        members, named = {"analytics": f"thrift://127.0.0.1:{request.getfixturevalue('through_waggle').port}"}, \
            f"an_{src}"
        journal = request.getfixturevalue("ops").port
    policy = TableSpec(source="analytics", patterns=(rf"{named}\..*",), mode=mode,
                       target_database=f"{src}_{'c' if mode == o.COPY else 'm'}", propagate_deletes=True,
                       location_root=f"file://{copies}" if mode == o.COPY else None)
    tdb = str(policy.target_database)
    with hms_client("127.0.0.1", port) as c:
        ensure_table(c, src, "keep", f"file://{root}/keep", COLS, rows=["1,kept"])
    f = env.follower(policy, members=members, spark=lambda: session)

    def settled() -> None:
        """Through waggle: wait until the merged log has taken every event of analytics so far (its position in
        the journal's last block), as a consumer polling waggle would see them."""
        if via == "waggle":
            wait_for(lambda: journal_positions(journal).get("analytics", [0, 0])[1] >= current_event(port), timeout=20,
                     message="the merged log to take analytics' events")

    def step(f: Follower) -> Execution:
        settled()
        return incremental(f)

    settled()
    (first,) = catch_up(f)
    assert (first.phase, first.bootstrap_reason, first.status) == (BOOTSTRAP, "first run", SUCCEEDED), first
    assert table(tport, tdb, "keep") is not None

    # CREATE_TABLE
    with hms_client("127.0.0.1", port) as c:
        ensure_table(c, src, "events", f"file://{root}/events", COLS, KEYS)
    step(f)
    made = table(tport, tdb, "events")
    assert made is not None and [k.name for k in made.partitionKeys] == ["day"]

    # ALTER_TABLE: a new column
    with hms_client("127.0.0.1", port) as c:
        t = c.get_table(src, "events")
        t.sd.cols.append(ttypes.FieldSchema(name="score", type="double", comment=None))
        c.alter_table(src, "events", t)
    step(f)
    altered = table(tport, tdb, "events")
    assert altered is not None and [c.name for c in altered.sd.cols] == ["id", "name", "score"]

    # ADD_PARTITION, twice: one piece of work
    add_partition(port, src, "events", "d1", root, ["1,ann"])
    add_partition(port, src, "events", "d2", root, ["2,bob"])
    added = step(f)
    assert added.partitions == 2 and added.events == {("ADD_PARTITION", "applied"): 2}, added
    assert set(partitions(tport, tdb, "events")) == {"day=d1", "day=d2"}

    # ALTER_PARTITION: d1 moves to new files
    moved = root / "events" / "d1-moved"
    moved.mkdir(parents=True)
    (moved / "data.csv").write_text("11,ann2\n")
    with hms_client("127.0.0.1", port) as c:
        p = c.get_partition(src, "events", ["d1"])
        p.sd.location = f"file://{moved}"
        c.alter_partition(src, "events", p)
    step(f)
    d1 = partitions(tport, tdb, "events")["day=d1"]
    if mode == o.MIRROR:
        assert d1.sd.location == partitions(port, src, "events")["day=d1"].sd.location  # as the metastore spells it
        assert d1.sd.location.endswith("/events/d1-moved")
    else:
        assert urlsplit(d1.sd.location).path.startswith(str(copies))
        assert (Path(urlsplit(d1.sd.location).path) / "data.csv").read_text() == "11,ann2\n"

    # DROP_PARTITION (propagate-deletes)
    with hms_client("127.0.0.1", port) as c:
        c.drop_partition(src, "events", ["d2"], False)
    step(f)
    assert set(partitions(tport, tdb, "events")) == {"day=d1"}
    if mode == o.COPY:
        assert not (copies / "events" / "day=d2").exists()

    # INSERT: a new file in d1, and one in the unpartitioned table, each announced by its writer (Hive 2's IDL:
    # its InsertEventRequestData)
    (moved / "more.csv").write_text("12,cat\n")
    (root / "keep" / "more.csv").write_text("2,more\n")
    import hmsclient.genthrift.hive_metastore.ttypes as h

    with hive2_client(port) as c:
        for name, values, added_file in (("events", ["d1"], moved / "more.csv"), ("keep", [], root / "keep/more.csv")):
            c.fire_listener_event(h.FireEventRequest(
                successful=True, dbName=src, tableName=name, partitionVals=values or None,
                data=h.FireEventRequestData(insertData=h.InsertEventRequestData(filesAdded=[f"file://{added_file}"]))))
    inserted = step(f)
    assert inserted.events == {("INSERT", "applied"): 2}, inserted
    if mode == o.COPY:
        def files(where: Path) -> list[str]:
            return sorted(p.name for p in where.iterdir() if not p.name.startswith("."))

        assert inserted.bytes > 0 and files(copies / "events" / "day=d1") == ["data.csv", "more.csv"]
        assert files(copies / "keep") == ["data.csv", "more.csv"]

    # RENAME: the target table moves (the same table, renamed), its files are not copied again
    before = table(tport, tdb, "events")
    env.recorder.clear()
    with hms_client("127.0.0.1", port) as c:
        t = c.get_table(src, "events")
        t.tableName = "events2"
        c.alter_table(src, "events", t)
    renamed = step(f)
    writes = [(m, a) for m, a in env.calls() if m in ("create_table", "drop_table", "alter_table",
                                                      "alter_table_with_environment_context", "add_partitions",
                                                      "drop_partition", "drop_partition_by_name")]
    assert [m for m, _ in writes if m.startswith("create") or m.startswith("drop")] == [], writes
    assert any(m.startswith("alter_table") and (a.dbname, a.tbl_name, a.new_tbl.tableName) == (tdb, "events", "events2")
               for m, a in writes), writes
    assert table(tport, tdb, "events") is None
    after = table(tport, tdb, "events2")
    assert after is not None and after.createTime == before.createTime
    assert set(partitions(tport, tdb, "events2")) == {"day=d1"}
    if mode == o.COPY:  # the files moved with the table
        assert renamed.bytes == 0, renamed
        assert urlsplit(after.sd.location).path == str(copies / "events2")
        assert urlsplit(partitions(tport, tdb, "events2")["day=d1"].sd.location).path == str(copies / "events2/day=d1")
        assert not (copies / "events").exists() and (copies / "events2/day=d1/more.csv").exists()
    moved_parts = partitions(tport, tdb, "events2")
    assert all(p.parameters[o.SOURCE_OBJECT] == f"{named}.events2/{n}" for n, p in moved_parts.items())
    assert after.parameters[o.SOURCE_OBJECT] == f"{named}.events2"

    # Spark reads the source's rows at the target (a copy with the source's files gone)
    if mode == o.COPY:
        shutil.rmtree(root)
    for name in ("events2", "keep"):
        session.catalog.refreshTable(f"{tdb}.{name}")
    rows = session.sql(f"SELECT id, name, day FROM {tdb}.events2 ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(11, "ann2", "d1"), (12, "cat", "d1")]
    assert [tuple(r) for r in session.sql(f"SELECT id, name FROM {tdb}.keep ORDER BY id").collect()] == [
        (1, "kept"), (2, "more")]

    # DROP_TABLE (propagate-deletes)
    with hms_client("127.0.0.1", port) as c:
        c.drop_table(src, "events2", False)
    step(f)
    assert table(tport, tdb, "events2") is None
    if mode == o.COPY:
        assert not (copies / "events2").exists() and not (copies / "events").exists()


# -- a gap in the log ---------------------------------------------------------------------------------------------
def test_events_purged_before_they_were_read_or_a_restarted_log_bootstrap_again(
        env: Env, short_lived_events: Any, primary: Any, source_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = Logs()
    monkeypatch.setattr(follower, "log", logs)
    store, src = short_lived_events, "gapsrc"
    root = env.work / "gap"
    with hms_client("127.0.0.1", store.port) as c:
        ensure_database(c, src, f"file://{root}")
        ensure_table(c, src, "a", f"file://{root}/a", COLS, KEYS)
    policy = TableSpec(source="ttl", patterns=(rf"{src}\..*",), target_database=f"gap_{uuid.uuid4().hex[:6]}",
                       propagate_deletes=True)
    f = env.follower(policy, members={"ttl": store.uri})
    try:
        (first,) = catch_up(f)
        assert first.phase == BOOTSTRAP
        checkpoint = first.to_event
        add_partition(store.port, src, "a", "d1", root)
        with hms_client("127.0.0.1", store.port) as c:
            ensure_table(c, src, "b", f"file://{root}/b", COLS)

            def purged() -> bool:
                events = c.get_next_notification(ttypes.NotificationEventRequest(lastEvent=checkpoint,
                                                                                 maxEvents=10)).events or []
                return not events or events[0].eventId > checkpoint + 1

            wait_for(purged, 30, "the events after the checkpoint purged")
        execution = f.step(threading.Event())
        assert execution is not None and execution.phase == BOOTSTRAP, execution
        assert execution.bootstrap_reason is not None and execution.bootstrap_reason.startswith("gap: "), execution
        assert execution.status == SUCCEEDED and execution.from_event == checkpoint
        (warning,) = logs.find("warning", "sync.follow_gap")
        assert warning["checkpoint"] == checkpoint and "purged" in warning["gap"]
        assert set(partitions(primary.port, str(policy.target_database), "a")) == {"day=d1"}
        assert table(primary.port, str(policy.target_database), "b") is not None

        # a member whose log restarted (a new metastore database behind the same name): its newest event is
        # below the checkpoint, which a policy that followed the analytics metastore until now has (its tables
        # match there too: a policy whose tables match nothing does not bootstrap)
        moved = TableSpec(source="ttl", patterns=(rf"({src}|{source_db})\..*",),
                          target_database=f"{policy.target_database}_r")
        name = f"p{uuid.uuid4().hex[:8]}"
        with hms_client("127.0.0.1", env.analytics.port) as c:
            ensure_table(c, source_db, "first", f"file://{root}/elsewhere", COLS)
            while current_event(env.analytics.port) <= current_event(store.port) + 5:
                ensure_table(c, source_db, f"t{uuid.uuid4().hex[:6]}", f"file://{root}/elsewhere", COLS)
        (before,) = catch_up(env.follower(moved, name=name, members={"ttl": env.analytics.uri}))
        env.followers[-1].close()
        assert before.to_event > current_event(store.port)
        restarted = env.follower(moved, name=name, members={"ttl": store.uri}).step(threading.Event())
        assert restarted is not None and restarted.phase == BOOTSTRAP, restarted
        assert restarted.bootstrap_reason == (f"gap: the source's notification log restarted: its newest event is "
                                              f"{current_event(store.port)}, the checkpoint {before.to_event}")
        assert table(primary.port, str(moved.target_database), "b") is not None
    finally:
        with hms_client("127.0.0.1", primary.port) as c:
            for db in (str(policy.target_database), f"{policy.target_database}_r"):
                try:
                    c.drop_database(db, False, True)
                except Exception:
                    pass


# -- bad input -------------------------------------------------------------------------------------------------------
class CorruptingLog(HiveStubMetastore):
    """A stub in front of the source whose ``get_next_notification`` returns the real events, except that the
    message of each ADD_PARTITION event of table ``victim`` is replaced by something that is not JSON."""

    def __init__(self, upstream: Any, db: str, victim: str) -> None:
        self.upstream, self.db, self.victim = upstream, db, victim
        self.corrupted: list[int] = []
        super().__init__("127.0.0.1", upstream.port, version="2.3.10",
                         local={"get_next_notification": self._corrupt})

    def _corrupt(self, args: Any) -> Any:
        with hms_client("127.0.0.1", self.upstream.port) as c:
            response = c.get_next_notification(args.rqst)
        for e in response.events or []:
            if (e.dbName, e.tableName, e.eventType) == (self.db, self.victim, "ADD_PARTITION"):
                e.message = "{\"db\": \"" + self.db + "\", cut off"
                self.corrupted.append(e.eventId)
        return response


def test_bad_input_fails_its_table_and_the_page_goes_on(env: Env, source_db: str, primary: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    logs = Logs()
    monkeypatch.setattr(follower, "log", logs)
    monkeypatch.setattr(apply, "log", logs)
    src, root, tport = source_db, env.work / "src", primary.port
    with hms_client("127.0.0.1", env.analytics.port) as c:
        for name in ("unreadable", "missing", "foreign", "fine"):
            ensure_table(c, src, name, f"file://{root}/{name}", COLS, KEYS)
    stub = CorruptingLog(env.analytics, src, "unreadable").start()
    try:
        policy = spec(src, "t")
        tdb = str(policy.target_database)
        f = env.follower(policy, members={"analytics": stub.uri})
        (first,) = catch_up(f)
        assert first.phase == BOOTSTRAP and first.status == SUCCEEDED, first
        with hms_client("127.0.0.1", tport) as c:
            c.drop_table(tdb, "missing", False)  # the target no longer holds it
            c.drop_table(tdb, "foreign", False)  # a table the sync did not make, under the same name
            ensure_table(c, tdb, "foreign", f"file://{env.work}/foreign", COLS, KEYS)
        before = current_event(env.analytics.port)
        for name in ("unreadable", "missing", "foreign", "fine"):
            add_partition(env.analytics.port, src, name, "d1", root)
        ids = dict(zip(("unreadable", "missing", "foreign", "fine"), range(before + 1, before + 5), strict=True))

        (execution,) = catch_up(f)
        assert (execution.phase, execution.status, execution.to_event) == (INCREMENTAL, PARTIAL, ids["fine"])
        failed = {f"{tdb}.{n}" for n in ("unreadable", "missing", "foreign")}
        assert set(execution.failed_tables) == failed == set(f.state().failed_tables), execution
        assert set(stub.corrupted) == {ids["unreadable"]}  # served (read) once or more, always corrupted
        assert execution.failed_tables[f"{tdb}.unreadable"].startswith(
            f"event {ids['unreadable']} (ADD_PARTITION of {src}.unreadable): the message is not JSON")
        assert f"the target holds no table {tdb}.missing" in execution.failed_tables[f"{tdb}.missing"]
        assert "was not created by waggle sync" in execution.failed_tables[f"{tdb}.foreign"]
        assert execution.events == {("ADD_PARTITION", "failed"): 3, ("ADD_PARTITION", "applied"): 1}
        for text in execution.failed_tables.values():
            assert "Traceback" not in text and "File \"" not in text
        # each logged with its event id
        (unreadable,) = logs.find("warning", "sync.follow_unreadable_event")
        assert (unreadable["event_id"], unreadable["table"]) == (ids["unreadable"], f"{src}.unreadable")
        by_table = {line["table"]: line["events"] for line in logs.find("warning", "sync.follow_table_failed")}
        assert by_table == {f"{tdb}.missing": [ids["missing"]], f"{tdb}.foreign": [ids["foreign"]]}
        # the table that was fine is done, the others untouched
        assert set(partitions(tport, tdb, "fine")) == {"day=d1"}
        assert partitions(tport, tdb, "foreign") == {} and table(tport, tdb, "missing") is None
        # and the follower goes on: the next page applies, and a table that succeeds again is no longer failed
        add_partition(env.analytics.port, src, "fine", "d2", root)
        add_partition(env.analytics.port, src, "unreadable", "d3", root)  # its message corrupted again
        (later,) = catch_up(f)
        assert set(later.failed_tables) == {f"{tdb}.unreadable"}
        assert set(partitions(tport, tdb, "fine")) == {"day=d1", "day=d2"}
        assert set(f.state().failed_tables) == failed
        assert int(sys_params(tport)[record_key(f.name, "checkpoint")]) == later.to_event
    finally:
        stub.stop()


# -- a crash in the middle of a page ---------------------------------------------------------------------------------
class Crash(BaseException):
    """The process dies here (not an error the follower handles)."""


def test_a_crash_in_the_middle_of_a_page_is_replayed_to_the_same_end(env: Env, source_db: str, primary: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    src, root, tport, sport = source_db, env.work / "src", primary.port, env.analytics.port
    with hms_client("127.0.0.1", sport) as c:
        for name in ("x", "y"):
            ensure_table(c, src, name, f"file://{root}/{name}", COLS, KEYS)
    policy = spec(src, "u")
    tdb = str(policy.target_database)
    f = env.follower(policy)
    (first,) = catch_up(f)
    checkpoint = first.to_event
    for i in range(3):
        for name in ("x", "y"):
            add_partition(sport, src, name, f"d{i}", root)
    with hms_client("127.0.0.1", sport) as c:
        p = c.get_partition(src, "x", ["d0"])
        p.parameters = {**(p.parameters or {}), "touched": "1"}
        c.alter_partition(src, "x", p)
        c.drop_partition(src, "y", ["d1"], False)

    real_finish = apply.Applier._finish
    written: list[str] = []

    def write_then_crash(self: apply.Applier, i: int, p: Any, *rest: Any) -> Any:
        if p.work.name[1] == "y":  # the tables are written in parallel: y's writes never happen
            raise Crash("killed after the first table's writes")
        out = real_finish(self, i, p, *rest)
        written.append(p.work.name[1])
        return out

    monkeypatch.setattr(apply.Applier, "_finish", write_then_crash)
    with pytest.raises(Crash):
        f.step(threading.Event())
    assert written == ["x"] and set(partitions(tport, tdb, "x")) == {"day=d0", "day=d1", "day=d2"}
    assert partitions(tport, tdb, "y") == {}
    assert int(sys_params(tport)[record_key(f.name, "checkpoint")]) == checkpoint  # not moved past the page
    monkeypatch.setattr(apply.Applier, "_finish", real_finish)
    f.close()  # the crashed process renews its lease no more

    again = env.follower(policy, name=f.name)  # a new follower of the same policy
    (replayed,) = catch_up(again)
    assert (replayed.phase, replayed.status, replayed.from_event) == (INCREMENTAL, SUCCEEDED, checkpoint), replayed
    assert replayed.partitions == 2  # only y's: x's were already right

    def state(port: int, db: str, recorded: bool) -> dict[str, dict[str, str]]:
        return {t: {n: ((p.parameters or {}).get(o.FINGERPRINT, "") if recorded else o.partition_fingerprint(p))
                    for n, p in partitions(port, db, t).items()} for t in ("x", "y")}

    assert state(tport, tdb, True) == state(sport, src, False)
    assert set(partitions(tport, tdb, "y")) == {"day=d0", "day=d2"}
    assert catch_up(again) == []  # nothing left: the replay moved the checkpoint


@pytest.mark.spark
def test_a_crash_in_the_middle_of_a_copys_rename_is_replayed_without_copying_again(
        env: Env, source_db: str, primary: Any, session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the copy's directory and partitions moved but before the table was renamed: the replay
    renames it, and copies nothing."""
    src, root, tport, sport = source_db, env.work / "src", primary.port, env.analytics.port
    copies = env.work / "copies"
    with hms_client("127.0.0.1", sport) as c:
        ensure_table(c, src, "r", f"file://{root}/r", COLS, KEYS)
    add_partition(sport, src, "r", "d1", root, ["1,ann"])
    policy = spec(src, "c", o.COPY, location_root=f"file://{copies}")
    tdb = str(policy.target_database)
    f = env.follower(policy, spark=lambda: session)
    (first,) = catch_up(f)
    assert first.phase == BOOTSTRAP and first.bytes > 0, first
    with hms_client("127.0.0.1", sport) as c:
        t = c.get_table(src, "r")
        t.tableName = "r2"
        c.alter_table(src, "r", t)

    real_move = apply.Applier._move_partitions

    def move_then_crash(self: apply.Applier, *args: Any) -> None:
        real_move(self, *args)
        raise Crash("killed before the table was renamed")

    monkeypatch.setattr(apply.Applier, "_move_partitions", move_then_crash)
    with pytest.raises(Crash):
        f.step(threading.Event())
    assert table(tport, tdb, "r") is not None and (copies / "r2" / "day=d1" / "data.csv").exists()
    monkeypatch.setattr(apply.Applier, "_move_partitions", real_move)
    f.close()  # the crashed process renews its lease no more

    (replayed,) = catch_up(env.follower(policy, name=f.name, spark=lambda: session))
    assert (replayed.phase, replayed.status, replayed.bytes) == (INCREMENTAL, SUCCEEDED, 0), replayed
    assert table(tport, tdb, "r") is None
    (d1,) = partitions(tport, tdb, "r2").values()
    assert urlsplit(d1.sd.location).path == str(copies / "r2" / "day=d1")
    shutil.rmtree(root)
    session.catalog.refreshTable(f"{tdb}.r2")
    assert [tuple(r) for r in session.sql(f"SELECT id, name FROM {tdb}.r2").collect()] == [(1, "ann")]


# -- the checkpoint ---------------------------------------------------------------------------------------------------
def test_the_checkpoint_is_the_last_event_read_and_a_changed_definition_bootstraps(env: Env, source_db: str,
                                                                                   primary: Any) -> None:
    src, sport, tport = source_db, env.analytics.port, primary.port
    with hms_client("127.0.0.1", sport) as c:
        ensure_table(c, src, "a", f"file://{env.work}/src/a", COLS)
    policy = spec(src, "m")
    f = env.follower(policy)
    (first,) = catch_up(f)
    params = sys_params(tport)
    assert int(params[record_key(f.name, "checkpoint")]) == first.to_event == current_event(sport)
    assert params[record_key(f.name, "source")] == "analytics"
    # caught up: the policy says when its copies were last known to match the source (the proxy's freshness)
    covered = json.loads(params[f"waggle.sync.coverage.policy-{f.name}"])
    assert covered["source"] == "analytics" and covered["patterns"] == [rf"{src}\..*"], covered
    assert time.time() - 60 < covered["at"] <= time.time()
    # events none of which is in scope: the checkpoint still moves to the last one read
    other = f"{src}_other"
    with hms_client("127.0.0.1", sport) as c:
        ensure_database(c, other, f"file://{env.work}/other")
        ensure_table(c, other, "z", f"file://{env.work}/other/z", COLS)
        c.drop_database(other, False, True)
    last = current_event(sport)
    (skipped,) = catch_up(f)
    assert (skipped.phase, skipped.to_event, skipped.objects) == (INCREMENTAL, last, 0), skipped
    assert int(sys_params(tport)[record_key(f.name, "checkpoint")]) == last
    assert f.state().checkpoint == last
    f.close()
    # another target database: the policy bootstraps again
    changed = env.follower(spec(src, "c"), name=f.name)
    (again,) = catch_up(changed)
    assert (again.phase, again.bootstrap_reason, again.from_event) == (BOOTSTRAP, "policy changed", last), again
    assert table(tport, f"{src}_c", "a") is not None


def test_a_long_log_is_read_a_page_at_a_time_each_checkpointed(env: Env, source_db: str, primary: Any) -> None:
    src, root, sport, tport = source_db, env.work / "src", env.analytics.port, primary.port
    with hms_client("127.0.0.1", sport) as c:
        ensure_table(c, src, "a", f"file://{root}/a", COLS, KEYS)
    policy = spec(src, "m")
    f = env.follower(policy, page_size=2)
    (first,) = catch_up(f)
    for i in range(5):
        add_partition(sport, src, "a", f"d{i}", root)
    pages = []
    for _ in range(3):
        page = f.step(threading.Event())
        assert page is not None and page.status == SUCCEEDED, page
        assert int(sys_params(tport)[record_key(f.name, "checkpoint")]) == page.to_event
        pages.append((page.from_event, page.to_event, page.partitions))
    start = first.to_event
    assert pages == [(start, start + 2, 2), (start + 2, start + 4, 2), (start + 4, start + 5, 1)]
    assert f.step(threading.Event()) is None
    assert set(partitions(tport, str(policy.target_database), "a")) == {f"day=d{i}" for i in range(5)}


# -- databases and functions ------------------------------------------------------------------------------------------
class AlterDatabaseLog(HiveStubMetastore):
    """A stub in front of the source that serves the CREATE_DATABASE event of database ``marker`` as the
    ALTER_DATABASE event of ``db`` a Hive 3 metastore writes (``JSONAlterDatabaseMessage``, the database before and
    after in Thrift's JSON): Hive 2.3 writes no event when a database is altered (its listener API has no
    ``onAlterDatabase``), so the change made at the real source is announced as a Hive 3 source announces it."""

    def __init__(self, upstream: Any, marker: str, db: str) -> None:
        self.upstream, self.marker, self.db = upstream, marker, db
        super().__init__("127.0.0.1", upstream.port, version="2.3.10",
                         local={"get_next_notification": self._announce})

    def _announce(self, args: Any) -> Any:
        from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
        from thrift.TSerialization import serialize

        with hms_client("127.0.0.1", self.upstream.port) as c:
            response = c.get_next_notification(args.rqst)
            for e in response.events or []:
                if (e.eventType, e.dbName) == ("CREATE_DATABASE", self.marker):
                    try:  # the database as it is now (read again when the event is, after it was dropped too)
                        now = c.get_database(self.db)
                    except Exception:
                        now = ttypes.Database(name=self.db)
                    after = serialize(now, TJSONProtocolFactory()).decode()
                    e.eventType, e.dbName = "ALTER_DATABASE", self.db
                    e.message = json.dumps({"server": "", "servicePrincipal": "", "db": self.db,
                                            "dbObjBeforeJson": after, "dbObjAfterJson": after,
                                            "timestamp": e.eventTime})
        return response


def database(port: int, name: str) -> ttypes.Database | None:
    with hms_client("127.0.0.1", port) as c:
        try:
            return c.get_database(name)
        except ttypes.NoSuchObjectException:
            return None


def function(port: int, db: str, name: str) -> ttypes.Function | None:
    with hms_client("127.0.0.1", port) as c:
        try:
            return c.get_function(db, name)
        except ttypes.NoSuchObjectException:
            return None


def test_databases_and_functions_the_policy_covers_reach_the_target(env: Env, primary: Any) -> None:
    """Databases created, altered and dropped at the source, and functions created and dropped in them, with a
    policy whose pattern covers databases by their prefix (no ``target-database``: each source database has its
    own). The real metastores write ``json-0.2`` messages only; Hive 4's ``gzip(json-2.0)`` ones are decoded by the
    unit tests (tests/unit/sync/test_follow_events.py, test_follow_plan.py). The sync's database and function work
    is the same in mirror and copy mode (a dropped copy's files go as a dropped table's do: the matrix above)."""
    p, sport, tport, root = f"fd{uuid.uuid4().hex[:8]}", env.analytics.port, primary.port, env.work / "src"
    keep, new, user, other, marker = f"{p}_keep", f"{p}_new", f"{p}_user", f"x{p}", f"m{p}"
    user_type, jar = ttypes.PrincipalType.USER, ttypes.ResourceType.JAR

    def made_at_source(name: str, **fields: Any) -> ttypes.Database:
        return ttypes.Database(name=name, locationUri=f"file://{root}/{name}.db", **fields)

    stub = AlterDatabaseLog(env.analytics, marker, new).start()
    try:
        with hms_client("127.0.0.1", sport) as c:
            ensure_database(c, keep, f"file://{root}/{keep}.db")
            ensure_table(c, keep, "t", f"file://{root}/{keep}.db/t", COLS)
        with hms_client("127.0.0.1", tport) as c:  # the target's own database, which the sync will write into
            c.create_database(ttypes.Database(name=user, description="mine", locationUri=f"file://{env.work}/{user}",
                                              parameters={}, ownerName="bob", ownerType=user_type))
        policy = TableSpec(source="analytics", patterns=(rf"{p}_[a-z]+\..*",), propagate_deletes=True)
        f = env.follower(policy, members={"analytics": stub.uri})
        (first,) = catch_up(f)
        assert (first.phase, first.status) == (BOOTSTRAP, SUCCEEDED), first
        assert table(tport, keep, "t") is not None

        # CREATE_DATABASE: a covered one is made with the source's description, parameters and owner, at the
        # target's own location; the target's own database keeps its; one out of scope is not made
        with hms_client("127.0.0.1", sport) as c:
            c.create_database(made_at_source(new, description="sales data", parameters={"team": "data"},
                                             ownerName="alice", ownerType=user_type))
            c.create_database(made_at_source(user, description="theirs", parameters={"team": "src"},
                                             ownerName="carol", ownerType=user_type))
            c.create_database(made_at_source(other, description="out of scope", parameters={}))
        created = incremental(f)
        assert created.events == {("CREATE_DATABASE", "applied"): 2, ("CREATE_DATABASE", "skipped"): 1}, created
        made = database(tport, new)
        assert made is not None and (made.description, made.ownerName, made.ownerType) == ("sales data", "alice",
                                                                                           user_type)
        assert made.parameters == {"team": "data", o.SOURCE: "analytics", o.SOURCE_OBJECT: new}, made.parameters
        assert made.locationUri.endswith(f"/{new}.db") and str(root) not in made.locationUri, made.locationUri
        mine = database(tport, user)
        assert mine is not None and (mine.description, mine.ownerName, mine.parameters.get("team")) == ("mine", "bob",
                                                                                                        None)
        assert database(tport, other) is None

        # ALTER_DATABASE (as Hive 3 announces it: AlterDatabaseLog): parameters and owner, not the location
        with hms_client("127.0.0.1", sport) as c:
            d = c.get_database(new)
            d.description, d.parameters, d.ownerName = "sales and returns", {"team": "bi", "tier": "gold"}, "dave"
            d.locationUri = f"file://{root}/moved.db"
            c.alter_database(new, d)
            c.create_database(made_at_source(marker, parameters={}))
        altered = incremental(f)
        assert altered.events == {("ALTER_DATABASE", "applied"): 1}, altered
        now = database(tport, new)
        # (a Hive 2.3 target changes no description on alter_database: the one it was created with stays)
        assert now is not None and (now.description, now.ownerName) == ("sales data", "dave")
        assert now.parameters == {"team": "bi", "tier": "gold", o.SOURCE: "analytics", o.SOURCE_OBJECT: new}
        assert now.locationUri == made.locationUri

        # CREATE_FUNCTION in a covered database, and in one out of scope
        def udf(db: str, name: str) -> ttypes.Function:
            return ttypes.Function(functionName=name, dbName=db, className="com.example.Upper", ownerName="alice",
                                   ownerType=user_type, createTime=int(time.time()),
                                   functionType=ttypes.FunctionType.JAVA,
                                   resourceUris=[ttypes.ResourceUri(jar, f"file://{root}/udf.jar")])

        with hms_client("127.0.0.1", sport) as c:
            c.create_function(udf(new, "upper"))
            c.create_function(udf(other, "lower"))
        fns = incremental(f)
        assert fns.events == {("CREATE_FUNCTION", "applied"): 1, ("CREATE_FUNCTION", "skipped"): 1}, fns
        copied = function(tport, new, "upper")
        assert copied is not None and (copied.className, copied.ownerName) == ("com.example.Upper", "alice")
        assert [(r.resourceType, r.uri) for r in copied.resourceUris] == [(jar, f"file://{root}/udf.jar")]
        assert function(tport, other, "lower") is None

        # DROP_FUNCTION
        with hms_client("127.0.0.1", sport) as c:
            c.drop_function(new, "upper")
        dropped = incremental(f)
        assert dropped.events == {("DROP_FUNCTION", "applied"): 1}, dropped
        assert function(tport, new, "upper") is None

        # DROP_DATABASE: the sync's own database goes; one that holds a table a user made in it stays (the sync's
        # copy in it goes), and so does the target's own database: both reported failed, nothing of theirs dropped
        with hms_client("127.0.0.1", tport) as c:
            ensure_table(c, keep, "report", f"file://{env.work}/report", COLS)
        with hms_client("127.0.0.1", sport) as c:
            c.create_function(udf(new, "upper"))
            for name in (new, user, keep):
                c.drop_database(name, False, True)
        (gone,) = catch_up(f)
        assert (gone.phase, gone.status) == (INCREMENTAL, PARTIAL), gone
        assert set(gone.failed_tables) == {keep, user}, gone.failed_tables
        assert f"it holds what waggle sync did not create from analytics:{keep} (table report)" in \
            gone.failed_tables[keep]
        assert f"target database {user} was not created by waggle sync" in gone.failed_tables[user]
        assert database(tport, new) is None
        assert table(tport, keep, "t") is None and table(tport, keep, "report") is not None
        kept = database(tport, user)
        assert kept is not None and kept.description == "mine"
    finally:
        stub.stop()
        for port, names in ((sport, (keep, new, user, other, marker)), (tport, (keep, new, user))):
            with hms_client("127.0.0.1", port) as c:
                for name in names:
                    try:
                        c.drop_database(name, False, True)
                    except Exception:
                        pass
