"""The grants of a running process: the caller, Ranger's policies not read, a reload, the audit; and what
``waggle check`` finds in the grants' files."""

from __future__ import annotations

import json
from pathlib import Path

from structlog.testing import capture_logs

from waggle.config.grants_model import Authorization, GrantRule, GroupsConfig, RangerConfig
from waggle.config.kinds import Effect, GroupSource, Privilege
from waggle.grants import check
from waggle.grants.service import Grants
from waggle.grants.verdict import Caller
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.methods import METHODS

READ_S = GrantRule("read s", users=("*",), databases=("s",), privileges=frozenset({Privilege.SELECT}))


def grants(tmp_path: Path, **settings: object) -> Grants:
    groups = tmp_path / "groups"
    groups.write_text("analysts: alice\n")
    config = Authorization(rules=(READ_S,), groups=GroupsConfig(GroupSource.FILE, str(groups)), **settings)
    return Grants(config)


def test_the_caller_is_the_proven_user_else_a_trusted_set_ugi_user(tmp_path: Path) -> None:
    g = grants(tmp_path)
    assert g.caller("alice", "mallory") == Caller("alice", frozenset({"analysts"}))
    assert g.caller(None, "alice") == Caller(None)
    trusting = grants(tmp_path, trust_set_ugi=True)
    assert trusting.caller(None, "alice") == Caller("alice", frozenset({"analysts"}))


def test_ranger_policies_not_read_deny_everything_saying_so(tmp_path: Path) -> None:
    with capture_logs() as logs:
        g = grants(tmp_path, default=Effect.ALLOW, ranger=RangerConfig(policy_file=str(tmp_path / "none.json")))
    assert any(e["event"] == "ranger.unavailable" for e in logs)
    verdict = g.policy.decide(Caller("a"), "s", "t", Privilege.SELECT)
    assert not verdict.allowed and "not loaded" in verdict.rule
    (tmp_path / "none.json").write_text(json.dumps({"serviceName": "hive", "policyVersion": 1, "policies": []}))
    assert g.ranger is not None and g.ranger.refresh()
    assert g.policy.decide(Caller("a"), "s", "t", Privilege.SELECT).allowed  # the rule, now Ranger says nothing


def test_a_reload_brings_new_rules_and_refusals_are_audited(tmp_path: Path) -> None:
    g = grants(tmp_path)
    drop = T.drop_table_args(dbname="s", name="t")
    with capture_logs() as logs:
        refused = g.admit(Caller("a"), METHODS["drop_table"], drop)
    assert refused is not None and refused.rule == "authorization.default (deny)"
    (line,) = [e for e in logs if e["event"] == "access.refused"]
    assert (line["user"], line["method"], line["object"], line["privilege"]) == ("a", "drop_table", "s.t", "drop")
    rules = (READ_S, GrantRule("drops", users=("a",), databases=("s",), privileges=frozenset({Privilege.DROP})))
    g.reload(Authorization(rules=rules, groups=g.config.groups, audit_writes=True))
    with capture_logs() as logs:
        assert g.admit(Caller("a"), METHODS["drop_table"], drop) is None
    assert [e["rule"] for e in logs if e["event"] == "access.allowed"] == ["drops"]


def test_waggle_check_reads_the_files_the_grants_name(tmp_path: Path) -> None:
    bad = tmp_path / "ranger.json"
    bad.write_text("{not json")
    config = Authorization(groups=GroupsConfig(GroupSource.FILE, str(tmp_path / "missing")),
                           ranger=RangerConfig(policy_file=str(bad)))
    found = check.file_problems(config, "server.yml")
    assert any("authorization.groups.file" in p and "cannot read it" in p for p in found)
    assert any("authorization.ranger.policy-file" in p for p in found)
    rules = Authorization(rules=(READ_S, GrantRule("r", users=("*",), databases=("sales", "x_*"),
                                                   privileges=frozenset({Privilege.SELECT}))))
    assert check.unmatched(rules, ["s", "x_1"]) == ["r: database pattern 'sales' matches no database of the "
                                                     "federation now"]


def test_filtered_listings_are_remembered_under_one_policy_only(tmp_path: Path) -> None:
    g = grants(tmp_path)
    key = (Caller("a"), "get_all_tables", "s", b"body")
    assert g.remembered(key) is None
    assert g.remember(key, b"kept", 2) == b"kept"
    assert g.remembered(key) == (b"kept", 2)
    g.reload(Authorization(rules=(), groups=g.config.groups))
    assert g.remembered(key) is None  # new grants: filtered afresh
    assert g.remember(key, b"x" * (64 << 20), 0) and g.remembered(key) is None  # too big to keep
