"""Ranger's Hive policies as a source of grants: the evaluation, case by case (denials, exceptions, priorities,
deny-all-else, ``{USER}``, ``{OWNER}``, ``public``, excludes, patterns, case), what is not read (disabled and
non-access policies, other services), and documents waggle refuses, with messages that name the problem."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from waggle.config.kinds import Privilege
from waggle.grants.ranger import ACCESS_PRIVILEGES, RangerPolicyError, RangerSource
from waggle.grants.verdict import NO_MATCH, Caller, Verdict

S, U, C, D, A, ADM = (Privilege.SELECT, Privilege.UPDATE, Privilege.CREATE, Privilege.DROP, Privilege.ALTER,
                      Privilege.ADMIN)
EXPORT = Path(__file__).parent / "data" / "ranger_hive_export.json"


def who(user: str | None, *groups: str) -> Caller:
    return Caller(user, frozenset(groups))


def item(*types: str, users: tuple[str, ...] = (), groups: tuple[str, ...] = (), **more: Any) -> dict[str, Any]:
    return {"accesses": [{"type": t, "isAllowed": True} for t in types], "users": list(users),
            "groups": list(groups), "roles": [], "conditions": [], "delegateAdmin": False, **more}


def policy(pid: int, db: list[str] | None = None, table: list[str] | None = None, **fields: Any) -> dict[str, Any]:
    resources: dict[str, Any] = fields.pop("resources", {})
    if db is not None:
        resources["database"] = {"values": db, "isExcludes": fields.pop("db_excludes", False)}
    if table is not None:
        resources["table"] = {"values": table, "isExcludes": fields.pop("table_excludes", False)}
    return {"id": pid, "name": f"p{pid}", "isEnabled": True, "service": "hive", "policyType": 0,
            "policyPriority": 0, "resources": resources, **fields}


def source(*policies: dict[str, Any]) -> RangerSource:
    """A source of the plugin download's form."""
    doc = {"serviceName": "hive", "serviceId": 3, "policyVersion": 7, "policyUpdateTime": 1732790400000,
           "policies": list(policies), "serviceDef": {"name": "hive"}, "auditMode": "audit-default"}
    return RangerSource.from_document(doc, "hive", "test")


def allowed(src: RangerSource, caller: Caller, db: str, table: str | None, privilege: Privilege,
            owner: str | None = None) -> bool | None:
    return src.decide(caller, db, table, privilege, owner).allowed


# --- evaluation within a policy


def test_allow_items_grant_their_access_types_only() -> None:
    src = source(policy(1, ["sales"], ["*"], policyItems=[item("select", users=("ann",))]))
    assert src.decide(who("ann"), "sales", "orders", S) == Verdict(True, "ranger policy 1 'p1' (service hive)")
    assert allowed(src, who("ann"), "sales", "orders", U) is None
    assert allowed(src, who("bob"), "sales", "orders", S) is None
    assert src.decide(who("ann"), "hr", "people", S) == NO_MATCH


def test_a_deny_item_beats_an_allow_item_and_a_deny_exception_cancels_it() -> None:
    src = source(policy(1, ["sales"], ["*"], policyItems=[item("select", groups=("analysts",))],
                        denyPolicyItems=[item("select", groups=("contractors",))],
                        denyExceptions=[item("select", users=("dora",))]))
    assert allowed(src, who("ann", "analysts"), "sales", "t", S) is True
    assert allowed(src, who("carl", "analysts", "contractors"), "sales", "t", S) is False
    assert allowed(src, who("dora", "analysts", "contractors"), "sales", "t", S) is True
    assert allowed(src, who("eve", "contractors"), "sales", "t", S) is False


def test_an_allow_exception_cancels_an_allow_item() -> None:
    src = source(policy(1, ["sales"], ["*"], policyItems=[item("select", groups=("analysts",))],
                        allowExceptions=[item("select", users=("carol",))]))
    assert allowed(src, who("ann", "analysts"), "sales", "t", S) is True
    assert allowed(src, who("carol", "analysts"), "sales", "t", S) is None  # nothing said: the default applies


def test_deny_all_else_denies_whom_the_policy_does_not_allow() -> None:
    src = source(policy(1, ["finance"], ["*"], policyItems=[item("select", groups=("finance",))],
                        allowExceptions=[item("select", users=("fred",))], isDenyAllElse=True))
    assert allowed(src, who("fay", "finance"), "finance", "t", S) is True
    assert allowed(src, who("fay", "finance"), "finance", "t", U) is False
    assert allowed(src, who("fred", "finance"), "finance", "t", S) is False
    assert allowed(src, who("hive"), "finance", "t", S) is False
    assert allowed(src, who("hive"), "hr", "t", S) is None


