"""Database ownership and access rules, on plain values (no sockets)."""

from __future__ import annotations

import pytest

from tests.support.federation import loaded_federation
from waggle.routing.access import create_refusal, table_visible, write_refusal
from waggle.routing.databases import ManualMap, PrefixedMap

FEDERATION = """
primary-meta-store:
  name: primary
  remote-meta-store-uris: thrift://h:1
  access-control-type: READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST
  writable-database-white-list: [etl_.*]
federated-meta-stores:
- name: fed
  remote-meta-store-uris: thrift://h:2
  mapped-databases: [web, ads.*, sales]
  database-name-mapping: {sales: revenue}
  mapped-tables:
  - database: web
    mapped-tables: [visits, page_.*]
- name: fed_eu
  remote-meta-store-uris: thrift://h:3
  database-prefix: FED_EU_
  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST
  writable-database-white-list: [scratch]
"""


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    return loaded_federation(tmp_path_factory, FEDERATION)


def names(target):
    return None if target is None else (target.member.name, target.db)


def test_prefixed_longest_prefix_wins_case_insensitively(federation):
    m = PrefixedMap(federation)
    assert names(m.resolve("sales")) == ("primary", "sales")
    assert names(m.resolve("fed_web")) == ("fed", "web")
    assert names(m.resolve("FED_EU_scratch")) == ("fed_eu", "scratch")  # not fed's "eu_scratch"
    assert names(m.resolve("fed_eu_anything")) == ("fed_eu", "anything")


def test_prefixed_aliases_work_both_ways(federation):
    m = PrefixedMap(federation)
    assert names(m.resolve("fed_revenue")) == ("fed", "sales")
    assert names(m.resolve("fed_sales")) == ("fed", "sales")
    assert m.client_names(federation.member("fed"), "sales") == ("fed_sales", "fed_revenue")


def test_prefixed_hidden_databases_are_unreachable_by_any_name(federation):
    m = PrefixedMap(federation)
    for name in ("fed_secret", "FED_SECRET", "Fed_Secret"):
        assert m.resolve(name) is None
    assert m.client_names(federation.member("fed"), "secret") == ()
    assert m.client_names(federation.member("fed"), "ADS_2024") == ("fed_ads_2024",)


def test_manual_owners_clashes_and_aliases(federation):
    listings = {"primary": ["default", "sales", "etl_x"], "fed": ["web", "sales", "secret"],
                "fed_eu": ["default", "scratch"]}
    m = ManualMap.build(federation, listings)
    assert names(m.resolve("sales")) == ("primary", "sales")
    assert names(m.resolve("revenue")) == ("fed", "sales")  # the alias still reaches fed's sales
    assert names(m.resolve("web")) == ("fed", "web")
    assert m.resolve("secret") is None
    assert names(m.resolve("SCRATCH")) == ("fed_eu", "scratch")
    clashes = {(c.name, c.kept, c.hidden) for c in m.clashes}
    assert clashes == {("sales", "primary", "fed"), ("default", "primary", "fed_eu")}
    assert "exists in metastores 'primary' and 'fed'" in next(c for c in m.clashes if c.name == "sales").describe()
    assert m.client_names(federation.member("fed"), "sales") == ("revenue",)
    assert m.client_names(federation.member("fed_eu"), "default") == ()


def test_access_rules(federation):
    primary, fed, eu = (federation.member(n) for n in ("primary", "fed", "fed_eu"))
    assert write_refusal(primary, "etl_daily") is None
    assert "writable-database-white-list" in (write_refusal(primary, "sales") or "")
    assert write_refusal(primary, "sales", created=frozenset({"sales"})) is None
    assert "read-only" in (write_refusal(fed, "web") or "")
    assert write_refusal(eu, "scratch") is None
    assert create_refusal(primary, "new_db") is None
    assert "only be created in the primary" in (create_refusal(fed, "x") or "")


def test_mapped_tables(federation):
    fed = federation.member("fed")
    assert table_visible(fed, "web", "visits")
    assert table_visible(fed, "WEB", "page_views")
    assert not table_visible(fed, "web", "secrets")
    assert table_visible(fed, "ads_1", "anything")
