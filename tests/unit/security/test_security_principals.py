"""Kerberos principals, ``_HOST`` expansion and ``auth_to_local``, with the examples of Hadoop's documentation
and of its ``TestKerberosName``."""

from __future__ import annotations

import pytest

from waggle.config.hive_values import expand_host
from waggle.security.principals import (
    AuthToLocal,
    NoMatchingRule,
    Principal,
    PrincipalError,
    RuleError,
)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("alice@EXAMPLE.COM", Principal("alice", None, "EXAMPLE.COM")),
        ("hive/hms1.example.com@EXAMPLE.COM", Principal("hive", "hms1.example.com", "EXAMPLE.COM")),
        ("hdfs", Principal("hdfs")),
        ("nn/host", Principal("nn", "host")),
    ],
)
def test_principal_parse_and_str(text: str, parsed: Principal) -> None:
    assert Principal.parse(text) == parsed
    assert str(parsed) == text


@pytest.mark.parametrize("bad", ["", "owen/owen/owen@FOO.COM", "owen@foo/bar.com", "a@b@c", "/host@R", "a@"])
def test_malformed_principals(bad: str) -> None:
    with pytest.raises(PrincipalError, match="malformed Kerberos principal"):
        Principal.parse(bad)


def test_expand_host_like_security_util() -> None:
    assert expand_host("hive/_HOST@EXAMPLE.COM", "HMS1.Example.COM") == "hive/hms1.example.com@EXAMPLE.COM"
    local = lambda: "Box.Local"  # noqa: E731
    assert expand_host("hive/_HOST@EXAMPLE.COM", "0.0.0.0", local) == "hive/box.local@EXAMPLE.COM"
    assert expand_host("hive/_HOST@EXAMPLE.COM", "", local) == "hive/box.local@EXAMPLE.COM"
    assert expand_host("hive/_HOST@EXAMPLE.COM", None, local) == "hive/box.local@EXAMPLE.COM"
    for unchanged in ("hive/hms1@EXAMPLE.COM", "hive/_HOST", "alice@EXAMPLE.COM", "_HOST/x@R"):
        assert expand_host(unchanged, "h") == unchanged


# Hadoop's TestKerberosName, default realm "EXAMPLE.COM"
TEST_RULES = """
RULE:[1:$1@$0](.*@YAHOO\\.COM)s/@.*//
RULE:[2:$1](johndoe)s/^.*$/guest/
RULE:[2:$1;$2](^.*;admin$)s/;admin$//
RULE:[2:$2](root)
DEFAULT
"""


@pytest.mark.parametrize(
    ("principal", "short"),
    [
        ("omalley@EXAMPLE.COM", "omalley"),
        ("hdfs/host1.example.com@EXAMPLE.COM", "hdfs"),
        ("oom@YAHOO.COM", "oom"),
        ("johndoe/zoo@FOO.COM", "guest"),
        ("joe/admin@FOO.COM", "joe"),
        ("joe/root@FOO.COM", "root"),
        ("hdfs", "hdfs"),  # no realm: the name itself, no rule consulted
    ],
)
def test_hadoop_test_kerberos_name_translations(principal: str, short: str) -> None:
    assert AuthToLocal(TEST_RULES, "EXAMPLE.COM").short_name(principal) == short


@pytest.mark.parametrize("principal", ["foo@ACME.COM", "root/joe@FOO.COM"])
def test_hadoop_test_kerberos_name_bad_translations(principal: str) -> None:
    with pytest.raises(NoMatchingRule, match="no auth_to_local rule applies"):
        AuthToLocal(TEST_RULES, "EXAMPLE.COM").short_name(principal)


