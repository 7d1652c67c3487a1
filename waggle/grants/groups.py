"""A caller's groups (``authorization.groups``): from a groups file, the operating system (NSS) or an LDAP
directory, kept in memory for ``ttl-seconds`` and refreshed in the background.

:class:`GroupResolver` serves a user's groups from memory. When an entry is past half its TTL a background
refresh is started, so a slow directory stalls no call; only a user's first lookup (or one whose entry ran out
while nobody asked) waits, and never longer than the source's timeout (then: no groups, logged). When refreshes
fail (the directory is down), the last groups stay in force until ``fetched_at + ttl``; after that the user's
groups are unknown and the answer is the empty set (fail closed), with one warning line. A change in the source is
seen within the TTL.

Background work runs in :mod:`threading` threads: plain threads in the CLI, greenlets under gevent's
monkey-patching (the server), where ldap3's sockets are cooperative too. :meth:`GroupResolver.start` adds a sweep
(every quarter TTL) that refreshes the entries of users seen within the TTL and forgets the others.
"""

from __future__ import annotations

import grp
import os
import pwd
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from waggle.common.logging import get_logger
from waggle.config.grants_model import GroupsConfig
from waggle.config.kinds import GroupSource

log = get_logger("waggle.grants")

#: how long a lookup of a local source (a file, NSS) may keep a first call waiting
LOCAL_TIMEOUT_SECONDS = 5.0


class GroupLookup(Protocol):
    """One source of groups: ``lookup`` answers a user's group names (lower-cased) or raises."""

    timeout: float

    def lookup(self, user: str) -> frozenset[str]:
        """The user's groups; raises when the source cannot be asked."""
        ...

    def describe(self) -> str:
        """How logs name the source."""
        ...


class FileGroups:
    """A groups file: ``group: member1, member2`` lines, or ``/etc/group`` lines (``name:x:gid:m1,m2``); ``#``
    starts a comment. Read again when its modification time (or size) changes. Names compare case-insensitively."""

    timeout = LOCAL_TIMEOUT_SECONDS

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self._members: dict[str, frozenset[str]] = {}  # user -> groups

    def describe(self) -> str:
        """How logs name this source."""
        return f"file {self.path}"

    def lookup(self, user: str) -> frozenset[str]:
        """The user's groups in the file (read again if it changed); raises when it cannot be read."""
        st = self.path.stat()
        if (st.st_mtime_ns, st.st_size) != self._stamp:
            self._members = parse_groups_file(self.path.read_text())
            self._stamp = (st.st_mtime_ns, st.st_size)
        return self._members.get(user.lower(), frozenset())


