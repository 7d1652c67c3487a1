"""The method table checks itself against the generated IDL: complete, consistent, and nothing db-ish missed."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from thrift.Thrift import TType

from waggle.hms.gen.fb303 import FacebookService
from waggle.hms.gen.fb303 import ttypes as fb303_ttypes
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore, ttypes
from waggle.hms.methods import (
    METHODS,
    NOT_DB_FIELDS,
    STRUCT_DB_FIELDS,
    Access,
    DbField,
    NameForm,
    Route,
    database_of,
)

SERVICES: tuple[ModuleType, ...] = (FacebookService, ThriftHiveMetastore)

# Generous on purpose: anything that might carry a database (or a catalog, which is easy to confuse with one).
DB_ISH_FIELD = re.compile(
    r"db|database|schema|catalog|^cat(_|name|$)|_cat|cat_|fulltablename|tablesused|objectname|repl.*polic|^name$",
    re.IGNORECASE,
)
# Method arguments: also bare patterns (get_databases(pattern) is one, get_tables(pattern) is not).
DB_ISH_ARG = re.compile(DB_ISH_FIELD.pattern + r"|pattern", re.IGNORECASE)

FANOUT = {"get_all_databases", "get_databases", "get_table_meta", "get_all_functions"}
READ_PREFIXES = ("get_", "list_", "show_", "fetch_", "find_", "is", "validate_")
WRITE_PREFIXES = ("create_", "alter_", "drop_", "add_", "append_", "rename_", "truncate_", "update_", "delete_",
                  "set_", "grant_", "revoke_", "mark_", "seed_", "exchange_", "compact", "abort_", "remove_",
                  "put_", "clear_", "cache_", "allocate_")


def _iface_methods() -> dict[str, type]:
    """Every served method name -> its generated ``<name>_args`` class."""
    out: dict[str, type] = {}
    for service in SERVICES:
        for name, member in vars(service.Iface).items():
            if inspect.isfunction(member) and not name.startswith("_"):
                out[name] = getattr(service, f"{name}_args")
    return out


def _structs() -> dict[str, type]:
    out: dict[str, type] = {}
    for module in (ttypes, fb303_ttypes):
        for name, member in vars(module).items():
            if inspect.isclass(member) and member.__module__ == module.__name__ and hasattr(member, "thrift_spec"):
                out[name] = member
    return out


ARGS = _iface_methods()
STRUCTS = _structs()


def _fields(cls: type) -> Iterator[tuple[str, int, Any]]:
    for entry in cls.thrift_spec or ():  # type: ignore[attr-defined]
        if entry:
            yield entry[2], entry[1], entry[3]


def _field(cls: type, attr: str) -> tuple[int, Any] | None:
    for name, ttype, type_args in _fields(cls):
        if name == attr:
            return ttype, type_args
    return None


def _is_string_list(ttype: int, type_args: Any) -> bool:
    return ttype in (TType.LIST, TType.SET) and type_args[0] == TType.STRING


def _stringy(ttype: int, type_args: Any) -> bool:
    """Could this field hold a name? strings, list/set<string>, maps with string keys or values."""
    if ttype == TType.STRING or _is_string_list(ttype, type_args):
        return True
    return ttype == TType.MAP and TType.STRING in (type_args[0], type_args[2])


def _check_db_field(where: str, cls: type, field: DbField) -> str | None:
    found = _field(cls, field.attr)
    if found is None:
        return f"{where}: no field {field.attr!r}"
    ttype, type_args = found
    if field.is_list and not _is_string_list(ttype, type_args):
        return f"{where}.{field.attr}: is_list but not a list/set<string>"
    if not field.is_list and ttype != TType.STRING:
        return f"{where}.{field.attr}: not a string (a list<string> needs is_list=True)"
    return None


def _nested_structs(ttype: int, type_args: Any) -> Iterator[type]:
    if ttype == TType.STRUCT:
        yield type_args[0]
    elif ttype in (TType.LIST, TType.SET):
        yield from _nested_structs(type_args[0], type_args[1])
    elif ttype == TType.MAP:
        yield from _nested_structs(type_args[0], type_args[1])
        yield from _nested_structs(type_args[2], type_args[3])


def _reaches_db_field(cls: type, seen: frozenset[type] = frozenset()) -> bool:
    if cls.__name__ in STRUCT_DB_FIELDS:
        return True
    return any(
        inner not in seen and _reaches_db_field(inner, seen | {cls})
        for _, ttype, type_args in _fields(cls)
        for inner in _nested_structs(ttype, type_args)
    )


def _args_reach_db_field(name: str) -> bool:
    return any(_reaches_db_field(inner) for _, t, a in _fields(ARGS[name]) for inner in _nested_structs(t, a))


# ---- completeness ----------------------------------------------------------------------------------------------


def test_every_served_method_has_exactly_one_entry() -> None:
    assert sorted(set(ARGS) - set(METHODS)) == [], "methods missing from METHODS"
    assert sorted(set(METHODS) - set(ARGS)) == [], "METHODS names that the IDL does not have"
    assert all(spec.name == key for key, spec in METHODS.items())


def test_db_args_are_string_arguments() -> None:
    problems = []
    for name, spec in METHODS.items():
        for field in spec.db_args:
            if field.form is NameForm.OBJECT_NAME:
                problems.append(f"{name}({field.attr}): OBJECT_NAME only exists inside HiveObjectRef")
            problem = _check_db_field(f"{name}_args", ARGS[name], field)
            if problem:
                problems.append(problem)
    assert problems == []


def test_struct_db_fields_are_real_string_fields() -> None:
    problems = []
    for struct, fields in STRUCT_DB_FIELDS.items():
        if struct not in STRUCTS:
            problems.append(f"{struct}: no such struct")
            continue
        assert fields, f"{struct}: empty entry"
        assert len({f.attr for f in fields}) == len(fields), f"{struct}: a field is listed twice"
        for field in fields:
            problem = _check_db_field(struct, STRUCTS[struct], field)
            if problem:
                problems.append(problem)
            if field.form is NameForm.OBJECT_NAME and struct != "HiveObjectRef":
                problems.append(f"{struct}.{field.attr}: OBJECT_NAME only makes sense in HiveObjectRef")
    assert problems == []


_NOT_DB_KEY = re.compile(r"^(?P<struct>\w+)\.(?P<field>\w+)$|^(?P<method>\w+)\((?P<arg>\w+)\)$")


def test_not_db_fields_name_real_fields_and_do_not_contradict_the_table() -> None:
    problems = []
    for key, reason in NOT_DB_FIELDS.items():
        assert reason.strip(), f"{key}: give a reason"
        match = _NOT_DB_KEY.match(key)
        if not match:
            problems.append(f"{key}: neither 'Struct.field' nor 'method(arg)'")
        elif match["struct"]:
            cls = STRUCTS.get(match["struct"])
            if cls is None or _field(cls, match["field"]) is None:
                problems.append(f"{key}: no such struct field")
            elif any(f.attr == match["field"] for f in STRUCT_DB_FIELDS.get(match["struct"], ())):
                problems.append(f"{key}: also listed in STRUCT_DB_FIELDS")
        else:
            method = match["method"]
            if method not in ARGS or _field(ARGS[method], match["arg"]) is None:
                problems.append(f"{key}: no such method argument")
            elif any(f.attr == match["arg"] for f in METHODS[method].db_args):
                problems.append(f"{key}: also listed in db_args")
    assert problems == []


def test_idl_walk_every_db_ish_struct_field_is_classified() -> None:
    unclassified = []
    for struct, cls in sorted(STRUCTS.items()):
        covered = {f.attr for f in STRUCT_DB_FIELDS.get(struct, ())}
        for attr, ttype, type_args in _fields(cls):
            key = f"{struct}.{attr}"
            if _stringy(ttype, type_args) and DB_ISH_FIELD.search(attr) and attr not in covered \
                    and key not in NOT_DB_FIELDS:
                unclassified.append(key)
    assert unclassified == [], "add these to STRUCT_DB_FIELDS or NOT_DB_FIELDS (with a reason)"


def test_idl_walk_every_db_ish_method_argument_is_classified() -> None:
    unclassified = []
    for name, cls in sorted(ARGS.items()):
        covered = {f.attr for f in METHODS[name].db_args}
        for attr, ttype, type_args in _fields(cls):
            key = f"{name}({attr})"
            if _stringy(ttype, type_args) and DB_ISH_ARG.search(attr) and attr not in covered \
                    and key not in NOT_DB_FIELDS:
                unclassified.append(key)
    assert unclassified == [], "add these to db_args or NOT_DB_FIELDS (with a reason)"


# ---- consistency -----------------------------------------------------------------------------------------------


def test_database_routed_methods_can_find_a_database() -> None:
    blind = [name for name, spec in METHODS.items()
             if spec.route is Route.DATABASE and not spec.db_args and not _args_reach_db_field(name)]
    assert blind == []


def test_primary_methods_carry_no_database_arguments_and_explain_database_structs() -> None:
    problems = []
    for name, spec in METHODS.items():
        if spec.route is not Route.PRIMARY:
            continue
        if spec.db_args:
            problems.append(f"{name}: a database argument on a PRIMARY method should route by it")
        if _args_reach_db_field(name) and not spec.note:
            problems.append(f"{name}: PRIMARY although its arguments carry database names; say why in note")
    assert problems == []


def test_fanout_methods() -> None:
    assert {name for name, spec in METHODS.items() if spec.route is Route.FANOUT} == FANOUT
    assert all(METHODS[name].access is Access.READ for name in FANOUT)
    assert all(METHODS[name].merge is not None for name in FANOUT)
    assert all(spec.merge is None for name, spec in METHODS.items() if name not in FANOUT)


def test_set_ugi_has_its_own_route_and_is_never_shed() -> None:
    # answered by the primary and remembered for the connection: not a fan-out
    assert METHODS["set_ugi"].route is Route.IDENTITY
    assert [name for name, spec in METHODS.items() if spec.never_shed] == ["set_ugi"]


def test_lock_facts_come_from_the_idl() -> None:
    assert METHODS["lock"].lock_components == ("rqst", "component")
    assert METHODS["lock"].granted_lock == ("success", "lockid")
    assert METHODS["check_lock"].lock_id == ("rqst", "lockid")
    assert METHODS["unlock"].lock_id == ("rqst", "lockid")
    assert METHODS["heartbeat"].lock_id == ("ids", "lockid")
    assert [name for name, spec in METHODS.items() if spec.releases_lock] == ["unlock"]
    for name, spec in METHODS.items():  # every LOCK_ID method knows where its lock id is
        assert (spec.route is Route.LOCK_ID) == bool(spec.lock_id), name


def test_table_and_catalog_facts_come_from_the_idl() -> None:
    ref = METHODS["get_table"].table_refs
    assert [(r.db, r.table) for r in ref] == [(("dbname",), ("tbl_name",))]
    assert [(r.db, r.table) for r in METHODS["drop_table"].table_refs] == [(("dbname",), ("name",))]
    assert [(r.db, r.table) for r in METHODS["get_table_req"].table_refs] == [(("req", "dbName"), ("req", "tblName"))]
    assert METHODS["get_table_req"].catalog_fields == (("req", "catName"),)
    assert METHODS["get_database"].table_refs == () and METHODS["get_database"].catalog_fields == ()
    assert METHODS["get_table"].bridge is not None and METHODS["get_database"].bridge is None


_DISPATCH_ROOMS = ("waggle/server", "waggle/routing", "waggle/call", "waggle/cache")


def test_dispatch_and_routing_name_no_hms_method() -> None:
    """Dispatch (and the cache) read the method table; a method name written into them would be a rule the table
    cannot see."""
    import ast
    from pathlib import Path

    from waggle.hms.service import METHOD_IO

    root = Path(__file__).resolve().parents[3]
    found = []
    for room in _DISPATCH_ROOMS:
        for path in sorted((root / room).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in METHOD_IO:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    assert found == []


def test_special_access_kinds() -> None:
    assert [name for name, spec in METHODS.items() if spec.access is Access.LOCK] == ["lock"]
    creates = {name for name, spec in METHODS.items() if spec.access is Access.CREATE_DATABASE}
    assert {"create_database", "create_database_req"} <= creates
    assert all(METHODS[name].route is Route.PRIMARY for name in creates)


def test_writes_without_a_database_say_that_access_control_cannot_apply() -> None:
    silent = [name for name, spec in METHODS.items()
              if spec.access is Access.WRITE and spec.route is Route.PRIMARY
              and "access control cannot apply" not in spec.note]
    assert silent == []


def test_result_names_only_on_list_of_string_results() -> None:
    for name, spec in METHODS.items():
        if spec.result_names is None:
            continue
        result = getattr(ThriftHiveMetastore, f"{name}_result")
        success = _field(result, "success")
        assert success is not None and _is_string_list(*success), name
        assert spec.result_names in (NameForm.NAME, NameForm.QUALIFIED), name
    named = {name for name, spec in METHODS.items() if spec.result_names is not None}
    assert named == {"get_all_databases", "get_databases"}


def test_access_agrees_with_the_method_name_or_explains_itself() -> None:
    odd = []
    for name, spec in METHODS.items():
        reads = spec.access is Access.READ
        if name.startswith(READ_PREFIXES) and not reads and not spec.note:
            odd.append(f"{name}: a read by name but {spec.access.value}")
        if name.startswith(WRITE_PREFIXES) and reads and not spec.note:
            odd.append(f"{name}: a write by name but read")
    assert odd == []


# ---- spot checks -----------------------------------------------------------------------------------------------


def _db_fields(struct: str) -> dict[str, DbField]:
    return {f.attr: f for f in STRUCT_DB_FIELDS[struct]}


def test_spot_checks_databases_and_tables() -> None:
    get_table = METHODS["get_table"]
    assert (get_table.access, get_table.route) == (Access.READ, Route.DATABASE)
    assert get_table.db_args == (DbField("dbname", NameForm.NAME),)

    alter = METHODS["alter_table_with_environment_context"]
    assert alter.access is Access.WRITE and alter.route is Route.DATABASE
    assert DbField("dbname", NameForm.NAME) in alter.db_args
    assert _field(ARGS[alter.name], "new_tbl") is not None
    assert _db_fields("Table")["dbName"].form is NameForm.NAME  # new_tbl.dbName: the rename target

    create = METHODS["create_database"]
    assert (create.access, create.route) == (Access.CREATE_DATABASE, Route.PRIMARY)
    assert _db_fields("Database")["name"].form is NameForm.NAME

    get_all = METHODS["get_all_databases"]
    assert (get_all.route, get_all.result_names) == (Route.FANOUT, NameForm.NAME)
    assert METHODS["get_databases"].db_args == (DbField("pattern", NameForm.PATTERN),)

    meta = METHODS["get_table_meta"]
    assert meta.route is Route.FANOUT and meta.db_args == (DbField("db_patterns", NameForm.PATTERN),)
    assert _db_fields("TableMeta")["dbName"].form is NameForm.NAME

    for name in ("get_database_req", "get_table_req", "get_table_objects_by_name_req"):
        assert (METHODS[name].access, METHODS[name].route) == (Access.READ, Route.DATABASE), name
    assert _db_fields("GetDatabaseRequest")["name"].form is NameForm.NAME
    assert _db_fields("GetTableRequest")["dbName"].form is NameForm.NAME


def test_spot_checks_transactions_and_response_structs() -> None:
    assert METHODS["lock"].access is Access.LOCK and METHODS["lock"].route is Route.DATABASE
    assert _db_fields("LockComponent")["dbname"].form is NameForm.NAME
    assert METHODS["open_txns"].route is Route.PRIMARY
    assert METHODS["get_valid_write_ids"].access is Access.READ
    assert _db_fields("GetValidWriteIdsRequest")["fullTableNames"] == DbField("fullTableNames", NameForm.QUALIFIED,
                                                                               is_list=True)
    assert _db_fields("TableValidWriteIds")["fullTableName"].form is NameForm.QUALIFIED
    assert _db_fields("CreationMetadata")["tablesUsed"] == DbField("tablesUsed", NameForm.QUALIFIED, is_list=True)
    assert _db_fields("HiveObjectRef")["objectName"].form is NameForm.OBJECT_NAME
    assert _db_fields("SQLForeignKey").keys() == {"pktable_db", "fktable_db"}
    for struct in ("PartitionSpec", "Partition", "Function", "ColumnStatisticsDesc", "NotificationEvent",
                   "ShowLocksResponseElement", "ShowCompactResponseElement", "CompactionInfoStruct",
                   "WriteEventInfo", "ISchema", "ISchemaName", "TableValidWriteIds"):
        assert struct in STRUCT_DB_FIELDS, struct
    assert NOT_DB_FIELDS["Table.catName"] == "catalog name (bridged separately)"


# ---- database_of -----------------------------------------------------------------------------------------------


def test_database_of_string_argument_and_request_struct() -> None:
    assert database_of(ThriftHiveMetastore.get_table_args(dbname="x", tbl_name="t")) == "x"
    req = ttypes.GetTableRequest(dbName="y", tblName="t")
    assert database_of(ThriftHiveMetastore.get_table_req_args(req=req)) == "y"


@pytest.mark.parametrize(("args", "expected"), [
    (ThriftHiveMetastore.alter_table_args(dbname="old", tbl_name="t", new_tbl=ttypes.Table(dbName="new")), "old"),
    (ThriftHiveMetastore.create_table_req_args(request=ttypes.CreateTableRequest(table=ttypes.Table(dbName="c"))),
     "c"),
    (ThriftHiveMetastore.add_partitions_args(new_parts=[ttypes.Partition(dbName="p")]), "p"),
    (ThriftHiveMetastore.lock_args(rqst=ttypes.LockRequest(component=[ttypes.LockComponent(dbname="l")])), "l"),
    (ThriftHiveMetastore.get_valid_write_ids_args(
        rqst=ttypes.GetValidWriteIdsRequest(fullTableNames=["w.t1", "v.t2"])), "w"),
    (ThriftHiveMetastore.get_privilege_set_args(hiveObject=ttypes.HiveObjectRef(
        objectType=ttypes.HiveObjectType.DATABASE, objectName="o")), "o"),
    (ThriftHiveMetastore.get_privilege_set_args(hiveObject=ttypes.HiveObjectRef(
        objectType=ttypes.HiveObjectType.TABLE, objectName="tbl")), None),
    (ThriftHiveMetastore.get_databases_args(pattern="sales*"), None),
    (ThriftHiveMetastore.open_txns_args(rqst=ttypes.OpenTxnRequest(num_txns=1)), None),
    (ThriftHiveMetastore.get_table_args(), None),
    (None, None),
    ("not an args object", None),
])
def test_database_of(args: object, expected: str | None) -> None:
    assert database_of(args) == expected
