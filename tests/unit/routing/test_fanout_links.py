"""A fan-out (get_table_meta, get_databases) asks a member for the databases that links matching the client's
pattern stand for: Trino's SHOW TABLES of a link is get_table_meta(link, "*", []), and a link's name is not the
member's (tests/clients/test_client_sequences.py replays it on real metastores)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from waggle.call.merge import _member_pattern
from waggle.routing.databases import DatabaseMap, LinkedMap
from waggle.routing.links import Link


class _Base(DatabaseMap):
    def client_names(self, member: Any, db: str) -> tuple[str, ...]:
        return (f"an_{db}",)


def _naming(prefix: str, links: dict[str, Any]) -> Any:
    member = SimpleNamespace(name="an", database_name_mapping={})
    return SimpleNamespace(member=member, prefix=prefix, dbmap=LinkedMap(_Base(), {
        name: (member, link) for name, link in links.items()}))


LINKS = {"eu_sales": Link("eu_sales", "sales", member="an"), "eu_web": Link("eu_web", "web", member="an")}


def test_a_link_matching_the_pattern_asks_its_member_for_the_remote_database() -> None:
    naming = _naming("an_", LINKS)
    assert _member_pattern(naming, "eu_sales") == "sales"
    assert _member_pattern(naming, "eu_*") == "sales|web"
    assert _member_pattern(naming, "an_x|eu_web") == "x|web"
    assert _member_pattern(naming, "*") == "*"
    assert _member_pattern(naming, "other") is None  # neither the prefix nor a link matches: not asked
    assert naming.dbmap.linked(naming.member) == {"eu_sales": "sales", "eu_web": "web"}


def test_without_links_or_prefix_the_pattern_is_as_before() -> None:
    assert _member_pattern(_naming("an_", {}), "an_sales") == "sales"
    assert _member_pattern(_naming("", {}), "sales|web") == "sales|web"
    assert _member_pattern(_naming("", LINKS), "eu_web") == "eu_web|web"
    assert _member_pattern(_naming("", {}), None) == "*"
