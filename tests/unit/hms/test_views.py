"""View SQL: database qualifiers rewritten by the parser, everything else untouched."""

from __future__ import annotations

from waggle.hms.views import rewrite_view_sql


def prefix(db: str) -> str:
    return {"web": "fed_web", "ads": "fed_ads"}.get(db.lower(), db)


def test_qualified_references_are_rewritten_in_place():
    sql = "SELECT `visits`.`id`, a.n FROM `web`.`visits` JOIN ads.a ON a.id = visits.id -- web.visits note"
    assert rewrite_view_sql(sql, prefix) == (
        "SELECT `visits`.`id`, a.n FROM `fed_web`.`visits` JOIN fed_ads.a ON a.id = visits.id -- web.visits note")


def test_subqueries_ctes_and_unqualified_names():
    sql = ("WITH recent AS (SELECT * FROM web.visits WHERE d > '2024') "
           "SELECT * FROM recent WHERE id IN (SELECT id FROM `ads`.`clicks`) UNION ALL SELECT * FROM local_t")
    out = rewrite_view_sql(sql, prefix)
    assert out == ("WITH recent AS (SELECT * FROM fed_web.visits WHERE d > '2024') "
                   "SELECT * FROM recent WHERE id IN (SELECT id FROM `fed_ads`.`clicks`) "
                   "UNION ALL SELECT * FROM local_t")


def test_strings_that_look_like_names_are_left_alone():
    sql = "SELECT 'web.visits' AS s, concat('ads', '.x') FROM web.visits"
    assert rewrite_view_sql(sql, prefix) == "SELECT 'web.visits' AS s, concat('ads', '.x') FROM fed_web.visits"


def test_unparseable_and_presto_views_are_unchanged():
    assert rewrite_view_sql("SELEC nonsense FROM (", prefix) == "SELEC nonsense FROM ("
    presto = "/* Presto View: eyJvcmlnaW5hbFNxbCI6InNlbGVjdCAqIGZyb20gd2ViLnZpc2l0cyJ9 */"
    assert rewrite_view_sql(presto, prefix) == presto
    assert rewrite_view_sql(None, prefix) is None