def test_items_that_are_not_allowed_and_unknown_types_grant_nothing() -> None:
    src = source(policy(1, ["db"], ["*"], policyItems=[
        {"accesses": [{"type": "select", "isAllowed": False}, {"type": "teleport", "isAllowed": True}],
         "users": ["ann"]}]))
    assert all(allowed(src, who("ann"), "db", "t", p) is None for p in Privilege)


# --- across policies


def test_a_deny_beats_an_allow_of_equal_priority_whatever_their_order() -> None:
    allow = policy(1, ["sales"], ["*"], policyItems=[item("select", users=("ann",))])
    deny = policy(2, ["sales"], ["orders"], denyPolicyItems=[item("select", users=("ann",))])
    for src in (source(allow, deny), source(deny, allow)):
        assert src.decide(who("ann"), "sales", "orders", S) == Verdict(False, "ranger policy 2 'p2' (service hive)")
        assert allowed(src, who("ann"), "sales", "other", S) is True


def test_an_override_policy_beats_normal_ones_both_ways() -> None:
    normal_deny = policy(1, ["sales"], ["*"], denyPolicyItems=[item("all", groups=("interns",))])
    override_allow = policy(2, ["sales"], ["orders"], policyPriority=1,
                            policyItems=[item("select", users=("ian",))])
    src = source(normal_deny, override_allow)
    assert src.decide(who("ian", "interns"), "sales", "orders", S).rule == "ranger policy 2 'p2' (service hive)"
    assert allowed(src, who("ian", "interns"), "sales", "orders", S) is True
    assert allowed(src, who("ian", "interns"), "sales", "orders", U) is False
    assert allowed(src, who("ivy", "interns"), "sales", "orders", S) is False
    override_deny = policy(3, ["sales"], ["*"], policyPriority=1, denyPolicyItems=[item("select", users=("ann",))])
    normal_allow = policy(4, ["*"], ["*"], policyItems=[item("all", users=("ann",))])
    assert allowed(source(normal_allow, override_deny), who("ann"), "sales", "t", S) is False
    assert allowed(source(normal_allow, override_deny), who("ann"), "sales", "t", U) is True


def test_the_first_of_equal_policies_names_the_verdict() -> None:
    src = source(policy(5, ["*"], ["*"], policyItems=[item("select", users=("ann",))]),
                 policy(3, ["sales"], ["*"], policyItems=[item("select", users=("ann",))]))
    assert src.decide(who("ann"), "sales", "t", S).rule == "ranger policy 5 'p5' (service hive)"


# --- who an item names


def test_user_token_matches_every_named_caller_and_public_every_caller() -> None:
    src = source(policy(1, ["staging"], ["*"], policyItems=[item("select", users=("{USER}",))]),
                 policy(2, ["ref"], ["*"], policyItems=[item("select", groups=("public",))]))
    assert allowed(src, who("anyone"), "staging", "t", S) is True
    assert allowed(src, who(None), "staging", "t", S) is None
    assert allowed(src, who("anyone"), "ref", "t", S) is True
    assert allowed(src, who(None), "ref", "t", S) is True


def test_owner_token_matches_the_owner_when_the_request_names_one() -> None:
    src = source(policy(1, ["sandbox"], ["*"], policyItems=[item("all", users=("{OWNER}",))]))
    assert allowed(src, who("ann"), "sandbox", "t", D, owner="ann") is True
    assert allowed(src, who("ann"), "sandbox", "t", D, owner="bob") is None
    assert allowed(src, who("ann"), "sandbox", "t", D) is None


def test_roles_match_nobody_and_user_names_are_compared_as_they_are() -> None:
    src = source(policy(1, ["db"], ["*"], policyItems=[item("select", roles=["readers"]),
                                                       item("update", users=("Ann",))]))
    assert allowed(src, who("readers", "readers"), "db", "t", S) is None
    assert allowed(src, who("Ann"), "db", "t", U) is True
    assert allowed(src, who("ann"), "db", "t", U) is None