def test_hadoop_secure_mode_documentation_example() -> None:
    rules = AuthToLocal(
        """
        RULE:[2:$1/$2@$0]([ndj]n/.*@REALM\\.TLD)s/.*/hdfs/
        RULE:[2:$1/$2@$0]([rn]m/.*@REALM\\.TLD)s/.*/yarn/
        RULE:[2:$1/$2@$0](jhs/.*@REALM\\.TLD)s/.*/mapred/
        DEFAULT
        """,
        "REALM.TLD",
    )
    assert rules.short_name("nn/host1.realm.tld@REALM.TLD") == "hdfs"
    assert rules.short_name("dn/host2.realm.tld@REALM.TLD") == "hdfs"
    assert rules.short_name("rm/host3@REALM.TLD") == "yarn"
    assert rules.short_name("jhs/host4@REALM.TLD") == "mapred"
    assert rules.short_name("hive/host5@REALM.TLD") == "hive"
    assert rules.short_name("alice@REALM.TLD") == "alice"
    with pytest.raises(NoMatchingRule):
        rules.short_name("alice@OTHER.TLD")


def test_hadoop_documentation_foo_realm_example() -> None:
    rules = AuthToLocal("RULE:[1:$1@$0](.*@FOO.COM)s/@.*//\nDEFAULT", "BAR.COM")
    assert rules.short_name("alice@FOO.COM") == "alice"
    assert rules.short_name("bob@BAR.COM") == "bob"


def test_lower_case_rules_from_test_kerberos_name() -> None:
    rules = AuthToLocal(
        "RULE:[1:$1]/L\nRULE:[2:$1]/L\nRULE:[2:$1;$2](^.*;admin$)s/;admin$///L\nRULE:[2:$1;$2](^.*;guest$)s/;guest$//g/L\n"
        "DEFAULT",
        "EXAMPLE.COM",
    )
    for principal in ("Joe@FOO.COM", "Joe/root@FOO.COM", "Joe/admin@FOO.COM", "Joe/guestguest@FOO.COM"):
        assert rules.short_name(principal) == "joe"


def test_substitution_once_or_globally_with_java_group_references() -> None:
    once = AuthToLocal("RULE:[1:$1](.*)s/a/x/", "R")
    every = AuthToLocal("RULE:[1:$1](.*)s/a/x/g", "R")
    assert once.short_name("banana@R") == "bxnana"
    assert every.short_name("banana@R") == "bxnxnx"
    swap = AuthToLocal("RULE:[2:$1-$2](.*)s/(.*)-(.*)/$2_$1\\$/", "R")
    assert swap.short_name("svc/h1@R") == "h1_svc$"


def test_a_rule_producing_a_non_simple_name_stops_the_search() -> None:
    rules = AuthToLocal("RULE:[1:$1@$0]\nDEFAULT", "R")
    with pytest.raises(NoMatchingRule, match="non-simple name 'alice@R'"):
        rules.short_name("alice@R")


def test_rules_apply_to_their_number_of_components_only() -> None:
    rules = AuthToLocal("RULE:[2:$1]", "R")
    assert rules.short_name("svc/host@R") == "svc"
    with pytest.raises(NoMatchingRule):
        rules.short_name("svc@R")


def test_empty_rules_map_nothing_with_a_realm() -> None:
    assert AuthToLocal("", "R").short_name("hdfs") == "hdfs"
    with pytest.raises(NoMatchingRule):
        AuthToLocal("", "R").short_name("alice@R")


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ("RULE:[1:$1]\nGARBAGE", "invalid auth_to_local rule 'GARBAGE' \\(after RULE:\\[1:\\$1\\]\\)"),
        ("RULE:[1:$1](a[)", "rule RULE:\\[1:\\$1\\]\\(a\\[\\): bad regex"),
        ("RULE:[:$1]", "missing the number of components"),
        ("RULE:[1:$2]", "\\$2 is outside the valid range 0 to 1"),
        ("RULE:[1:$]", "'\\$' without a component number"),
        ("RULE:[1:$1](.*)s/(a)/$2/", "no group 2"),
        ("RULE:[1:$1](.*)s/a/b$/", "illegal group reference"),
        ("RULE:[1:$1](\\p{Lower}+)", "Java-only syntax"),
        ("RULE:[1:$1", "invalid auth_to_local rule 'RULE:\\[1:\\$1'"),
    ],
)
def test_parse_errors_name_the_rule(rules: str, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        AuthToLocal(rules, "R")
