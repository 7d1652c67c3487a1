"""A caller's groups: the groups file, the operating system's groups (NSS), and the TTL cache over any source."""

from __future__ import annotations

import os
import pwd
import subprocess
import threading
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from waggle.config.grants_model import GroupsConfig
from waggle.config.kinds import GroupSource
from waggle.grants.groups import FileGroups, GroupResolver, NssGroups, parse_groups_file


class Clock:
    """An injected clock: seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class InMemoryGroupSource:
    """A source of groups held in memory, for the TTL logic alone: ``down`` makes it raise, ``gate`` (when set)
    makes each lookup wait until it opens, ``calls`` counts lookups."""

    timeout = 0.5

    def __init__(self, groups: dict[str, frozenset[str]]) -> None:
        self.groups = groups
        self.down = False
        self.calls = 0
        self.gate: threading.Event | None = None

    def describe(self) -> str:
        return "memory"

    def lookup(self, user: str) -> frozenset[str]:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(10)
        if self.down:
            raise ConnectionError("the directory is away")
        return self.groups.get(user, frozenset())


def resolver(source: InMemoryGroupSource, clock: Clock, ttl: float = 100.0) -> GroupResolver:
    """A resolver over ``source`` on ``clock``, not started (no sweep)."""
    return GroupResolver(GroupsConfig(source=GroupSource.LDAP, ttl_seconds=ttl), clock=clock, lookup=source)


# -- the groups file ---------------------------------------------------------------------------------------------
def test_a_groups_file_in_either_form_with_comments() -> None:
    text = ("# analysts and engineers\n"
            "Analysts: alice, Bob  # a comment after members\n"
            "engineers:bob\n"
            "\n"
            "wheel:x:10:carol,alice\n"
            "empty:x:11:\n")
    assert parse_groups_file(text) == {"alice": {"analysts", "wheel"}, "bob": {"analysts", "engineers"},
                                       "carol": {"wheel"}}


def test_a_groups_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "groups"
    path.write_text("analysts: alice\n")
    source = FileGroups(str(path))
    assert source.lookup("alice") == {"analysts"}
    assert source.lookup("ALICE") == {"analysts"}
    assert source.lookup("bob") == frozenset()
    path.write_text("engineers: alice, bob\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    assert source.lookup("alice") == {"engineers"}
    assert source.lookup("bob") == {"engineers"}


def test_a_missing_groups_file_fails_closed(tmp_path: Path) -> None:
    groups = GroupResolver(GroupsConfig(source=GroupSource.FILE, file=str(tmp_path / "none")))
    with capture_logs() as logs:
        assert groups.groups("alice") == frozenset()
    assert [e["event"] for e in logs] == ["groups.lookup_failed"]


def test_the_file_source_through_the_resolver_sees_a_change_within_the_ttl(tmp_path: Path) -> None:
    path = tmp_path / "groups"
    path.write_text("analysts: alice\n")
    clock = Clock()
    groups = GroupResolver(GroupsConfig(source=GroupSource.FILE, file=str(path), ttl_seconds=10), clock=clock)
    assert groups.groups("alice") == {"analysts"}
    path.write_text("engineers: alice\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    clock.advance(6)  # past half the TTL: this call still answers from memory, and refreshes
    assert groups.groups("alice") == {"analysts"}
    assert groups.wait_idle(5)
    assert groups.groups("alice") == {"engineers"}


# -- the operating system's groups -----------------------------------------------------------------------------
def id_groups(user: str) -> frozenset[str]:
    """The groups ``id -Gn`` names: the system's own answer, to compare with."""
    out = subprocess.run(["id", "-Gn", user], capture_output=True, text=True, check=True).stdout
    return frozenset(name.lower() for name in out.split())


def test_nss_groups_of_this_machines_users() -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    assert NssGroups().lookup(me) == id_groups(me)
    assert NssGroups().lookup("root") == id_groups("root")
    assert "root" in NssGroups().lookup("root")


def test_nss_knows_no_groups_of_an_unknown_user() -> None:
    assert NssGroups().lookup("no-such-user-of-waggle") == frozenset()


def test_nss_through_the_resolver() -> None:
    groups = GroupResolver(GroupsConfig(source=GroupSource.NSS))
    assert groups.groups("root") == id_groups("root")


def test_no_source_no_groups() -> None:
    groups = GroupResolver(GroupsConfig(source=GroupSource.NONE)).start()
    assert groups.groups("root") == frozenset()
    groups.stop()


@pytest.mark.parametrize("config", [GroupsConfig(source=GroupSource.FILE), GroupsConfig(source=GroupSource.LDAP)])
def test_a_source_without_its_settings_is_refused(config: GroupsConfig) -> None:
    with pytest.raises(ValueError, match=r"authorization\.groups\."):
        GroupResolver(config)


# -- the cache ------------------------------------------------------------------------------------------------------
def test_groups_are_served_from_memory_within_half_the_ttl() -> None:
    source, clock = InMemoryGroupSource({"alice": frozenset({"analysts"})}), Clock()
    groups = resolver(source, clock)
    assert groups.groups("alice") == {"analysts"}
    clock.advance(49)
    assert groups.groups("alice") == {"analysts"}
    assert groups.wait_idle(5)
    assert source.calls == 1


