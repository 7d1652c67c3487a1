"""The served IDL is a wire-level superset of the Hive 2.x and 3.1 metastore APIs.

Two generated client packages serve as independent fact sources:

* ``hmsclient``: Hive 2.x bindings (``hmsclient.genthrift``);
* ``hive-metastore-client``: Hive 3.1 bindings (``thrift_files.libraries``).

For each of them, every service method must exist in our bindings with matching argument and
result/exception fields, and every struct/exception must exist with matching fields (id, wire type,
name and, recursively, element types and struct names). Ours may declare more. A few field ids were
reused by later Hive releases with a different meaning; our IDL follows the newest release there, and
those exact spots are listed in ``KNOWN_CONFLICTS`` (the test also checks that each listed spot is
really a conflict, so the list cannot go stale).

Both packages are test dependencies: if one is missing these tests fail; they never skip.
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType
from typing import Any

import pytest
from thrift.Thrift import TType

from waggle.hms.gen.fb303 import FacebookService
from waggle.hms.gen.fb303 import ttypes as fb303_types
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as OurService
from waggle.hms.gen.hive_metastore import constants as our_constants
from waggle.hms.gen.hive_metastore import ttypes as our_types

SOURCES = {
    "hive2": ("hmsclient", "hmsclient.genthrift.hive_metastore", "hmsclient.genthrift.fb303"),
    "hive31": (
        "hive-metastore-client",
        "thrift_files.libraries.thrift_hive_metastore_client",
        "thrift_files.libraries.thrift_facebook_service",
    ),
}

# (source, "struct" | "args" | "result", struct-or-method name, field id) -> why ours differs.
KNOWN_CONFLICTS: dict[tuple[str, str, str, int], str] = {
    ("hive2", "struct", "AddDynamicPartitions", 2): "Hive 3 inserted writeid at 2 and shifted the rest",
    ("hive2", "struct", "AddDynamicPartitions", 3): "Hive 3 inserted writeid at 2 and shifted the rest",
    ("hive2", "struct", "AddDynamicPartitions", 4): "Hive 3 inserted writeid at 2 and shifted the rest",
    ("hive2", "struct", "AddDynamicPartitions", 5): "Hive 3 inserted writeid at 2 and shifted the rest",
    ("hive2", "struct", "InsertEventRequestData", 1): "Hive 3 put replace at 1 and shifted the file lists",
    ("hive2", "struct", "InsertEventRequestData", 2): "Hive 3 put replace at 1 and shifted the file lists",
    ("hive2", "struct", "GetOpenTxnsResponse", 2): "open_txns became list<i64> (was set<i64>) in Hive 3",
    ("hive2", "struct", "LockComponent", 7): "isAcid was renamed isTransactional (same id and type)",
    ("hive2", "result", "get_partition_names", 1): "Hive 4 throws NoSuchObjectException o1, MetaException o2",
    ("hive31", "struct", "Materialization", 1): "layout replaced in later 3.x/4.x",
    ("hive31", "struct", "Materialization", 2): "layout replaced in later 3.x/4.x",
    ("hive31", "struct", "Materialization", 4): "name now used by field 1 of the newer layout",
    ("hive31", "args", "get_materialization_invalidation_info", 1): "now (CreationMetadata, validTxnList)",
    ("hive31", "args", "get_materialization_invalidation_info", 2): "now (CreationMetadata, validTxnList)",
    ("hive31", "result", "get_materialization_invalidation_info", 0): "now returns a single Materialization",
    ("hive31", "args", "get_partitions", 3): "hive-metastore-client sends max_parts as i32; Hive uses i16",
    ("hive31", "args", "refresh_privileges", 2): "Hive added authorizer at 2; the request moved to 3",
}

FB303_METHODS = {
    "getName",
    "getVersion",
    "getStatus",
    "getStatusDetails",
    "getCounters",
    "getCounter",
    "setOption",
    "getOption",
    "getOptions",
    "getCpuProfile",
    "aliveSince",
    "reinitialize",
    "shutdown",
}
FB303_ONEWAY = {"reinitialize", "shutdown"}


# -- helpers -----------------------------------------------------------------------------------------------
def _import(source: str, module: str) -> ModuleType:
    dist = SOURCES[source][0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # a missing fact source is a failure, never a skip
        pytest.fail(
            f"fact source {dist!r} is not importable ({exc}); it is a test dependency: pip install {dist}",
            pytrace=False,
        )


@pytest.fixture(scope="module", params=sorted(SOURCES))
def source(request: pytest.FixtureRequest) -> tuple[str, ModuleType, ModuleType]:
    name = request.param
    _, pkg, _ = SOURCES[name]
    return name, _import(name, f"{pkg}.ttypes"), _import(name, f"{pkg}.ThriftHiveMetastore")


def wire_type(ttype: int, targs: Any) -> Any:
    """A comparable description of a (possibly nested) thrift_spec type.

    Text and binary are both TType.STRING on the wire, so they compare equal.
    """
    if ttype == TType.STRUCT:
        return ("struct", targs[0].__name__)
    if ttype in (TType.LIST, TType.SET):
        return (ttype, wire_type(targs[0], targs[1]))
    if ttype == TType.MAP:
        return (ttype, wire_type(targs[0], targs[1]), wire_type(targs[2], targs[3]))
    return (ttype,)


def fields(cls: type) -> dict[int, tuple[str, Any]]:
    spec = getattr(cls, "thrift_spec", None) or ()
    return {e[0]: (e[2], wire_type(e[1], e[3])) for e in spec if e}


def compare(source: str, kind: str, owner: str, theirs: type, ours: type | None, seen: set) -> list[str]:
    if ours is None:
        return [f"{kind} {owner}: missing"]
    problems = []
    mine = fields(ours)
    for fid, (name, wtype) in fields(theirs).items():
        if mine.get(fid) == (name, wtype):
            continue
        key = (source, kind, owner, fid)
        if key in KNOWN_CONFLICTS:
            seen.add(key)
            continue
        problems.append(f"{kind} {owner} field {fid}: theirs {(name, wtype)}, ours {mine.get(fid)}")
    return problems


def service_methods(service: ModuleType) -> list[str]:
    return sorted(n[: -len("_args")] for n, c in vars(service).items() if n.endswith("_args") and inspect.isclass(c))


def thrift_classes(types_mod: ModuleType) -> dict[str, type]:
    return {
        n: c
        for n, c in vars(types_mod).items()
        if inspect.isclass(c) and c.__module__ == types_mod.__name__ and hasattr(c, "thrift_spec")
    }


def processor_methods() -> set[str]:
    return set(OurService.Processor(None)._processMap)


# -- superset against the fact sources ------------------------------------------------------------------------
def test_every_method_is_served_with_compatible_arguments_and_results(source) -> None:
    name, _, theirs = source
    seen: set = set()
    problems: list[str] = []
    served = processor_methods()
    methods = service_methods(theirs)
    assert methods, f"no methods found in {name}'s bindings"
    for method in methods:
        if method not in served:
            problems.append(f"method {method}: not in our processor")
        problems += compare(
            name, "args", method, getattr(theirs, f"{method}_args"), getattr(OurService, f"{method}_args", None), seen
        )
        their_result = getattr(theirs, f"{method}_result", None)
        our_result = getattr(OurService, f"{method}_result", None)
        if (their_result is None) != (our_result is None):
            problems.append(f"method {method}: oneway-ness differs")
        elif their_result is not None:
            problems += compare(name, "result", method, their_result, our_result, seen)
    assert not problems, "\n".join(problems)
    stale = {k for k in KNOWN_CONFLICTS if k[0] == name and k[1] != "struct"} - seen
    assert not stale, f"KNOWN_CONFLICTS entries that no longer conflict: {sorted(stale)}"


def test_every_struct_and_exception_exists_with_compatible_fields(source) -> None:
    name, theirs, _ = source
    ours = thrift_classes(our_types)
    seen: set = set()
    problems: list[str] = []
    their_classes = thrift_classes(theirs)
    assert their_classes, f"no structs found in {name}'s bindings"
    for cls_name, cls in their_classes.items():
        mine = ours.get(cls_name)
        problems += compare(name, "struct", cls_name, cls, mine, seen)
        if mine is not None and issubclass(cls, Exception) != issubclass(mine, Exception):
            problems.append(f"struct {cls_name}: exception-ness differs")
    assert not problems, "\n".join(problems)
    stale = {k for k in KNOWN_CONFLICTS if k[0] == name and k[1] == "struct"} - seen
    assert not stale, f"KNOWN_CONFLICTS entries that no longer conflict: {sorted(stale)}"


def test_enums_and_constants_are_supersets(source) -> None:
    name, theirs, _ = source
    problems = []
    for enum_name, enum in vars(theirs).items():
        if inspect.isclass(enum) and hasattr(enum, "_NAMES_TO_VALUES"):
            mine = getattr(our_types, enum_name, None)
            for member, value in enum._NAMES_TO_VALUES.items():
                if mine is None or mine._NAMES_TO_VALUES.get(member) != value:
                    problems.append(f"enum {enum_name}.{member} = {value}")
    their_constants = _import(name, f"{SOURCES[name][1]}.constants")
    for const, value in vars(their_constants).items():
        if const.isupper() and getattr(our_constants, const, None) != value:
            problems.append(f"constant {const} = {value!r}")
    assert not problems, "\n".join(problems)


# -- fb303 ---------------------------------------------------------------------------------------------------
def test_fb303_base_service() -> None:
    served = processor_methods()
    assert served >= FB303_METHODS
    for method in FB303_METHODS:
        assert hasattr(FacebookService, f"{method}_args"), method
        assert hasattr(FacebookService, f"{method}_result") == (method not in FB303_ONEWAY), method
    assert issubclass(OurService.Iface, FacebookService.Iface)
    assert fb303_types.fb_status._NAMES_TO_VALUES == {
        "DEAD": 0,
        "STARTING": 1,
        "ALIVE": 2,
        "STOPPING": 3,
        "STOPPED": 4,
        "WARNING": 5,
    }


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_fb303_matches_fact_sources(name: str) -> None:
    theirs = _import(name, f"{SOURCES[name][2]}.FacebookService")
    seen: set = set()
    problems: list[str] = []
    for method in service_methods(theirs):
        problems += compare(
            name,
            "args",
            method,
            getattr(theirs, f"{method}_args"),
            getattr(FacebookService, f"{method}_args", None),
            seen,
        )
        their_result = getattr(theirs, f"{method}_result", None)
        if their_result is not None:
            problems += compare(
                name, "result", method, their_result, getattr(FacebookService, f"{method}_result", None), seen
            )
    assert not problems, "\n".join(problems)


# -- Hive 4 additions ----------------------------------------------------------------------------------------
def arg(method: str, fid: int) -> tuple[str, Any]:
    return fields(getattr(OurService, f"{method}_args"))[fid]


def test_hive4_get_database_req() -> None:
    assert arg("get_database_req", 1) == ("request", ("struct", "GetDatabaseRequest"))
    req = fields(our_types.GetDatabaseRequest)
    assert req[1] == ("name", (TType.STRING,))
    assert req[2] == ("catalogName", (TType.STRING,))
    assert fields(OurService.get_database_req_result)[0] == ("success", ("struct", "Database"))


def test_hive4_get_table_objects_by_name_req() -> None:
    assert arg("get_table_objects_by_name_req", 1) == ("req", ("struct", "GetTablesRequest"))
    assert fields(our_types.GetTablesRequest)[8] == ("tablesPattern", (TType.STRING,))


def test_hive4_request_style_methods_exist() -> None:
    served = processor_methods()
    for method in (
        "get_partitions_by_names_req",
        "truncate_table_req",
        "get_all_table_constraints",
        "get_partitions_req",
        "get_partition_names_req",
        "get_partitions_ps_with_auth_req",
        "get_partition_req",
        "alter_table_req",
        "create_table_req",
        "drop_database_req",
        "get_fields_req",
        "get_schema_req",
        "get_partitions_spec_by_expr",
        "get_partition_names_ps_req",
        "alter_partitions_req",
        "rename_partition_req",
        "get_tables_ext",
        "get_partitions_with_specs",
        "get_dataconnector_req",
        "get_stored_procedure",
        "find_package",
        "get_all_write_event_info",
    ):
        assert method in served, method
        assert hasattr(OurService, f"{method}_args") and hasattr(OurService, f"{method}_result"), method
    assert arg("get_partitions_by_names_req", 1) == ("req", ("struct", "GetPartitionsByNamesRequest"))
    assert arg("truncate_table_req", 1) == ("req", ("struct", "TruncateTableRequest"))
    assert arg("get_all_table_constraints", 1) == ("request", ("struct", "AllTableConstraintsRequest"))
    assert fields(OurService.get_all_table_constraints_result)[0] == (
        "success",
        ("struct", "AllTableConstraintsResponse"),
    )


def test_methods_dropped_by_hive4_are_still_served() -> None:
    served = processor_methods()
    assert {"get_table", "get_table_objects_by_name", "get_indexes", "add_index"} <= served
    assert arg("get_table", 2) == ("tbl_name", (TType.STRING,))
