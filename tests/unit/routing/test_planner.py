"""The per-call planner: one member per call, refusals before anything is sent, names both ways. No sockets."""

from __future__ import annotations

import pytest

from tests.support.federation import loaded_federation
from waggle.config.model import DatabaseResolution
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore import ttypes
from waggle.hms.methods import METHODS
from waggle.hms.rewrite import CALL_NAMES
from waggle.routing.databases import ManualMap, PrefixedMap
from waggle.routing.federation import Planner, Refused

FEDERATION = """
primary-meta-store:
  name: primary
  remote-meta-store-uris: thrift://h:1
  access-control-type: READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST
  writable-database-white-list: [etl_.*]
federated-meta-stores:
- name: fed
  remote-meta-store-uris: thrift://h:2
  mapped-databases: [web, sales]
  database-name-mapping: {sales: revenue}
  mapped-tables:
  - database: web
    mapped-tables: [visits]
- name: rw
  remote-meta-store-uris: thrift://h:3
  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST
  writable-database-white-list: [scratch]
"""


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    return loaded_federation(tmp_path_factory, FEDERATION)


@pytest.fixture(scope="module")
def prefixed(federation):
    return Planner(federation, DatabaseResolution.PREFIXED, PrefixedMap(federation))


def decide(planner, method, args, **kw):
    return planner.decide(METHODS[method], CALL_NAMES.names_in(args), **kw)


def test_routes_by_the_names_in_arguments_and_structs(prefixed):
    d = decide(prefixed, "get_table", T.get_table_args(dbname="fed_web", tbl_name="visits"))
    assert (d.member.name, d.refusal, d.rewrite_request) == ("fed", None, True)
    assert d.requested == {"web": "fed_web"}
    request = ttypes.GetTableRequest(dbName="@hive#rw_x", tblName="t")
    d = decide(prefixed, "get_table_req", T.get_table_req_args(request))
    assert d.member.name == "rw"
    d = decide(prefixed, "get_table", T.get_table_args(dbname="etl_x", tbl_name="t"))
    assert (d.member.name, d.rewrite_request) == ("primary", False)  # the primary's names travel as they are


def test_names_translate_both_ways_keeping_the_clients_spelling(prefixed, federation):
    naming = prefixed.naming(federation.member("fed"))
    assert naming.to_member("FED_Revenue") == "sales" and naming.to_member("@hive#fed_web") == "@hive#web"
    assert naming.to_member("rw_scratch") == "rw_scratch"  # not this member's: untouched
    assert naming.to_client("sales") == "fed_sales"
    assert naming.to_client("sales", {"sales": "fed_revenue"}) == "fed_revenue"
    args = T.get_table_args(dbname="fed_revenue", tbl_name="t")
    CALL_NAMES.rewrite(args, naming.to_member)
    assert args.dbname == "sales"
    table = ttypes.Table(dbName="sales", tableName="v", viewExpandedText="SELECT `t`.`a` FROM `sales`.`t`")
    CALL_NAMES.rewrite(table, naming.to_client)
    assert (table.dbName, table.viewExpandedText) == ("fed_sales", "SELECT `t`.`a` FROM `fed_sales`.`t`")


def test_unknown_and_hidden_databases_are_refused_as_missing(prefixed):
    for name in ("fed_secret", "FED_SECRET", "@hive#fed_secret"):
        d = decide(prefixed, "get_database", T.get_database_args(name=name))
        assert d.refused_as is Refused.NO_SUCH_OBJECT and "does not exist" in (d.refusal or ""), name


def test_a_call_never_spans_two_metastores(prefixed):
    new = ttypes.Table(dbName="rw_scratch", tableName="t")
    d = decide(prefixed, "alter_table", T.alter_table_args(dbname="etl_x", tbl_name="t", new_tbl=new))
    assert d.refusal is not None and "two metastores" in d.refusal and "rw_scratch" in d.refusal


def test_writes_follow_access_control(prefixed):
    d = decide(prefixed, "drop_table", T.drop_table_args(dbname="fed_web", name="visits"))
    assert d.refused_as is Refused.META and "read-only" in (d.refusal or "") and "fed_web" in (d.refusal or "")
    assert decide(prefixed, "drop_table", T.drop_table_args(dbname="rw_scratch", name="t")).refusal is None
    assert "white-list" in (decide(prefixed, "drop_table", T.drop_table_args(dbname="rw_x", name="t")).refusal or "")
    assert decide(prefixed, "drop_table", T.drop_table_args(dbname="etl_1", name="t")).refusal is None
    created = {"primary": {"mine"}}
    assert decide(prefixed, "drop_table", T.drop_table_args(dbname="mine", name="t"), created=created).refusal is None


def test_create_database_is_primary_only_and_extends_the_whitelist(prefixed):
    d = decide(prefixed, "create_database", T.create_database_args(ttypes.Database(name="fed_new")))
    assert "only be created in the primary" in (d.refusal or "")
    d = decide(prefixed, "create_database", T.create_database_args(ttypes.Database(name="mine")))
    assert (d.member.name, d.refusal, d.creates) == ("primary", None, "mine")


def test_locks_read_components_read_write_components_write(prefixed):
    def lock(*components):
        rqst = ttypes.LockRequest(component=[ttypes.LockComponent(type=t, dbname=db) for t, db in components])
        args = T.lock_args(rqst)
        return decide(prefixed, "lock", args, locks=[(c.dbname, c.type) for c in rqst.component])

    assert lock((ttypes.LockType.SHARED_READ, "fed_web")).refusal is None
    assert "type EXCLUSIVE" in (lock((ttypes.LockType.EXCLUSIVE, "fed_web")).refusal or "")
    assert "type SHARED_WRITE" in (lock((ttypes.LockType.SHARED_WRITE, "fed_web")).refusal or "")
    assert "two metastores" in (lock((ttypes.LockType.SHARED_READ, "fed_web"),
                                     (ttypes.LockType.SHARED_READ, "etl_x")).refusal or "")


def test_mapped_tables_hide_tables(prefixed):
    args = T.get_table_args(dbname="fed_web", tbl_name="internal")
    d = decide(prefixed, "get_table", args, tables=[("fed_web", "internal")])
    assert d.refused_as is Refused.NO_SUCH_OBJECT
    assert decide(prefixed, "get_table", args, tables=[("fed_web", "visits")]).refusal is None


def test_manual_unknown_names_go_to_the_primary(federation):
    planner = Planner(federation, DatabaseResolution.MANUAL,
                      ManualMap.build(federation, {"primary": ["default"], "fed": ["web", "secret"], "rw": ["x"]}))
    assert decide(planner, "get_database", T.get_database_args(name="web")).member.name == "fed"
    assert decide(planner, "get_database", T.get_database_args(name="x")).member.name == "rw"
    assert decide(planner, "get_database", T.get_database_args(name="brand_new")).member.name == "primary"
    # fed's hidden "secret" is not fed's: the primary answers (and has no such database)
    assert decide(planner, "get_database", T.get_database_args(name="secret")).member.name == "primary"