def test_conditional_items_fail_closed() -> None:
    conditions = [{"type": "ip-range", "values": ["10.0.0.0/8"]}]
    src = source(policy(1, ["db"], ["*"], policyItems=[item("select", "drop", users=("ann",), conditions=conditions),
                                                       item("update", users=("ann",))],
                        denyPolicyItems=[item("alter", users=("ann",), conditions=conditions)]),
                 policy(2, ["db"], ["*"], policyItems=[item("alter", users=("ann",))]))
    assert allowed(src, who("ann"), "db", "t", S) is None
    assert allowed(src, who("ann"), "db", "t", U) is True
    assert allowed(src, who("ann"), "db", "t", A) is False
    guarded = source(policy(3, ["db"], ["*"], conditions=conditions, policyItems=[item("select", users=("ann",))]))
    assert allowed(guarded, who("ann"), "db", "t", S) is None


# --- resources


def test_patterns_excludes_and_case() -> None:
    src = source(policy(1, ["Sales_*", "hr"], ["Orders_20??"], policyItems=[item("select", users=("ann",))]),
                 policy(2, ["tmp", "scratch"], ["*"], db_excludes=True, policyItems=[item("update", users=("ann",))]),
                 policy(3, ["web"], ["secret*"], table_excludes=True, policyItems=[item("alter", users=("ann",))]))
    assert allowed(src, who("ann"), "sales_eu", "orders_2024", S) is True
    assert allowed(src, who("ann"), "SALES_EU", "ORDERS_2024", S) is True
    assert allowed(src, who("ann"), "hr", "orders_2025", S) is True
    assert allowed(src, who("ann"), "sales_eu", "orders_202", S) is None
    assert allowed(src, who("ann"), "hrx", "orders_2024", S) is None
    assert allowed(src, who("ann"), "anything", "t", U) is True
    assert allowed(src, who("ann"), "tmp", "t", U) is None
    assert allowed(src, who("ann"), "web", "clicks", A) is True
    assert allowed(src, who("ann"), "web", "secret_keys", A) is None


def test_a_policy_without_table_covers_every_table_and_the_database() -> None:
    src = source(policy(1, ["db"], policyItems=[item("create", users=("ann",))]))
    assert allowed(src, who("ann"), "db", "t", C) is True
    assert allowed(src, who("ann"), "db", None, C) is True


def test_database_requests_need_policies_on_every_table_or_every_udf() -> None:
    src = source(policy(1, ["db"], ["t*"], policyItems=[item("drop", users=("ann",))]),
                 policy(2, ["db"], ["*"], policyItems=[item("create", users=("ann",))]),
                 policy(3, ["db"], resources={"udf": {"values": ["*"]}}, policyItems=[item("alter", users=("ann",))]),
                 policy(4, ["db"], resources={"udf": {"values": ["f1"]}}, policyItems=[item("update", users=("ann",))]))
    assert allowed(src, who("ann"), "db", None, D) is None
    assert allowed(src, who("ann"), "db", "tx", D) is True
    assert allowed(src, who("ann"), "db", None, C) is True
    assert allowed(src, who("ann"), "db", None, A) is True
    assert allowed(src, who("ann"), "db", "t", A) is None  # udf policies are not about tables
    assert allowed(src, who("ann"), "db", None, U) is None


def test_column_policies_show_tables_but_grant_and_hide_nothing() -> None:
    cols = {"column": {"values": ["user_agent", "url"], "isExcludes": False}}
    src = source(policy(1, ["web"], ["clicks"], resources=dict(cols), policyItems=[item("select", users=("ann",))]),
                 policy(2, ["web"], ["clicks"], resources=dict(cols), denyPolicyItems=[item("select", users=("bob",))]),
                 policy(3, ["web"], ["*"], policyItems=[item("select", users=("bob",))]))
    assert allowed(src, who("ann"), "web", "clicks", S) is None
    assert src.sees(who("ann"), "web", "clicks") == Verdict(True, "ranger policy 1 'p1' (service hive)")
    assert src.sees(who("ann"), "web", None).allowed is True
    assert src.sees(who("ann"), "web", "other") == NO_MATCH
    assert allowed(src, who("bob"), "web", "clicks", S) is True
    assert src.sees(who("bob"), "web", "clicks").allowed is True