def test_an_old_entry_is_answered_at_once_and_refreshed_in_the_background() -> None:
    source, clock = InMemoryGroupSource({"alice": frozenset({"analysts"})}), Clock()
    groups = resolver(source, clock)
    groups.groups("alice")
    source.groups["alice"] = frozenset({"engineers"})
    source.gate = threading.Event()  # the refresh hangs until the gate opens
    clock.advance(60)
    started = time.monotonic()
    assert groups.groups("alice") == {"analysts"}
    assert groups.groups("alice") == {"analysts"}
    assert time.monotonic() - started < 0.2, "a slow source stalls no call"
    source.gate.set()
    assert groups.wait_idle(5)
    assert groups.groups("alice") == {"engineers"}
    assert source.calls == 2, "one refresh at a time per user"


def test_a_first_lookup_waits_at_most_the_sources_timeout() -> None:
    source, clock = InMemoryGroupSource({"alice": frozenset({"analysts"})}), Clock()
    source.gate = threading.Event()
    groups = resolver(source, clock)
    started = time.monotonic()
    with capture_logs() as logs:
        assert groups.groups("alice") == frozenset()
    assert 0.4 < time.monotonic() - started < 2
    assert [e["event"] for e in logs] == ["groups.lookup_slow"]
    source.gate.set()  # the lookup finishes after all: its answer is kept
    assert groups.wait_idle(5)
    assert groups.groups("alice") == {"analysts"}
    assert source.calls == 1


def test_a_source_that_stops_answering_changes_nothing_until_the_ttl_runs_out() -> None:
    source, clock = InMemoryGroupSource({"alice": frozenset({"analysts"})}), Clock()
    groups = resolver(source, clock)
    groups.groups("alice")
    source.down = True
    with capture_logs() as logs:
        for _ in range(9):  # to 99 s: refreshes fail, the groups stay
            clock.advance(11)
            assert groups.groups("alice") == {"analysts"}
            groups.wait_idle(5)
        clock.advance(1.5)  # the TTL has run out: unknown, fail closed
        assert groups.groups("alice") == frozenset()
        groups.wait_idle(5)
        clock.advance(30)
        assert groups.groups("alice") == frozenset()
        groups.wait_idle(5)
    events = [e["event"] for e in logs]
    assert events.count("groups.refresh_failed") == 1
    assert events.count("groups.expired") == 1
    assert all(e["user"] == "alice" for e in logs)
    source.down = False  # it answers again: the next call after the retry wait refreshes, and the groups are back
    clock.advance(25)
    assert groups.groups("alice") == frozenset()
    assert groups.wait_idle(5)
    assert groups.groups("alice") == {"analysts"}


def test_failed_refreshes_are_retried_no_more_than_every_quarter_ttl() -> None:
    source, clock = InMemoryGroupSource({"alice": frozenset({"analysts"})}), Clock()
    groups = resolver(source, clock)
    groups.groups("alice")
    source.down = True
    clock.advance(60)
    groups.groups("alice")
    groups.wait_idle(5)
    for _ in range(5):
        clock.advance(1)
        groups.groups("alice")
        groups.wait_idle(5)
    assert source.calls == 2
    clock.advance(25)
    groups.groups("alice")
    groups.wait_idle(5)
    assert source.calls == 3


def test_a_failed_first_lookup_gives_no_groups_and_stalls_no_later_call() -> None:
    source, clock = InMemoryGroupSource({"alice": frozenset({"analysts"})}), Clock()
    source.down = True
    groups = resolver(source, clock)
    with capture_logs() as logs:
        assert groups.groups("alice") == frozenset()
    assert [e["event"] for e in logs] == ["groups.lookup_failed"]
    source.gate = threading.Event()
    clock.advance(30)
    started = time.monotonic()
    assert groups.groups("alice") == frozenset()  # retried in the background
    assert time.monotonic() - started < 0.2
    source.down = False
    source.gate.set()
    assert groups.wait_idle(5)
    assert groups.groups("alice") == {"analysts"}


def test_an_entry_that_ran_out_while_nobody_asked_is_looked_up_again() -> None:
    source, clock = InMemoryGroupSource({"alice": frozenset({"analysts"})}), Clock()
    groups = resolver(source, clock)
    groups.groups("alice")
    source.groups["alice"] = frozenset({"engineers"})
    clock.advance(500)
    assert groups.groups("alice") == {"engineers"}


def test_the_sweep_refreshes_users_who_asked_and_forgets_the_others() -> None:
    source, clock = InMemoryGroupSource({"alice": frozenset({"a"}), "bob": frozenset({"b"})}), Clock()
    groups = resolver(source, clock)
    groups.groups("alice")
    groups.groups("bob")
    clock.advance(40)
    groups.groups("alice")  # bob asks no more
    source.groups = {"alice": frozenset({"a2"}), "bob": frozenset({"b2"})}
    clock.advance(70)
    groups.sweep()
    assert groups.wait_idle(5)
    assert source.calls == 3, "alice's entry refreshed, bob's not"
    clock.advance(150)
    groups.sweep()  # neither asked for two TTLs: both forgotten
    assert groups.wait_idle(5)
    assert source.calls == 3
    assert groups.groups("bob") == {"b2"}
    assert source.calls == 4


def test_start_and_stop() -> None:
    source = InMemoryGroupSource({"alice": frozenset({"analysts"})})
    groups = GroupResolver(GroupsConfig(source=GroupSource.LDAP, ttl_seconds=0.4), lookup=source).start()
    try:
        assert groups.groups("alice") == {"analysts"}
        deadline = time.monotonic() + 5
        while source.calls < 2 and time.monotonic() < deadline:  # the sweep refreshes alice, who asked
            time.sleep(0.05)
        assert source.calls >= 2
    finally:
        started = time.monotonic()
        groups.stop()
        assert time.monotonic() - started < 1
