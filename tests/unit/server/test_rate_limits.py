"""Rate limits (``limits.rates``): the token-bucket arithmetic with a clock given, which rules and buckets a call
counts against, the method families of the method table, the rules as the server file gives them, a reload, and
the driver answering a limited call without reaching a metastore (in-memory metastores).

Which error the clients retry, from their sources (the message a limited call gets is checked against each):

- Hive 2.3's ``RetryingMetaStoreClient.invoke`` retries a ``MetaException`` whose message matches
  ``(?s).*(JDO[a-zA-Z]*|TProtocol|TTransport)Exception.*``; Hive 3.1 and 4's ``RetryingMetaStoreClient``
  (``isRecoverableMetaException``) ``(?s).*(IO|JDO[a-zA-Z]*|TProtocol|TTransport)Exception.*``. Both reconnect and
  retry ``hive.metastore.failure.retries`` times (default 1) after ``hive.metastore.client.connect.retry.delay``.
- Spark's ``HiveClientImpl.retryLocked`` retries when ``causedByThrift``: a message in the cause chain matches
  ``(?s).*(TApplication|TProtocol|TTransport)Exception.*``.
- Trino's ``ThriftHiveMetastore`` runs every call through ``RetryDriver.run``, which retries any exception except
  the ``stopOn`` classes (``TrinoException``; per call ``NoSuchObjectException`` and the like, never
  ``MetaException``), with exponential backoff, on a new connection.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.memory_metastore import MemoryMetastore, failure
from waggle.common import metrics
from waggle.common.buckets import Bucket
from waggle.config.loader import ConfigError, load
from waggle.config.model import Family, Per, RateLimit
from waggle.config.registry import Setting
from waggle.config.settings import RATE_RULE_SETTINGS
from waggle.hms.gen.hive_metastore.ttypes import (
    CheckLockRequest,
    HeartbeatRequest,
    MetaException,
    NoSuchLockException,
    NoSuchObjectException,
    UnlockRequest,
)
from waggle.hms.methods import METHODS
from waggle.server import limits as server_limits
from waggle.server.limits import CallLimits, Hit
from waggle.workers.worker import for_worker

HIVE_23 = re.compile(r"(?s).*(JDO[a-zA-Z]*|TProtocol|TTransport)Exception.*")
HIVE_31_4 = re.compile(r"(?s).*(IO|JDO[a-zA-Z]*|TProtocol|TTransport)Exception.*")
SPARK = re.compile(r"(?s).*(TApplication|TProtocol|TTransport)Exception.*")


def rule(name: str = "r", rate: float = 1.0, burst: int = 2, **more: Any) -> RateLimit:
    return RateLimit(name=name, rate=rate, burst=burst, **more)


def takes(limits: CallLimits, n: int, now: float, user: str = "alice", host: str = "10.0.0.1",
          family: Family = Family.READS) -> list[bool]:
    """``n`` calls at ``now``: True for each that went on."""
    return [limits.check(user, host, family, now) is None for _ in range(n)]


# -- the arithmetic -------------------------------------------------------------------------------------------
def test_a_bucket_refills_at_its_rate_up_to_its_size_and_says_how_long_to_wait():
    bucket = Bucket(2.0, 10.0)
    assert bucket.refill(10.0, 4.0, 2.0) == 2.0
    bucket.level -= 2.0
    assert bucket.wait(4.0) == 0.25
    assert bucket.refill(10.125, 4.0, 2.0) == 0.5 and bucket.wait(4.0) == 0.125
    assert bucket.refill(20.0, 4.0, 2.0) == 2.0  # never above its size
    assert bucket.refill(19.0, 4.0, 2.0) == 2.0 and bucket.stamp == 20.0  # a clock read earlier adds nothing
    assert bucket.wait(4.0) == 0.0
    assert not Bucket(0.0, 0.0).full(0.49, 4.0, 2.0) and Bucket(0.0, 0.0).full(0.5, 4.0, 2.0)


def test_a_burst_then_the_rate():
    limits = CallLimits((rule(rate=2.0, burst=3),))
    assert takes(limits, 4, 0.0) == [True, True, True, False]
    assert takes(limits, 2, 0.5) == [True, False]  # one token in half a second at 2 a second
    assert takes(limits, 4, 10.0) == [True, True, True, False]  # full again, never more than the burst


def test_a_hit_says_the_rule_who_and_when_and_every_client_retries_its_message():
    limits = CallLimits((rule("trino-burst", rate=4.0, burst=1),))
    assert limits.check("trino", "10.0.0.1", Family.LISTINGS, 0.0) is None
    hit = limits.check("trino", "10.0.0.1", Family.LISTINGS, 0.125)
    assert isinstance(hit, Hit) and (hit.rule.name, hit.family, hit.user, hit.address) == \
        ("trino-burst", Family.LISTINGS, "trino", "10.0.0.1")
    assert hit.wait == pytest.approx(0.125)
    assert hit.message.startswith("waggle rate limit 'trino-burst' reached by user 'trino' (listings: 4 calls/s, "
                                  "burst 1); retry in 0.125 s")
    assert "nothing reached a metastore" in hit.message
    for retried_by in (HIVE_23, HIVE_31_4, SPARK):
        assert retried_by.fullmatch(hit.message), retried_by.pattern


def test_nothing_is_taken_when_one_of_the_rules_a_call_counts_against_refuses():
    limits = CallLimits((rule("wide", rate=1.0, burst=5), rule("narrow", rate=1.0, burst=1)))
    assert takes(limits, 1, 0.0) == [True]
    hit = limits.check("alice", "10.0.0.1", Family.READS, 0.0)
    assert hit is not None and hit.rule.name == "narrow"
    levels = {name: tokens for name, _, tokens in limits.levels(0.0)}
    assert levels == {"wide": 4.0, "narrow": 0.0}  # the refused call took nothing from 'wide'


# -- which buckets a call counts against ----------------------------------------------------------------------
def test_per_user_per_address_and_per_rule_buckets():
    limits = CallLimits((rule("u", burst=1, per=Per.USER, families=(Family.READS,)),
                         rule("a", burst=1, per=Per.ADDRESS, families=(Family.WRITES,)),
                         rule("r", burst=1, per=Per.RULE, families=(Family.LISTINGS,))))
    # per user: each user its own bucket, whatever the address
    assert takes(limits, 2, 0.0, "alice", "10.0.0.1") == [True, False]
    assert takes(limits, 1, 0.0, "alice", "10.0.0.2") == [False]
    assert takes(limits, 1, 0.0, "bob", "10.0.0.1") == [True]
    # per address: each address its own, whoever calls
    assert takes(limits, 1, 0.0, "alice", "10.0.0.1", Family.WRITES) == [True]
    assert takes(limits, 1, 0.0, "bob", "10.0.0.1", Family.WRITES) == [False]
    assert takes(limits, 1, 0.0, "bob", "10.0.0.2", Family.WRITES) == [True]
    # per rule: one bucket for all
    assert takes(limits, 1, 0.0, "alice", "10.0.0.1", Family.LISTINGS) == [True]
    assert takes(limits, 1, 0.0, "carol", "10.9.9.9", Family.LISTINGS) == [False]
    hit = limits.check("", "10.0.0.1", Family.READS, 0.0)
    assert hit is None  # a connection without a user has a bucket of its own...
    hit = limits.check("", "10.0.0.1", Family.READS, 0.0)
    assert hit is not None and hit.who == "connections without a user"
    hit = limits.check("x", "10.0.0.1", Family.WRITES, 0.0)
    assert hit is not None and hit.who == "address 10.0.0.1"
    hit = limits.check("x", "10.0.0.1", Family.LISTINGS, 0.0)
    assert hit is not None and hit.who == "its clients together"


def test_a_rule_applies_to_its_users_addresses_and_families_only():
    net = ipaddress.ip_network
    limits = CallLimits((rule(burst=1, users=frozenset({"trino"}), addresses=(net("10.1.0.0/16"), net("192.0.2.7/32")),
                              families=(Family.LISTINGS, Family.PARTITIONS)),))
    assert takes(limits, 1, 0.0, "trino", "10.1.2.3", Family.LISTINGS) == [True]
    assert takes(limits, 1, 0.0, "trino", "10.1.2.3", Family.PARTITIONS) == [False]  # one bucket for both
    assert takes(limits, 3, 0.0, "trino", "10.1.2.3", Family.READS) == [True] * 3  # not a family it counts
    assert takes(limits, 3, 0.0, "spark", "10.1.2.3", Family.LISTINGS) == [True] * 3  # not its user
    assert takes(limits, 3, 0.0, "trino", "10.2.0.1", Family.LISTINGS) == [True] * 3  # not its address
    assert takes(limits, 3, 0.0, "trino", "memory-client", Family.LISTINGS) == [True] * 3  # not an address at all
    limits.update(limits_of(limits))  # full again
    assert takes(limits, 2, 0.0, "trino", "::ffff:192.0.2.7", Family.LISTINGS) == [True, False]  # IPv4 on a v6 socket
    limits.update(limits_of(limits))
    assert takes(limits, 2, 0.0, "trino", "::ffff:10.2.0.1", Family.LISTINGS) == [True, True]


def limits_of(limits: CallLimits) -> tuple[RateLimit, ...]:
    """The same rules under new names (so that a reload gives them new buckets)."""
    return tuple(replace(r.config, name=r.config.name + "'") for r in limits.rules)


def test_each_worker_takes_its_share_of_a_rule(tmp_path: Path):
    config = load(server_file(tmp_path, [{"name": "r", "rate": 9, "burst": 10}]), federation(tmp_path))
    shared = for_worker(config, 4)
    assert shared.server.rates[0].workers == 4 and shared.server.rates[0].rate == 9  # the message keeps the pod's
    limits = CallLimits(shared.server.rates)
    assert takes(limits, 4, 0.0) == [True, True, True, False]  # burst 10 over 4 workers: 3 each (rounded up)
    assert takes(limits, 2, 4 / 9) == [True, False]  # 9/4 a second: one token in 4/9 s


def test_a_reload_keeps_the_buckets_of_a_rule_that_keeps_its_name_and_per():
    limits = CallLimits((rule("keep", burst=5), rule("gone", burst=1), rule("per", burst=1)))
    assert takes(limits, 3, 0.0) == [True, False, False]  # 'gone' and 'per' are empty
    limits.update((rule("keep", rate=1.0, burst=2), rule("per", burst=1, per=Per.RULE), rule("new", burst=1)))
    levels = {name: (buckets, tokens) for name, buckets, tokens in limits.levels(0.0)}
    assert levels == {"keep": (1, 2.0), "per": (0, 0.0), "new": (0, 0.0)}  # cut to the new burst; others anew
    assert takes(limits, 3, 0.0) == [True, False, False]  # 'per' and 'new' start full: 'keep' refuses second
    limits.update(())
    assert limits.rules == () and takes(limits, 5, 0.0) == [True] * 5


def test_a_rule_forgets_full_buckets_when_it_holds_many(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(server_limits, "MAX_BUCKETS", 100)
    for late, kept in ((5.0, 1), (0.5, 101)):
        limits = CallLimits((rule(rate=1.0, burst=1),))
        for i in range(100):
            assert limits.check(f"user{i}", "h", Family.READS, 0.0) is None
        assert limits.check("late", "h", Family.READS, late) is None  # at 5 s all are full again: forgotten
        assert next(limits.levels(late))[1] == kept
    assert limits.rules[0].prune_at == 200  # none forgotten: not looked at again before twice as many


# -- the method families --------------------------------------------------------------------------------------
def test_every_method_has_a_family_and_only_what_keeps_a_client_going_is_never_limited():
    assert all(spec.family is not None for spec in METHODS.values())
    never = {name for name, spec in METHODS.items() if spec.never_limited}
    assert never == {"set_ugi", "lock", "heartbeat", "heartbeat_txn_range", "check_lock", "unlock", "shutdown"}


@pytest.mark.parametrize(("method", "family"), [
    ("get_database", Family.READS), ("get_table", Family.READS), ("get_table_req", Family.READS),
    ("get_all_databases", Family.LISTINGS), ("get_table_meta", Family.LISTINGS), ("get_all_tables", Family.LISTINGS),
    ("get_tables_by_type", Family.LISTINGS), ("get_all_functions", Family.LISTINGS),
    ("get_partition_names", Family.PARTITIONS), ("get_partitions_by_names", Family.PARTITIONS),
    ("get_partitions_by_filter", Family.PARTITIONS), ("get_partitions_statistics_req", Family.PARTITIONS),
    ("partition_name_to_vals", Family.READS),  # string parsing, declared a read
    ("create_table", Family.WRITES), ("add_partitions", Family.WRITES), ("alter_partitions", Family.WRITES),
    ("drop_database", Family.WRITES), ("open_txns", Family.WRITES), ("commit_txn", Family.WRITES),
])
def test_a_method_is_in_the_family_its_table_entry_says(method: str, family: Family):
    assert METHODS[method].family is family


# -- the server file ------------------------------------------------------------------------------------------
def server_file(tmp_path: Path, rates: object, **more: object) -> str:
    path = tmp_path / "server.yml"
    path.write_text(yaml.safe_dump({"limits": {"rates": rates, **more}}))
    return str(path)


def federation(tmp_path: Path) -> str:
    path = tmp_path / "fed.yml"
    path.write_text(yaml.safe_dump({"primary-meta-store": {"name": "p",
                                                           "remote-meta-store-uris": "thrift://localhost:9083"}}))
    return str(path)


def test_rules_are_read_from_the_server_file(tmp_path: Path):
    rates = [{"name": "trino-burst", "users": ["trino"], "addresses": ["10.1.0.0/16", "2001:db8::/32"],
              "methods": ["reads", "Listings", "reads"], "rate": 200, "burst": 400, "per": "user"},
             {"name": "everyone", "users": "*", "rate": 2.5, "per": "rule", "brust": 9}]
    config = load(server_file(tmp_path, rates, **{"max-in-flight-calls": 7}), federation(tmp_path))
    trino, everyone = config.server.rates
    assert trino == RateLimit(name="trino-burst", rate=200.0, burst=400, users=frozenset({"trino"}),
                              addresses=(ipaddress.ip_network("10.1.0.0/16"), ipaddress.ip_network("2001:db8::/32")),
                              families=(Family.READS, Family.LISTINGS), per=Per.USER)
    assert (everyone.users, everyone.burst, everyone.families, everyone.per) == (None, 3, tuple(Family), Per.RULE)
    assert config.server.load.max_in_flight_calls == 7  # the other limits sit beside the rules
    assert config.warnings == (f"{tmp_path / 'server.yml'}: unknown rate limit key 'limits.rates[1].brust' is "
                               f"ignored (did you mean 'limits.rates[1].burst'?)",)
    with pytest.raises(ConfigError) as strict:  # waggle check --strict
        load(server_file(tmp_path, rates), federation(tmp_path), strict=True)
    assert strict.value.problems == [f"{tmp_path / 'server.yml'}: unknown rate limit key 'limits.rates[1].brust' "
                                     f"(did you mean 'limits.rates[1].burst'?)"]
    assert load(None, federation(tmp_path)).server.rates == ()


@pytest.mark.parametrize(("rates", "problem"), [
    ([{"name": "a", "rate": 1, "addresses": ["10.1.2.3/16"]}],
     "key 'limits.rates[0].addresses[0]': invalid value '10.1.2.3/16': not an address or CIDR range: "
     "10.1.2.3/16 has host bits set"),
    ([{"name": "a", "rate": 1, "addresses": "10.0.0.0/8, intranet"}],
     "key 'limits.rates[0].addresses[1]': invalid value 'intranet': not an address or CIDR range"),
    ([{"name": "a", "rate": 1, "methods": ["reads", "scans"]}],
     "key 'limits.rates[0].methods[1]': invalid value 'scans': expected one of reads, writes, listings, partitions"),
    ([{"name": "a", "rate": 0}], "key 'limits.rates[0].rate': invalid value 0: expected a number above 0"),
    ([{"name": "a", "rate": "fast"}], "key 'limits.rates[0].rate': invalid value 'fast': expected a number above 0"),
    ([{"name": "a", "rate": 1, "burst": 0}],
     "key 'limits.rates[0].burst': invalid value 0: expected an integer >= 1"),
    ([{"name": "a", "rate": 1, "per": "users"}],
     "key 'limits.rates[0].per': invalid value 'users': expected one of user, address, rule"),
    ([{"rate": 1}], "key 'limits.rates[0].name' is required"),
    ([{"name": "a"}], "key 'limits.rates[0].rate' is required"),
    ([{"name": "trino burst", "rate": 1}], "key 'limits.rates[0].name': invalid value 'trino burst': expected a name"),
    ([{"name": "a", "rate": 1}, {"name": "a", "rate": 2}],
     "key 'limits.rates[1].name': invalid value 'a': another rate limit has this name"),
    ([{"name": "a", "rate": 1}, "b"], "key 'limits.rates[1]': invalid value 'b': expected a rule"),
    ({"name": "a", "rate": 1}, "key 'limits.rates': invalid value {'name': 'a', 'rate': 1}: expected a list of rules"),
])
def test_a_bad_rule_names_file_key_and_value(tmp_path: Path, rates: object, problem: str):
    server = server_file(tmp_path, rates)
    with pytest.raises(ConfigError) as err:
        load(server, federation(tmp_path))
    assert f"{server}: {problem}" in str(err.value)


@pytest.mark.parametrize("setting", [s for s in RATE_RULE_SETTINGS if s.parse is not None], ids=lambda s: s.key)
def test_every_rule_validator_names_file_key_and_value(tmp_path: Path, setting: Setting[object]):
    server = server_file(tmp_path, [{"name": "a", "rate": 1, setting.key: [[1]]}])
    with pytest.raises(ConfigError) as err:
        load(server, federation(tmp_path))
    assert f"{server}: key 'limits.rates[0].{setting.key}': invalid value " in str(err.value)


# -- the driver -----------------------------------------------------------------------------------------------
def test_a_limited_call_is_answered_by_waggle_and_never_reaches_a_metastore(make, tmp_path: Path):
    primary = MemoryMetastore("primary").add_database("default")
    rates = [{"name": "alice-reads", "users": ["alice"], "methods": ["reads"], "rate": 0.001, "burst": 2}]
    h = make((primary, {}), (), {"limits.rates": rates})
    alice, bob = h.client(), h.client()
    alice.ok("set_ugi", user_name="alice", group_names=[])
    before = metrics.LIMITED.labels("alice-reads", "reads")._value.get()
    assert [alice.ok("get_database", name="default").name for _ in range(2)] == ["default", "default"]
    refused = failure(alice.call("get_database", name="default"))
    assert isinstance(refused, MetaException) and "waggle rate limit 'alice-reads'" in refused.message
    assert primary.methods() == ["get_database", "get_database"]  # the third never left waggle
    # never limited: the identity, lock keep-alives, lock checks and releases (answered by the metastore)
    alice.ok("set_ugi", user_name="alice", group_names=[])
    for method, args in (("check_lock", {"rqst": CheckLockRequest(lockid=7)}),
                         ("heartbeat", {"ids": HeartbeatRequest(lockid=7)}),
                         ("unlock", {"rqst": UnlockRequest(lockid=7)})):
        assert isinstance(failure(alice.call(method, **args)), NoSuchLockException), method
    assert alice.ok("get_all_databases") == ["default"]  # a listing is not a family the rule counts
    assert isinstance(failure(alice.call("get_database", name="nope")), MetaException)  # still limited
    for _ in range(3):  # another user is served meanwhile
        assert isinstance(failure(bob.call("get_database", name="nope")), NoSuchObjectException)
    assert metrics.LIMITED.labels("alice-reads", "reads")._value.get() - before == 2
    # a reload that raises the rate lets alice through at once
    h.runtime.reload(load_with(tmp_path, h, [{"name": "alice-reads", "users": ["alice"], "rate": 1000}]))
    assert [alice.ok("get_database", name="default").name for _ in range(3)] == ["default"] * 3


def load_with(tmp_path: Path, h: Any, rates: list[dict[str, Any]]) -> Any:
    """The harness's configuration with other rules, as a reload reads it."""
    assert h.config.server_file is not None
    data = yaml.safe_load(Path(h.config.server_file).read_text())
    data["limits"]["rates"] = rates
    path = tmp_path / "reloaded-server.yml"
    path.write_text(yaml.safe_dump(data))
    return load(str(path), h.config.federation_file)


def test_the_buckets_are_read_when_metrics_are_scraped(make):
    h = make((MemoryMetastore("primary").add_database("default"), {}), (),
             {"limits.rates": [{"name": "scraped", "rate": 0.001, "burst": 3, "per": "rule"}]})
    h.client().ok("get_database", name="default")
    text = metrics_text()
    assert 'waggle_limit_buckets{limit="scraped"} 1.0' in text
    assert re.search(r'waggle_limit_tokens\{limit="scraped"\} 2\.0\d*', text)


def metrics_text() -> str:
    from prometheus_client import generate_latest

    return generate_latest(metrics.REGISTRY).decode()


def test_no_users_or_families_means_every_one(tmp_path: Path):
    config = load(server_file(tmp_path, [{"name": "a", "rate": 1, "users": [], "methods": [], "addresses": []}]),
                  federation(tmp_path))
    (everyone,) = config.server.rates
    assert (everyone.users, everyone.families, everyone.addresses) == (None, tuple(Family), ())
