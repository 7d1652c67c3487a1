"""Catalog-qualified names and listing patterns, as Hive 2, 3 and 4 clients send them."""

from __future__ import annotations

import pytest

from waggle.hms.names import QualifiedName, matches, parse, residual_patterns


@pytest.mark.parametrize(("raw", "expected"), [
    ("sales", QualifiedName(None, "sales")),
    ("@hive#sales", QualifiedName("hive", "sales")),
    ("@hive#", QualifiedName("hive", None)),
    ("@hive#!", QualifiedName("hive", "")),
    ("@spark_catalog#web_db", QualifiedName("spark_catalog", "web_db")),
    (None, QualifiedName(None, None)),
])
def test_parse(raw, expected):
    assert parse(raw) == expected


@pytest.mark.parametrize("raw", ["sales", "@hive#sales", "@hive#", "@hive#!"])
def test_requalify_round_trips(raw):
    q = parse(raw)
    assert q.requalify(q.db) == raw


def test_requalify_keeps_the_clients_form_for_a_new_name():
    assert parse("@hive#fed_sales").requalify("sales") == "@hive#sales"
    assert parse("fed_sales").requalify("sales") == "sales"


@pytest.mark.parametrize(("pattern", "name", "ok"), [
    ("*", "anything", True),
    ("sales*", "SALES_2024", True),
    ("sales*|web", "web", True),
    ("sales*|web", "webx", False),
    ("fed.sales", "fed_sales", True),  # Hue's single-character wildcard
    ("fed.sales", "fedsales", False),
    ("a+b", "a+b", True),  # regex characters are literal
    ("a+b", "aab", False),
])
def test_matches(pattern, name, ok):
    assert matches(pattern, name) is ok


@pytest.mark.parametrize(("pattern", "prefix", "expected"), [
    ("*", "fed_", ["*"]),
    (None, "fed_", ["*"]),
    ("fed_*", "fed_", ["*"]),
    ("fed_web*", "fed_", ["web*"]),
    ("FED_Web", "fed_", ["Web"]),
    ("f*", "fed_", ["*"]),
    ("f*b", "fed_", ["*b"]),
    ("fed.web", "fed_", ["web"]),
    ("sales*", "fed_", None),
    ("fed_", "fed_", None),  # only the empty name would match
    ("sales*|fed_web|fed_ads*", "fed_", ["web", "ads*"]),
    ("fe", "fed_", None),
])
def test_residual_patterns(pattern, prefix, expected):
    assert residual_patterns(pattern, prefix) == expected


def test_residual_for_the_unprefixed_primary_is_the_pattern():
    assert residual_patterns("sales*|web", "") == ["sales*", "web"]
