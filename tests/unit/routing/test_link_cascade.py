"""A stock DROP DATABASE ... CASCADE of a link, as a sequence of calls (waggle.remotes.planning.cascading): Hive's
HiveMetaStoreClient.dropDatabase lists every table (get_all_tables), drops each (get_table, then
drop_table_with_environment_context, ignoring NoSuchObjectException) and then calls drop_database."""

from __future__ import annotations

from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.remotes.planning import cascading
from waggle.routing.links import Link

LINKS = {"eu_sales": Link("eu_sales", "sales", member="analytics")}


def _after(method: str, names: list[str], current: str | None) -> str | None:
    return cascading(METHODS[method], METHOD_IO[method].args, names, LINKS, current)


def test_a_listing_of_every_table_of_a_link_starts_the_sequence_and_its_calls_continue_it() -> None:
    state = _after("get_all_tables", ["EU_sales"], None)
    assert state == "eu_sales"
    for method in ("get_table", "drop_table_with_environment_context", "get_table_objects_by_name", "drop_database"):
        state = _after(method, ["eu_sales"], state)
        assert state == "eu_sales", method


def test_anything_else_ends_it_or_never_starts_it() -> None:
    assert _after("get_all_tables", ["plain_db"], None) is None  # not a link
    assert _after("get_tables", ["eu_sales"], None) is None  # SHOW TABLES (a pattern): not every table
    assert _after("get_table", ["eu_sales"], None) is None  # an explicit DROP TABLE begins with get_table
    assert _after("get_table", ["other"], "eu_sales") is None  # a call on another database ends it
    assert _after("get_all_databases", [], "eu_sales") is None
    assert cascading(METHODS["get_all_tables"], METHOD_IO["get_all_tables"].args, ["eu_sales"], {}, None) is None
