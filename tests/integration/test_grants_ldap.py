"""A caller's groups from a real OpenLDAP directory (slapd, tests/support/ldap.py): found, changed within the TTL,
kept while the directory is down until the TTL runs out, then none; a bound search; a ``{dn}`` filter."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.support.env import ROOT
from tests.support.ldap import PEOPLE, PRIVATE, READER_DN, SUFFIX, Slapd, ldap_server, unique_name
from waggle.config.grants_model import GroupsConfig, LdapGroups
from waggle.config.kinds import GroupSource
from waggle.grants.groups import GroupResolver

__all__ = ["ldap_server"]  # the fixture, imported: a slapd for this module
pytestmark = pytest.mark.ldap

TTL = 2.0


def ldap_resolver(server: Slapd, ttl: float = TTL, **settings: Any) -> GroupResolver:
    """A resolver of groups from ``server`` (``settings``: more of :class:`LdapGroups`), not started."""
    ldap = LdapGroups(url=server.url, base=SUFFIX, timeout_seconds=2.0, **settings)
    return GroupResolver(GroupsConfig(source=GroupSource.LDAP, ttl_seconds=ttl, ldap=ldap))


def poll(until: Callable[[], bool], seconds: float) -> float:
    """Seconds until ``until()`` held (it is asked every 50 ms); fails after ``seconds``."""
    started = time.monotonic()
    while not until():
        assert time.monotonic() - started < seconds, f"not within {seconds} s"
        time.sleep(0.05)
    return time.monotonic() - started


def test_a_users_posix_groups(ldap_server: Slapd) -> None:
    alice, other = unique_name("alice"), unique_name("other")
    ldap_server.add_user(alice)
    sales = unique_name("Sales")
    ldap_server.add_group(sales, (alice, other))
    ldap_server.add_group(unique_name("ops"), (other,))
    groups = ldap_resolver(ldap_server)
    assert groups.groups(alice) == {sales.lower()}, "group names are lower-cased"
    assert groups.groups(unique_name("nobody")) == frozenset()
    assert groups.groups("*") == frozenset(), "the user name is escaped in the filter"


def test_moving_a_user_between_groups_is_seen_within_the_ttl(ldap_server: Slapd) -> None:
    bob = unique_name("bob")
    ldap_server.add_user(bob)
    analysts, engineers = unique_name("analysts"), unique_name("engineers")
    analysts_dn, engineers_dn = ldap_server.add_group(analysts, (bob,)), ldap_server.add_group(engineers)
    groups = ldap_resolver(ldap_server).start()
    try:
        assert groups.groups(bob) == {analysts}
        ldap_server.move_user(bob, analysts_dn, engineers_dn)
        seconds = poll(lambda: groups.groups(bob) == {engineers}, TTL + 1)
        assert seconds <= TTL + 0.5
    finally:
        groups.stop()


def test_a_stopped_directory_changes_nothing_until_the_ttl_runs_out(ldap_server: Slapd) -> None:
    carol = unique_name("carol")
    ldap_server.add_user(carol)
    team = unique_name("team")
    ldap_server.add_group(team, (carol,))
    groups = ldap_resolver(ldap_server)
    asked = time.monotonic()
    assert groups.groups(carol) == {team}
    fetched = time.monotonic()  # the groups were fetched between asked and fetched
    with capture_logs() as logs, ldap_server.down():
        answers: list[tuple[float, frozenset[str]]] = []
        while time.monotonic() < fetched + TTL + 0.5:
            answers.append((time.monotonic(), groups.groups(carol)))
            time.sleep(0.05)
        assert all(found == {team} for at, found in answers if at < asked + TTL), "kept until the TTL ran out"
        assert all(found == frozenset() for at, found in answers if at > fetched + TTL), "then none"
    events = [e["event"] for e in logs]
    assert events.count("groups.refresh_failed") == 1 and events.count("groups.expired") == 1
    # slapd is up again: the groups are back within a quarter of the TTL (the retry wait)
    poll(lambda: groups.groups(carol) == {team}, TTL / 4 + 2)


def test_a_bound_search_with_a_password_file_sees_what_anonymous_does_not(ldap_server: Slapd) -> None:
    dave = unique_name("dave")
    ldap_server.add_user(dave)
    public, private = unique_name("public"), unique_name("private")
    ldap_server.add_group(public, (dave,))
    ldap_server.add_group(private, (dave,), under=PRIVATE)
    assert ldap_resolver(ldap_server).groups(dave) == {public}
    bound = ldap_resolver(ldap_server, bind_dn=READER_DN, bind_password_file=str(ldap_server.reader_password_file))
    assert bound.groups(dave) == {public, private}
    wrong = ldap_server.work / "wrong-password"
    wrong.write_text("not-the-password\n")
    refused = ldap_resolver(ldap_server, bind_dn=READER_DN, bind_password_file=str(wrong))
    with capture_logs() as logs:
        assert refused.groups(dave) == frozenset()
    assert [e["event"] for e in logs] == ["groups.lookup_failed"]
    assert "not-the-password" not in repr(logs)


def test_a_dn_filter_with_group_of_names(ldap_server: Slapd) -> None:
    erin, frank = unique_name("erin"), unique_name("frank")
    ldap_server.add_user(erin)
    ldap_server.add_user(frank)
    crew = unique_name("crew")
    ldap_server.add_group(crew, (erin,), names=True)
    groups = ldap_resolver(ldap_server, group_filter="(&(objectClass=groupOfNames)(member={dn}))",
                           user_base=PEOPLE)
    assert groups.groups(erin) == {crew}
    assert groups.groups(frank) == frozenset()
    assert groups.groups(unique_name("ghost")) == frozenset(), "no entry for the user: no groups"


GEVENT_SCRIPT = """
from gevent import monkey
monkey.patch_all()
import json, sys, gevent
from waggle.config.grants_model import GroupsConfig, LdapGroups
from waggle.config.kinds import GroupSource
from waggle.grants.groups import GroupResolver
ticks = []
ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.01)) for _ in range(1000)])
config = GroupsConfig(source=GroupSource.LDAP, ttl_seconds=1, ldap=LdapGroups(url=sys.argv[1], base=sys.argv[2]))
groups = GroupResolver(config).start()
first = sorted(groups.groups(sys.argv[3]))
gevent.sleep(0.7)  # past half the TTL: the next answer comes from memory and a refresh runs in a greenlet
second = sorted(groups.groups(sys.argv[3]))
gevent.sleep(0.3)
groups.stop()
print(json.dumps({"first": first, "second": second, "ticks": len(ticks)}))
"""


def test_the_resolver_under_gevent(ldap_server: Slapd) -> None:
    gail = unique_name("gail")
    ldap_server.add_user(gail)
    band = unique_name("band")
    ldap_server.add_group(band, (gail,))
    out = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT, ldap_server.url, SUFFIX, gail], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["first"] == result["second"] == [band]
    assert result["ticks"] > 50, "the lookups left the event loop running"


@pytest.mark.integration
def test_a_waggle_grants_by_ldap_groups_changed_within_the_ttl_and_kept_while_ldap_is_down(
        ldap_server: Slapd, primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Access itself follows the directory: a user moved out of a group loses its grants within the TTL, and a
    stopped directory changes nothing until the TTL runs out."""
    from tests.support.clients import hive2_client
    from tests.support.federation import federated_members, federation_yaml
    from tests.support.proxy import WaggleProcess

    user, analysts, engineers = unique_name("dana"), unique_name("analysts"), unique_name("engineers")
    ldap_server.add_user(user)
    analysts_dn, engineers_dn = ldap_server.add_group(analysts, (user,)), ldap_server.add_group(engineers)
    ttl = 3
    server = (f"database-resolution: PREFIXED\nlogging:\n  format: json\nauthorization:\n  trust-set-ugi: true\n"
              f"  groups:\n    ttl: {ttl}\n    ldap:\n      url: {ldap_server.url}\n      base: {SUFFIX}\n"
              f"      timeout-seconds: 2\n  rules:\n  - groups: [{analysts.lower()}]\n"
              f"    databases: [analytics_sales]\n    privileges: [select]\n")
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle-ldap"),
                         federation_yaml(primary.uri, federated_members(analytics.uri, ops.uri)), server).start()

    def sees_sales() -> bool:
        with hive2_client(proc.port) as c:
            c.set_ugi(user, [])
            return "analytics_sales" in c.get_all_databases()

    try:
        assert sees_sales()
        ldap_server.move_user(user, analysts_dn, engineers_dn)
        assert poll(lambda: not sees_sales(), ttl + 3) <= ttl + 3  # within the TTL (and a refresh's round trip)
        ldap_server.move_user(user, engineers_dn, analysts_dn)
        poll(sees_sales, ttl + 3)
        with ldap_server.down():
            started = time.monotonic()
            assert sees_sales()  # the directory is down: nothing changes ...
            lost = poll(lambda: not sees_sales(), ttl + 5) + (time.monotonic() - started)
            assert lost >= ttl / 2  # ... until the TTL runs out (counted from the last refresh)
            assert proc.events("groups.expired")
        poll(sees_sales, ttl + 5)  # the directory back: the grants are back
    finally:
        proc.stop()