def test_other_resources_disabled_and_non_access_policies_and_zones_are_not_read() -> None:
    everything = [item("all", groups=("public",))]
    src = source(policy(1, ["*"], ["*"], isEnabled=False, policyItems=everything),
                 policy(2, ["*"], ["*"], policyType=1, policyItems=everything),
                 policy(3, ["*"], ["*"], policyType=2, policyItems=everything),
                 policy(4, resources={"url": {"values": ["*"], "isRecursive": True}}, policyItems=everything),
                 policy(5, ["*"], ["*"], zoneName="finance-zone", policyItems=everything),
                 policy(6, resources={"hiveservice": {"values": ["*"]}}, policyItems=everything))
    assert len(src) == 0
    assert src.decide(who("ann"), "db", "t", S) == NO_MATCH


def test_additional_resources_are_more_of_the_same_policy() -> None:
    src = source(policy(1, ["a"], ["t"], additionalResources=[{"database": {"values": ["b"]},
                                                                "table": {"values": ["u"]}}],
                        policyItems=[item("select", users=("ann",))]))
    assert allowed(src, who("ann"), "a", "t", S) is True
    assert allowed(src, who("ann"), "b", "u", S) is True
    assert allowed(src, who("ann"), "a", "u", S) is None


# --- visibility


def test_sees_is_any_access_allowed() -> None:
    src = source(policy(1, ["db"], ["t"], policyItems=[item("alter", users=("ann",))],
                        denyPolicyItems=[item("select", users=("ann",), groups=("guests",))]),
                 policy(2, ["db"], ["*"], denyPolicyItems=[item("all", users=("bob",))]),
                 policy(3, ["db"], ["*"], policyItems=[item("all", users=("bob",))]))
    assert src.sees(who("ann"), "db", "t") == Verdict(True, "ranger policy 1 'p1' (service hive)")
    assert src.sees(who("gus", "guests"), "db", "t") == Verdict(False, "ranger policy 1 'p1' (service hive)")
    assert src.sees(who("gus", "guests"), "db", None) == NO_MATCH  # a denial on one table does not hide the db
    assert src.sees(who("bob"), "db", "t") == Verdict(False, "ranger policy 2 'p2' (service hive)")
    assert src.sees(who("bob"), "db", None).allowed is False
    assert src.sees(who("ann"), "db", None) == Verdict(True, "ranger policy 1 'p1' (service hive)")
    assert src.sees(who("ann"), "other", None) == NO_MATCH


# --- the export file


def export() -> RangerSource:
    return RangerSource.from_document(json.loads(EXPORT.read_text()), "hive", str(EXPORT))


@pytest.mark.parametrize(("caller", "db", "table", "privilege", "expected"), [
    (who("hive"), "sales", "orders", D, True),  # 'all - database, table, column'
    (who("hive"), "finance", "ledger", S, False),  # the override with deny-all-else
    (who("fay", "finance"), "finance", "ledger", U, True),
    (who("fay", "finance"), "finance", "ledger", D, False),
    (who("ann", "analysts"), "sales", "orders", S, True),
    (who("ann", "analysts"), "sales", "customers_pii", S, False),
    (who("dora", "analysts"), "sales", "customers_pii", S, True),
    (who("carol", "analysts"), "sales", "orders", S, None),
    (who("mallory", "analysts"), "sales", "orders", S, False),
    (who("bob"), "sales", "orders", U, True),
    (who("bob"), "sales", "orders", D, None),  # conditional item: not granted
    (who("ian", "interns", "analysts"), "sales", "orders", A, False),
    (who("ian", "interns", "analysts"), "sales", "orders", S, True),
    (who("zed"), "staging_eu", "t", S, True),
    (who("zed"), "staging_eu", "t", U, None),
    (who("zed"), "ref", "countries", S, True),
    (who("zed"), "default", None, C, True),
    (who("zed"), "web", "clicks", S, None),
    (who("eli", "etl"), "events", "EVENTS_1", U, True),
    (who("eli", "etl"), "tmp", "events_1", U, None),
    (who("eli", "etl"), "events", "events_12", U, None),
    (who("erin"), "events", "events_1", A, True),  # index
    (who("erin"), "events", "events_1", U, None),  # lock grants nothing
    (who("olga"), "ops", "jobs", ADM, True),
    (who("hive"), "ops", None, ADM, True),
    (who("admin"), "anything", None, C, True),  # 'all - database, udf'
])
def test_the_export_file(caller: Caller, db: str, table: str | None, privilege: Privilege,
                         expected: bool | None) -> None:
    assert allowed(export(), caller, db, table, privilege) is expected