def parse_groups_file(text: str) -> dict[str, frozenset[str]]:
    """user (lower-cased) -> group names (lower-cased), from a groups file's text (see :class:`FileGroups`)."""
    groups: dict[str, set[str]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or ":" not in line:
            continue
        fields = line.split(":")
        name = fields[0].strip().lower()
        if not name:
            continue
        members = fields[3] if len(fields) == 4 else ":".join(fields[1:])  # /etc/group form, or `group: members`
        for member in members.replace(",", " ").split():
            groups.setdefault(member.lower(), set()).add(name)
    return {user: frozenset(names) for user, names in groups.items()}


class NssGroups:
    """The operating system's groups (NSS: ``/etc/group``, sssd, ...): the user's primary group and every group
    ``getgrouplist`` names. A user the system does not know has no groups."""

    timeout = LOCAL_TIMEOUT_SECONDS

    def describe(self) -> str:
        """How logs name this source."""
        return "nss"

    def lookup(self, user: str) -> frozenset[str]:
        """The user's groups as the system names them."""
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            return frozenset()
        names = set()
        for gid in {entry.pw_gid, *os.getgrouplist(user, entry.pw_gid)}:
            try:
                names.add(grp.getgrgid(gid).gr_name.lower())
            except KeyError:  # a gid without a name
                continue
        return frozenset(names)


def group_lookup(config: GroupsConfig) -> GroupLookup | None:
    """The source ``config`` names; None for ``source: none``."""
    if config.source is GroupSource.FILE:
        if not config.file:
            raise ValueError("authorization.groups.source file needs authorization.groups.file")
        return FileGroups(config.file)
    if config.source is GroupSource.NSS:
        return NssGroups()
    if config.source is GroupSource.LDAP:
        if config.ldap is None:
            raise ValueError("authorization.groups.source ldap needs authorization.groups.ldap")
        from waggle.grants.ldap_groups import LdapGroupSource

        return LdapGroupSource(config.ldap)
    return None


@dataclass
class _Entry:
    """One user's groups, and when they were fetched and last asked for."""

    groups: frozenset[str]
    fetched_at: float
    used_at: float
    failing: bool = False  # the last refresh failed
    retry_at: float = 0.0  # no refresh started before this
    warned: bool = False  # the expiry was logged


@dataclass
class _Fetch:
    """A lookup under way: ``done`` once it ended (found or failed)."""

    done: threading.Event = field(default_factory=threading.Event)


class GroupResolver:
    """A caller's groups from the source ``config`` names, cached for ``config.ttl_seconds`` (see the module).
    ``clock``: seconds, monotonic (tests pass their own); ``lookup``: a source to use instead of the one
    ``config`` names."""

    def __init__(self, config: GroupsConfig, clock: Callable[[], float] = time.monotonic,
                 lookup: GroupLookup | None = None) -> None:
        self.config = config
        self.ttl = config.ttl_seconds
        self.source = lookup if lookup is not None else group_lookup(config)
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._fetches: dict[str, _Fetch] = {}  # user -> the lookup under way
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._sweeper: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> GroupResolver:
        """Start the background sweep (a resolver without it still refreshes the entries its callers touch)."""
        if self.source is not None and self._sweeper is None:
            self._stopping.clear()
            self._sweeper = threading.Thread(target=self._sweep_loop, name="groups-sweep", daemon=True)
            self._sweeper.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the sweep (lookups under way finish on their own)."""
        self._stopping.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout)
            self._sweeper = None

    close = stop

    # -- the answer ----------------------------------------------------------------------------------------------
    def groups(self, user: str) -> frozenset[str]:
        """The user's group names, lower-cased: from memory, or (first lookup) from the source, waiting at most
        its timeout. Empty for ``source: none``, an unknown user, or groups that could not be known."""
        if self.source is None or not user:
            return frozenset()
        now = self._clock()
        with self._lock:
            entry = self._entries.get(user)
            if entry is not None:
                entry.used_at = now
                if now < entry.fetched_at + self.ttl:
                    if now >= entry.fetched_at + self.ttl / 2:
                        self._refresh_locked(user, now)
                    return entry.groups
                if entry.failing:  # refreshes failed until the TTL ran out: unknown, fail closed
                    if not entry.warned:
                        entry.warned = True
                        log.warning("groups.expired", user=user, source=self.source.describe(),
                                    ttl_seconds=self.ttl)
                    self._refresh_locked(user, now)
                    return frozenset()
            fetch = self._fetches.get(user) or self._start_locked(user)
        if not fetch.done.wait(self.source.timeout):
            log.warning("groups.lookup_slow", user=user, source=self.source.describe(),
                        timeout_seconds=self.source.timeout)
        with self._lock:
            entry = self._entries.get(user)
            fresh = entry is not None and not entry.failing and self._clock() < entry.fetched_at + self.ttl
            return entry.groups if entry is not None and fresh else frozenset()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no lookup is under way (at most ``timeout`` seconds); whether none is."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._fetches:
                left = deadline - time.monotonic()
                if left <= 0 or not self._idle.wait(left):
                    return not self._fetches
        return True

    # -- lookups -----------------------------------------------------------------------------------------------
    def _refresh_locked(self, user: str, now: float) -> None:
        """Start a background lookup of ``user`` unless one is under way or a failed one is too recent."""
        entry = self._entries.get(user)
        if user in self._fetches or (entry is not None and now < entry.retry_at):
            return
        self._start_locked(user)

    def _start_locked(self, user: str) -> _Fetch:
        """Start a lookup of ``user`` in a thread (a greenlet under gevent)."""
        fetch = self._fetches[user] = _Fetch()
        threading.Thread(target=self._fetch, args=(user, fetch), name="groups-lookup", daemon=True).start()
        return fetch

    def _fetch(self, user: str, fetch: _Fetch) -> None:
        """One lookup: its groups kept, or its failure remembered (the last groups stay until their TTL)."""
        assert self.source is not None
        try:
            try:
                found: frozenset[str] | None = self.source.lookup(user)
                error = None
            except Exception as exc:  # the source is down or refused: decided below
                found, error = None, exc
            now = self._clock()
            with self._lock:
                entry = self._entries.get(user)
                if found is not None:
                    self._entries[user] = _Entry(found, now, entry.used_at if entry else now)
                    if entry is not None and (entry.failing or entry.groups != found):
                        log.info("groups.refreshed", user=user, source=self.source.describe(),
                                 groups=sorted(found), recovered=entry.failing)
                    return
                if entry is None:  # unknown from now on, looked up again in the background
                    log.warning("groups.lookup_failed", user=user, source=self.source.describe(),
                                error=repr(error))
                    entry = self._entries[user] = _Entry(frozenset(), now - self.ttl, now, warned=True)
                elif not entry.failing:
                    log.warning("groups.refresh_failed", user=user, source=self.source.describe(),
                                error=repr(error), valid_seconds=round(max(0.0, entry.fetched_at + self.ttl - now), 1))
                entry.failing = True
                entry.retry_at = now + max(0.1, min(self.ttl / 4, 30.0))
        finally:
            with self._lock:
                self._fetches.pop(user, None)
                self._idle.notify_all()
            fetch.done.set()

    def _sweep_loop(self) -> None:
        """:meth:`sweep` every quarter TTL until stopped."""
        interval = max(0.1, self.ttl / 4)
        while not self._stopping.wait(interval):
            try:
                self.sweep()
            except Exception as exc:  # never let the loop die
                log.error("groups.sweep_failed", error=repr(exc))

    def sweep(self) -> None:
        """One round of the background sweep: refresh the entries past half their TTL whose users asked within
        the TTL; forget the users who did not ask for two TTLs."""
        now = self._clock()
        with self._lock:
            for user, entry in list(self._entries.items()):
                if now - entry.used_at > 2 * self.ttl:
                    del self._entries[user]
                elif now - entry.used_at <= self.ttl and now >= entry.fetched_at + self.ttl / 2:
                    self._refresh_locked(user, now)
