"""The copies as values (waggle.synced.coverage, waggle.copies.catalog): coverage records, and Copy/Copies built
from the primary's Table values and those records. Pure: no socket, no metastore."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from waggle.config.loader import load
from waggle.config.model import CopyReads, MetastoreConfig, PartialCopies, WaggleConfig
from waggle.copies.catalog import NONE, Copies, Copy, copy_of, synced_at
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.synced import coverage
from waggle.synced import objects as o

#: 2026-11-25T10:00:00Z
T0 = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC).timestamp()
MEMBERS: dict[str, Any] = {"lake": object(), "sea": object()}


def _config(root: Path, **lake: Any) -> WaggleConfig:
    federation = {
        "primary-meta-store": {"name": "main", "remote-meta-store-uris": "thrift://127.0.0.1:9"},
        "federated-meta-stores": [
            {"name": "lake", "remote-meta-store-uris": "thrift://127.0.0.1:9", "database-prefix": "lake_", **lake},
            {"name": "sea", "remote-meta-store-uris": "thrift://127.0.0.1:9", "database-prefix": "sea_"},
        ],
    }
    (root / "server.yml").write_text(yaml.safe_dump({"database-resolution": "PREFIXED"}))
    (root / "federation.yml").write_text(yaml.safe_dump(federation))
    return load(str(root / "server.yml"), str(root / "federation.yml"))


def _lake(root: Path, **settings: Any) -> MetastoreConfig:
    return _config(root, **settings).federation.member("lake")


def _table(name: str = "t2", db: str = "ice_copy", **params: str) -> T.Table:
    return T.Table(dbName=db, tableName=name, parameters=dict(params),
                   partitionKeys=[T.FieldSchema(name="DT", type="string"), T.FieldSchema(name="hr", type="int")],
                   sd=T.StorageDescriptor(location=f"hdfs://main/{db}/{name}"))


def _copied(name: str = "t2", source: str = "ice.t2", member: str = "lake", at: str | None = "2026-11-25T10:00:00Z",
            **params: str) -> T.Table:
    book = {o.SOURCE: member, o.SOURCE_OBJECT: source, **params}
    if at is not None:
        book[o.SYNCED_AT] = at
    return _table(name, **book)


def _copy(table: str = "t2", db: str = "ice", copy_db: str = "ice_copy", confirmed: float = T0, mode: str = o.COPY,
          member: str = "lake") -> Copy:
    return Copy(member, db, table, copy_db, table, mode, confirmed)


# -- coverage records ----------------------------------------------------------------------------------------------
def test_a_coverage_record_reads_back_as_written() -> None:
    params = {coverage.PREFIX + "follow-lake": coverage.record("lake", [r"ice\..*"], T0 + 0.12345),
              "description": "not a record"}
    (cover,) = coverage.read(params)
    assert (cover.name, cover.source, cover.at) == ("follow-lake", "lake", round(T0 + 0.12345, 3))
    assert cover.covers("lake", "ice", "t2")
    assert cover.covers("lake", "ICE", "T2")  # patterns match case-insensitively
    assert not cover.covers("sea", "ice", "t2")  # another member's tables
    assert not cover.covers("lake", "web", "t2")
    assert not cover.covers("lake", "iced", "t2")  # matched whole: "ice\." is not a prefix of "iced."


def test_a_record_covers_the_copies_of_its_own_target_and_mode_only() -> None:
    # a run into another target database (a mirror beside the copy) says nothing of the copy
    (into, own_name, old) = coverage.read({
        coverage.PREFIX + "a": coverage.record("lake", [r"ice\..*"], T0, "ice_mirror", "mirror"),
        coverage.PREFIX + "b": coverage.record("lake", [r"ice\..*"], T0),  # target: the source database's name
        coverage.PREFIX + "c": '{"source": "lake", "patterns": ["ice\\\\..*"], "at": 1}',  # says neither
    })
    assert into.covers("lake", "ice", "t2", "ice_mirror", "mirror")
    assert not into.covers("lake", "ice", "t2", "ice_copy", "copy")
    assert not into.covers("lake", "ice", "t2", "ice_mirror", "copy")
    assert own_name.covers("lake", "ice", "t2", "ICE", "copy") and not own_name.covers("lake", "ice", "t2", "x")
    assert old.covers("lake", "ice", "t2", "anything", "copy")


def test_unreadable_coverage_records_are_left_out() -> None:
    good = coverage.record("lake", ["ice.t2"], T0)
    params = {coverage.PREFIX + "a": "not json", coverage.PREFIX + "b": '{"source": "lake"}',
              coverage.PREFIX + "c": coverage.record("lake", ["("], T0), coverage.PREFIX + "d": good}
    assert [c.name for c in coverage.read(params)] == ["d"]
    assert coverage.read(None) == [] and coverage.read({}) == []


# -- a copy from a Table of the primary ----------------------------------------------------------------------------
def test_a_table_with_the_syncs_bookkeeping_is_a_copy_of_its_members_table() -> None:
    table = _copied("T2", "Ice.T2", **{o.MODE: o.COPY, o.METADATA_LOCATION: "hdfs://main/m/00001.metadata.json"})
    found = copy_of("Ice_Copy", table, [], MEMBERS)
    assert found == Copy("lake", "ice", "t2", "ice_copy", "t2", o.COPY, T0, ("dt", "hr"),
                         "hdfs://main/m/00001.metadata.json", "hdfs://main/ice_copy/T2")
    # a table without a mode is a mirror (the sync's default)
    mirror = copy_of("ice_copy", _copied(), [], MEMBERS)
    assert mirror is not None and mirror.mode == o.MIRROR and mirror.metadata_location is None


@pytest.mark.parametrize("table", [
    _table(),  # no bookkeeping: the primary's own table
    _table(**{o.SOURCE: "lake"}),  # no source object
    _table(**{o.SOURCE_OBJECT: "ice.t2"}),  # no source member
    _copied(source="t2"),  # not db.table
    _copied(source="ice.t2/dt=2024-01-01"),  # a partition's source object
    _copied(member="gone"),  # a member no longer in the federation
    T.Table(dbName="ice_copy", tableName="t2"),  # no parameters at all
])
def test_tables_that_are_not_copies_of_a_member_are_ignored(table: T.Table) -> None:
    assert copy_of("ice_copy", table, [], MEMBERS) is None


def test_freshness_is_the_later_of_synced_at_and_the_records_that_cover_the_copy() -> None:
    table = _copied()
    assert copy_of("ice_copy", table, [], MEMBERS).confirmed_at == T0  # type: ignore[union-attr]

    def confirmed(*records: tuple[str, list[str], float]) -> float:
        covers = coverage.read({coverage.PREFIX + str(i): coverage.record(*r, "ice_copy")
                                for i, r in enumerate(records)})
        found = copy_of("ice_copy", table, covers, MEMBERS)
        assert found is not None
        return found.confirmed_at

    assert confirmed(("lake", [r"ice\..*"], T0 + 600)) == T0 + 600  # a follower caught up later
    assert confirmed(("lake", [r"ice\..*"], T0 - 600)) == T0  # an older record says nothing new
    assert confirmed(("sea", [r"ice\..*"], T0 + 600)) == T0  # another member's record
    assert confirmed(("lake", [r"web\..*"], T0 + 600)) == T0  # a record of other tables
    assert confirmed(("lake", [r"ice\.t2"], T0 + 60), ("lake", [r"ice\..*"], T0 + 120),
                     ("lake", [r"web\..*"], T0 + 900)) == T0 + 120  # the newest record that covers it


def test_a_copy_without_synced_at_is_confirmed_only_by_records() -> None:
    for at in (None, "not a time"):
        table = _copied(at=at)
        assert copy_of("ice_copy", table, [], MEMBERS).confirmed_at == 0.0  # type: ignore[union-attr]
        covers = coverage.read({coverage.PREFIX + "run": coverage.record("lake", ["ice.t2"], T0, "ice_copy")})
        assert copy_of("ice_copy", table, covers, MEMBERS).confirmed_at == T0  # type: ignore[union-attr]
    assert synced_at({o.SYNCED_AT: "2026-11-25T10:00:00Z"}) == T0
    assert synced_at({o.SYNCED_AT: "2026-11-25T10:00:00+00:00"}) == T0
    assert synced_at(None) == 0.0


# -- staleness -----------------------------------------------------------------------------------------------------
def test_max_staleness_decides_whether_a_copy_is_used(tmp_path: Path) -> None:
    copy = _copy(confirmed=T0)
    limited = _lake(tmp_path, **{"read-from-copies": "when-down", "max-staleness": "1h"})
    assert limited.max_staleness_seconds == 3600
    assert copy.staleness(T0 + 10) == 10
    assert copy.staleness(T0 - 10) == 0  # a clock behind the sync's: never negative
    assert copy.usable(limited, T0 + 3600)
    assert not copy.usable(limited, T0 + 3601)
    (tmp_path / "unlimited").mkdir()
    unlimited = _lake(tmp_path / "unlimited", **{"read-from-copies": "when-down"})
    assert unlimited.max_staleness_seconds is None
    assert copy.usable(unlimited, T0 + 10 * 365 * 86400)  # no limit by default
    assert _copy(confirmed=0.0).usable(unlimited, T0)


@pytest.mark.parametrize(("text", "seconds"), [(600, 600), ("600s", 600), ("15m", 900), ("2h", 7200), ("1d", 86400)])
def test_max_staleness_takes_seconds_and_units(tmp_path: Path, text: Any, seconds: int) -> None:
    assert _lake(tmp_path, **{"max-staleness": text}).max_staleness_seconds == seconds


def test_read_from_copies_defaults_to_never_and_partial_to_source(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    assert (lake.read_from_copies, lake.partial, lake.max_staleness_seconds) == \
        (CopyReads.NEVER, PartialCopies.SOURCE, None)


# -- the copies of the primary -------------------------------------------------------------------------------------
def test_copies_are_found_by_their_source_table_and_database(tmp_path: Path) -> None:
    t2, t3 = _copy("t2"), _copy("t3")
    other_db = _copy("t9", db="web", copy_db="web_copy")
    sea = _copy("t2", member="sea", copy_db="sea_copy")
    copies = Copies.of([t2, t3, other_db, sea])
    assert copies and not NONE
    assert copies.table("lake", "ICE", "T2") is t2  # the client's spelling, any case
    assert copies.table("lake", "ice", "t4") is None and copies.table("main", "ice", "t2") is None
    assert copies.table("sea", "ice", "t2") is sea
    assert set(copies.database("lake", "Ice")) == {t2, t3}
    assert copies.database("lake", "nosuch") == ()
    config = _config(tmp_path)
    lake, sea_member = config.federation.member("lake"), config.federation.member("sea")
    assert copies.member_databases(lake, time.time()) == ["ice", "web"]
    assert copies.member_databases(sea_member, time.time()) == ["ice"]
    assert copies.counts == {"lake": 3, "sea": 1}
    assert copies.held_for("lake") and not copies.held_for("main")


def test_of_two_copies_of_one_table_the_fresher_is_served() -> None:
    older, newer = _copy(copy_db="ice_a", confirmed=T0), _copy(copy_db="ice_b", confirmed=T0 + 60)
    for order in ([older, newer], [newer, older]):
        copies = Copies.of(order)
        assert copies.table("lake", "ice", "t2") is newer
        assert copies.database("lake", "ice") == (newer,) and copies.counts == {"lake": 1}


def test_reads_are_served_from_copies_only_when_the_member_says_so_and_copies_exist(tmp_path: Path) -> None:
    copies = Copies.of([_copy()])
    for mode in ("when-down", "prefer"):
        (tmp_path / mode).mkdir()
        assert copies.serve(_lake(tmp_path / mode, **{"read-from-copies": mode}))
        assert not NONE.serve(_lake(tmp_path / mode, **{"read-from-copies": mode}))
    assert not copies.serve(_lake(tmp_path))  # never (the default)
    only_sea = Copies.of([_copy(member="sea")])
    assert not only_sea.serve(_lake(tmp_path / "prefer", **{"read-from-copies": "prefer"}))  # none of its tables