def test_the_export_file_reads_only_the_services_access_policies() -> None:
    src = export()
    assert src.version is None
    assert src.where == str(EXPORT)
    assert {p.rule.split("'")[1] for p in src.policies} >= {"sales readers", "finance lockdown"}
    assert not any("disabled" in p.rule or "mask" in p.rule or "url" in p.rule or "hdfs" in p.rule
                   for p in src.policies)
    assert src.sees(who("max", "marketing"), "web", "clicks").allowed is True
    assert src.sees(who("max", "marketing"), "web", None).allowed is True
    assert src.sees(who("max", "marketing"), "sales", None) == NO_MATCH
    with pytest.raises(RangerPolicyError, match=r"no policy of service 'hivedev' \(services: hadoopdev, hive\)"):
        RangerSource.from_document(json.loads(EXPORT.read_text()), "hivedev", "export.json")


def test_access_types_map_to_privileges() -> None:
    assert ACCESS_PRIVILEGES["all"] == frozenset(Privilege)
    assert ACCESS_PRIVILEGES["read"] == {S} and ACCESS_PRIVILEGES["write"] == {U}
    assert ACCESS_PRIVILEGES["index"] == {A} and ACCESS_PRIVILEGES["lock"] == frozenset()
    assert ACCESS_PRIVILEGES["repladmin"] == ACCESS_PRIVILEGES["serviceadmin"] == ACCESS_PRIVILEGES["refresh"] == {ADM}


# --- documents waggle refuses


@pytest.mark.parametrize(("doc", "message"), [
    ([], "not a Ranger policy document"),
    ({"serviceName": "hive"}, "'policies' is missing or not a list"),
    ({"serviceName": "hbase", "policies": []}, "the policies of service 'hbase', not 'hive'"),
    ({"serviceName": "hive", "policyVersion": "7", "policies": []}, "policyVersion: not a number"),
    ({"serviceName": "hive", "policies": ["x"]}, r"policies\[0\]: not a JSON object"),
    ({"serviceName": "hive", "policies": [{"name": "x"}]}, r"policies\[0\]: id: missing or not a number"),
    ({"serviceName": "hive", "policies": [policy(9, ["db"], isEnabled="yes")]},
     r"test: policy 9 'p9': isEnabled: not a boolean"),
    ({"serviceName": "hive", "policies": [policy(9, policyItems=[])]}, r"policy 9 'p9': resources: no 'database'"),
    ({"serviceName": "hive", "policies": [policy(9, ["db"], resources={"path": {"values": ["/"]}})]},
     "resources: path: not a resource of Ranger's Hive service"),
    ({"serviceName": "hive", "policies": [policy(9, [3])]}, r"resources.database.values: not a list of strings"),
    ({"serviceName": "hive", "policies": [policy(9, ["db"], policyItems=[{"accesses": [{"isAllowed": True}]}])]},
     r"policy 9 'p9': policyItems\[0\].accesses\[0\]: not an access with a 'type'"),
    ({"serviceName": "hive", "policies": [policy(9, ["db"], denyPolicyItems=[{**item("select"), "users": "ann"}])]},
     r"denyPolicyItems\[0\].users: not a list"),
    ({"serviceName": "hive", "policies": [policy(9, ["db"], policyPriority=True)]}, "policyPriority: not a number"),
])
def test_malformed_documents_are_refused_naming_the_problem(doc: Any, message: str) -> None:
    with pytest.raises(RangerPolicyError, match=message):
        RangerSource.from_document(doc, "hive", "test")
    assert issubclass(RangerPolicyError, ValueError)


# --- speed


def test_a_thousand_policies_answer_a_repeated_decision_in_microseconds() -> None:
    policies = [policy(i, [f"db{i}", f"app{i}_*"], ["t*"], policyItems=[item("select", groups=(f"g{i}",))],
                       denyPolicyItems=[item("update", users=(f"u{i}",))]) for i in range(1000)]
    src = source(*policies)
    caller = who("ann", "g500", "g7")
    assert allowed(src, caller, "db500", "t1", S) is True
    assert allowed(src, caller, "app7_x", "t1", S) is True
    start = time.perf_counter()
    for _ in range(10000):
        src.decide(caller, "db500", "t1", S)
    each = (time.perf_counter() - start) / 10000
    assert each < 20e-6, f"{each * 1e6:.1f} µs a decision"
    start = time.perf_counter()
    for n in range(200):
        src.decide(caller, f"db{n}", "t1", S)  # first decisions: the patterned policies are matched once per db
    assert (time.perf_counter() - start) / 200 < 5e-3
