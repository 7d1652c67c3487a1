"""What a call asks of the grants, found from the method table alone, and what they answer."""

from __future__ import annotations

from waggle.config.grants_model import GrantRule
from waggle.config.kinds import Effect, Privilege
from waggle.grants import gate
from waggle.grants.policy import Policy
from waggle.grants.rules import RuleSource
from waggle.grants.verdict import Caller
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore.ttypes import (
    Database,
    GetTableRequest,
    LockComponent,
    LockRequest,
    LockType,
    Partition,
    Role,
    Table,
)
from waggle.hms.methods import METHODS

S, U, C, D, A = Privilege.SELECT, Privilege.UPDATE, Privilege.CREATE, Privilege.DROP, Privilege.ALTER
OBJ = gate.Object


def objects(method: str, args: object) -> list[gate.Object]:
    return gate.objects(METHODS[method], args)


def test_every_method_has_a_privilege_derived_from_the_table() -> None:
    assert all(spec.privilege is not None for spec in METHODS.values())
    named = {n: METHODS[n].privilege for n in ("get_table", "create_table", "drop_table", "alter_table",
                                               "add_partitions", "drop_partition", "create_database",
                                               "grant_role", "create_table_with_constraints", "add_primary_key")}
    assert named == {"get_table": S, "create_table": C, "drop_table": D, "alter_table": A, "add_partitions": U,
                     "drop_partition": U, "create_database": C, "grant_role": Privilege.ADMIN,
                     "create_table_with_constraints": C, "add_primary_key": A}


def test_the_objects_a_call_names() -> None:
    assert objects("get_table", T.get_table_args(dbname="Sales", tbl_name="o")) == [OBJ("Sales", "o", S)]
    assert objects("get_table_req", T.get_table_req_args(req=GetTableRequest(dbName="@hive#s", tblName="t"))) == \
        [OBJ("s", "t", S)]
    assert objects("create_table", T.create_table_args(tbl=Table(dbName="s", tableName="t"))) == [OBJ("s", "t", C)]
    assert objects("create_database", T.create_database_args(database=Database(name="s"))) == [OBJ("s", None, C)]
    assert objects("drop_database", T.drop_database_args(name="s")) == [OBJ("s", None, D)]
    assert objects("alter_table", T.alter_table_args(dbname="s", tbl_name="t", new_tbl=Table(dbName="s",
                                                                                               tableName="u"))) == \
        [OBJ("s", "t", A), OBJ("s", "u", A)]
    parts = [Partition(dbName="s", tableName="t", values=[str(i)]) for i in range(3)]
    assert objects("add_partitions", T.add_partitions_args(new_parts=parts)) == [OBJ("s", "t", U)]
    lock = LockRequest(component=[LockComponent(type=LockType.EXCLUSIVE, dbname="s", tablename="t"),
                                  LockComponent(type=LockType.SHARED_READ, dbname="r", tablename="x")])
    assert objects("lock", T.lock_args(rqst=lock)) == [OBJ("s", "t", U), OBJ("r", "x", S)]
    assert objects("create_role", T.create_role_args(role=Role(roleName="r"))) == [OBJ("*", None, Privilege.ADMIN)]
    assert objects("open_txns", T.open_txns_args()) == []
    assert objects("get_databases", T.get_databases_args(pattern="a*")) == []


def test_reads_need_visibility_writes_their_privilege() -> None:
    policy = Policy([RuleSource([GrantRule("r", users=("alice",), databases=("s",), privileges=frozenset({S}))])])
    alice = Caller("alice")
    assert gate.check(policy, alice, METHODS["get_table"], T.get_table_args(dbname="s", tbl_name="t")) is None
    hidden = gate.check(policy, Caller("bob"), METHODS["get_table"], T.get_table_args(dbname="s", tbl_name="t"))
    assert isinstance(hidden, gate.Refused) and hidden.hidden and hidden.message == "s.t table not found"
    refused = gate.check(policy, alice, METHODS["drop_table"], T.drop_table_args(dbname="s", name="t"))
    assert isinstance(refused, gate.Refused) and not refused.hidden
    assert refused.message == ("drop_table refused: user 'alice' (groups: none) has no drop privilege on table "
                               "'s.t' (authorization.default (deny))")
    assert gate.check(policy, Caller("bob"), METHODS["get_all_databases"], T.get_all_databases_args()) is None


def test_an_allowed_write_names_its_rule() -> None:
    policy = Policy([RuleSource([GrantRule("w", users=("*",), privileges=frozenset({D}))])], Effect.DENY)
    allowed = gate.check(policy, Caller("x"), METHODS["drop_table"], T.drop_table_args(dbname="s", name="t"))
    assert allowed == gate.Allowed("w", OBJ("s", "t", D))


def test_rangers_owner_is_the_owner_the_call_gives_its_object() -> None:
    from waggle.grants.ranger import RangerSource

    doc = {"serviceName": "hive", "policyVersion": 1, "policies": [{
        "id": 1, "name": "owners", "isEnabled": True, "service": "hive", "policyType": 0,
        "resources": {"database": {"values": ["s"]}, "table": {"values": ["*"]}},
        "policyItems": [{"accesses": [{"type": "all", "isAllowed": True}], "users": ["{OWNER}"]}]}]}
    policy = Policy([RangerSource.from_document(doc, "hive")])
    create = METHODS["create_table"]
    mine = T.create_table_args(tbl=Table(dbName="s", tableName="t", owner="alice"))
    theirs = T.create_table_args(tbl=Table(dbName="s", tableName="t", owner="bob"))
    assert gate.owner_of(mine) == "alice" and gate.owner_of(T.drop_table_args(dbname="s", name="t")) is None
    assert isinstance(gate.check(policy, Caller("alice"), create, mine), gate.Allowed)
    assert isinstance(gate.check(policy, Caller("alice"), create, theirs), gate.Refused)
    assert gate.owner_of(T.create_database_args(database=Database(name="s", ownerName="carol"))) == "carol"
