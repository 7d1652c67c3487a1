"""Version bridges: how a call one Hive release has is answered by a metastore of another. Pure.

Each :class:`Bridge` says which method it stands in for, which Hive releases have that method, and how to build
the method's result from calls an upstream of another release does answer. Bridges never touch a socket: they
are given an :class:`Upstream` whose ``call`` sends one decoded call (itself bridged when the upstream lacks it
too) and returns the decoded result struct, declared exceptions included.

Two kinds of gap are bridged:

* a **method** the upstream does not have. The upstream answers ``TApplicationException(UNKNOWN_METHOD)``;
  :mod:`waggle.upstream.compat` remembers that per connection pool and from then on calls :attr:`Bridge.run`
  directly. Hive 4 request-style methods (``get_database_req`` ...) go down to their Hive 2/3 equivalents, and
  the methods Hive 4.0.1 removed (``get_table``, ``get_table_objects_by_name``) go up to ``*_req``.
* a **field** the upstream does not understand: ``GetTablesRequest.tablesPattern`` (Hive 4) is expanded with
  ``get_tables`` before the call, unless the upstream is known to be Hive 4 (``hive-version``).

:func:`waggle.docs.compat_page.matrix` turns the same rules into the compatibility table of
``docs/compatibility.md``; every cell names the test that covers it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from thrift.Thrift import TApplicationException

from waggle.config.hive_values import OLDEST, Version
from waggle.hms import insert_event, specs
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.gen.hive_metastore.ttypes import MetaException
from waggle.hms.names import CATALOG_MARKER, CATALOG_SEPARATOR, EMPTY_MARKER, parse, partition_name
from waggle.hms.specs import raised

#: The catalog every Hive 2 metastore implicitly is, and the default catalog of Hive 3+.
DEFAULT_CATALOG = "hive"
HIVE_3 = (3, 0, 0)
HIVE_4 = (4, 0, 0)
HIVE_4_0_1 = (4, 0, 1)


class MethodMissing(Exception):
    """The upstream answered ``UNKNOWN_METHOD`` for this method."""

    def __init__(self, method: str) -> None:
        super().__init__(method)
        self.method = method


def is_unknown_method(error: Any) -> bool:
    """Whether an answer is the ``TApplicationException`` a Thrift server gives for a method it does not have."""
    return bool(getattr(error, "type", None) == TApplicationException.UNKNOWN_METHOD)


class Upstream(Protocol):
    """What a bridge may do with the metastore it answers for."""

    @property
    def catalogs(self) -> bool | None:
        """True: the upstream understands ``@cat#db`` names (Hive 3+); False: it does not; None: not known."""
        ...

    def call(self, method: str, args: Any) -> Any:
        """Send one call and return its decoded result struct; raises :class:`MethodMissing`."""
        ...


# -- results --------------------------------------------------------------------------------------------------
def _exception_fields(result: Any) -> Iterator[tuple[str, type]]:
    """(attribute, class) of each exception a result struct declares."""
    for field in specs.exception_fields(type(result)):
        yield field.attr, field.type_args[0]


def carry(old: Any, method: str, success: Callable[[Any], Any] | None = None) -> Any:
    """``method``'s result built from another method's result: its success mapped by ``success`` (None for a void
    method), or its exception moved to the field of the same class (else a ``MetaException`` saying what it was).
    """
    result = getattr(H, f"{method}_result")()
    exc = raised(old)
    if exc is None:
        if success is not None:
            result.success = success(getattr(old, "success", None))
        return result
    for attr, cls in _exception_fields(result):
        if isinstance(exc, cls):
            setattr(result, attr, exc)
            return result
    for attr, cls in _exception_fields(result):
        if cls is MetaException:
            setattr(result, attr, MetaException(message=f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"))
            return result
    raise ValueError(f"{method} declares no exception for {type(exc).__name__}")  # never: all declare MetaException


def failure(method: str, message: str) -> Any:
    result = getattr(H, f"{method}_result")()
    for attr, cls in _exception_fields(result):
        if cls is MetaException:
            setattr(result, attr, MetaException(message=message))
            return result
    raise ValueError(f"{method} declares no MetaException")


def qualify(up: Upstream, catalog: str | None, db: str | None) -> str | None:
    """A database name for a string argument: catalog-qualified only where the upstream understands that."""
    if db is None or not catalog or not up.catalogs:
        return db
    return f"{CATALOG_MARKER}{catalog}{CATALOG_SEPARATOR}{db or EMPTY_MARKER}"


def strip_catalog(name: str) -> str:
    """``@hive#db`` -> ``db`` for a metastore without catalogs (``@hive#`` -> ``*``, ``@hive#!`` -> ``""``).

    Only the default catalog is removed: a name in another catalog stays as it is, and a Hive 2 metastore then
    answers that it has no such database, which is true.
    """
    qualified = parse(name)
    if qualified.catalog is None or qualified.catalog.lower() != DEFAULT_CATALOG:
        return name
    return "*" if qualified.db is None else qualified.db


# -- the bridges ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Wrap:
    """A bridge whose answer is the older call's list, wrapped: ``method``'s success is a response struct whose one
    required field (``field``) is exactly the older method's success. Such a reply can be re-framed in its
    encoded form, without decoding it (:func:`waggle.upstream.compat.wrap_reply`)."""

    request: Callable[[Any, Upstream], tuple[str, Any]]  # ``method``'s args -> (older method, its args)
    response: type  # the struct ``method`` answers with
    field: int  # the id of its list field

    def run(self, method: str, args: Any, up: Upstream) -> Any:
        older, older_args = self.request(args, up)
        return self.result(method, up.call(older, older_args))

    def result(self, method: str, older_result: Any) -> Any:
        """``method``'s result struct from the older method's."""
        field = specs.field_by_id(self.response, self.field)
        assert field is not None, f"{self.response.__name__} has no field {self.field}"
        attr = field.attr
        return carry(older_result, method, lambda items: self.response(**{attr: list(items or ())}))


@dataclass(frozen=True, slots=True)
class Bridge:
    method: str  # what the client called
    via: str  # what an upstream without it is asked instead (for the docs)
    since: Version  # first Hive release with ``method``
    run: Callable[[Any, Upstream], Any] | Wrap  # ``method``'s args in member names -> ``method``'s result struct
    removed: Version | None = None  # Hive release that dropped ``method``
    #: Hive releases before this one cannot answer it at all (the bridge answers a MetaException)
    impossible_before: Version | None = None
    note: str = ""
    #: the bridge is for these calls only (None: any call of ``method``)
    applies: Callable[[Any], bool] | None = None
    #: bridged for a field: a metastore not known to be this release or later gets the bridge every time
    field_since: Version | None = None

    def answer(self, args: Any, up: Upstream) -> Any:
        """``method``'s result struct, from calls ``up`` has."""
        if isinstance(self.run, Wrap):
            return self.run.run(self.method, args, up)
        return self.run(args, up)

    def applies_to(self, args: Any) -> bool:
        """Whether this bridge can answer this call."""
        return self.applies is None or self.applies(args)

    def exists_in(self, version: Version) -> bool:
        return self.since <= version and (self.removed is None or version < self.removed)


def _get_database_req(args: Any, up: Upstream) -> Any:
    r = args.request
    old = up.call("get_database", H.get_database_args(name=qualify(up, r.catalogName, r.name)))
    return carry(old, "get_database_req", lambda db: db)


def _has_tables_pattern(args: Any) -> bool:
    req = getattr(args, "req", None)
    return req is not None and req.tablesPattern is not None and not req.tblNames


def _get_table_objects_by_name_req(args: Any, up: Upstream) -> Any:
    """Hive 4's ``tablesPattern``: list the matching names first, then fetch those tables."""
    r = args.req
    names = up.call("get_tables", H.get_tables_args(db_name=qualify(up, r.catName, r.dbName),
                                                    pattern=r.tablesPattern))
    if raised(names) is not None:
        return carry(names, "get_table_objects_by_name_req")
    request = copy.copy(r)
    request.tblNames = list(names.success or ())
    request.tablesPattern = None
    return up.call("get_table_objects_by_name_req", H.get_table_objects_by_name_req_args(req=request))


def _get_partitions_req(args: Any, up: Upstream) -> tuple[str, Any]:
    r = args.req
    return "get_partitions", H.get_partitions_args(db_name=qualify(up, r.catName, r.dbName), tbl_name=r.tblName,
                                                   max_parts=-1 if r.maxParts is None else r.maxParts)


def _get_partitions_by_names_req(args: Any, up: Upstream) -> tuple[str, Any]:
    r = args.req
    return "get_partitions_by_names", H.get_partitions_by_names_args(db_name=r.db_name, tbl_name=r.tbl_name,
                                                                     names=list(r.names or ()))


def _get_partition_names_req(args: Any, up: Upstream) -> Any:
    r = args.req
    db = qualify(up, r.catName, r.dbName)
    max_parts = -1 if r.maxParts is None else r.maxParts
    if not r.expr:
        old = up.call("get_partition_names", H.get_partition_names_args(db_name=db, tbl_name=r.tblName,
                                                                         max_parts=max_parts))
        return carry(old, "get_partition_names_req", lambda names: list(names or ()))
    table = up.call("get_table_req", H.get_table_req_args(req=T.GetTableRequest(
        dbName=r.dbName, tblName=r.tblName, catName=r.catName)))
    if raised(table) is not None:
        return carry(table, "get_partition_names_req")
    keys = [k.name for k in table.success.table.partitionKeys or ()]
    request = copy.copy(r)
    request.order = None
    parts = up.call("get_partitions_by_expr", H.get_partitions_by_expr_args(req=request))
    if raised(parts) is None and parts.success.hasUnknownPartitions:
        # the metastore could not evaluate the expression on every partition: the list is a superset
        return failure("get_partition_names_req", "this metastore could not evaluate the partition expression "
                                                  "exactly (hasUnknownPartitions); use get_partitions_by_expr")
    return carry(parts, "get_partition_names_req",
                 lambda res: [partition_name(keys, p.values or ()) for p in res.partitions or ()])


def _get_partitions_ps_with_auth_req(args: Any, up: Upstream) -> tuple[str, Any]:
    r = args.req
    db = qualify(up, r.catName, r.dbName)
    if r.partNames:
        return "get_partitions_by_names", H.get_partitions_by_names_args(db_name=db, tbl_name=r.tblName,
                                                                         names=list(r.partNames))
    return "get_partitions_ps_with_auth", H.get_partitions_ps_with_auth_args(
        db_name=db, tbl_name=r.tblName, part_vals=list(r.partVals or ()),
        max_parts=-1 if r.maxParts is None else r.maxParts,
        user_name=r.userName, group_names=list(r.groupNames) if r.groupNames is not None else None)


def _get_partition_req(args: Any, up: Upstream) -> Any:
    r = args.req
    old = up.call("get_partition", H.get_partition_args(
        db_name=qualify(up, r.catName, r.dbName), tbl_name=r.tblName, part_vals=list(r.partVals or ())))
    return carry(old, "get_partition_req", lambda p: T.GetPartitionResponse(partition=p))


def _alter_table_req(args: Any, up: Upstream) -> Any:
    r = args.req
    old = up.call("alter_table_with_environment_context", H.alter_table_with_environment_context_args(
        dbname=qualify(up, r.catName, r.dbName), tbl_name=r.tableName, new_tbl=r.table,
        environment_context=r.environmentContext))
    return carry(old, "alter_table_req", lambda _: T.AlterTableResponse())


def _alter_partitions_req(args: Any, up: Upstream) -> Any:
    r = args.req
    old = up.call("alter_partitions_with_environment_context", H.alter_partitions_with_environment_context_args(
        db_name=qualify(up, r.catName, r.dbName), tbl_name=r.tableName, new_parts=list(r.partitions or ()),
        environment_context=r.environmentContext))
    return carry(old, "alter_partitions_req", lambda _: T.AlterPartitionsResponse())


_HIVE3_CONSTRAINTS = ("uniqueConstraints", "notNullConstraints", "defaultConstraints", "checkConstraints")


def _create_table_req(args: Any, up: Upstream) -> Any:
    r = args.request
    if any(getattr(r, kind) for kind in _HIVE3_CONSTRAINTS):
        if up.catalogs is not True:  # Hive 2 (no catalogs) would drop them without a word
            return failure("create_table_req", "this metastore (Hive 2, or not known to be Hive 3+) cannot store "
                                               "UNIQUE, NOT NULL, DEFAULT or CHECK constraints; the table was not "
                                               "created")
        old = up.call("create_table_with_constraints", H.create_table_with_constraints_args(
            tbl=r.table, primaryKeys=list(r.primaryKeys or ()), foreignKeys=list(r.foreignKeys or ()),
            uniqueConstraints=list(r.uniqueConstraints or ()), notNullConstraints=list(r.notNullConstraints or ()),
            defaultConstraints=list(r.defaultConstraints or ()), checkConstraints=list(r.checkConstraints or ())))
    elif r.primaryKeys or r.foreignKeys:
        old = up.call("create_table_with_constraints", H.create_table_with_constraints_args(
            tbl=r.table, primaryKeys=list(r.primaryKeys or ()), foreignKeys=list(r.foreignKeys or ())))
    else:
        old = up.call("create_table_with_environment_context", H.create_table_with_environment_context_args(
            tbl=r.table, environment_context=r.envContext))
    return carry(old, "create_table_req")


def _drop_database_req(args: Any, up: Upstream) -> Any:
    r = args.req
    name = qualify(up, r.catalogName, r.name)
    if r.ignoreUnknownDb:
        # asked first: a Hive 2.3 metastore answers dropping a missing database with a NullPointerException
        found = up.call("get_database", H.get_database_args(name=name))
        if isinstance(raised(found), T.NoSuchObjectException):
            return H.drop_database_req_result()
    old = up.call("drop_database", H.drop_database_args(name=name, deleteData=bool(r.deleteData),
                                                        cascade=bool(r.cascade)))
    return carry(old, "drop_database_req")


def _truncate_table_req(args: Any, up: Upstream) -> Any:
    r = args.req
    try:
        old = up.call("truncate_table", H.truncate_table_args(
            dbName=r.dbName, tableName=r.tableName,
            partNames=list(r.partNames) if r.partNames is not None else None))
    except MethodMissing:
        return failure("truncate_table_req", "this metastore has neither truncate_table_req nor truncate_table "
                                             "(Hive 2 clients truncate files themselves); nothing was truncated")
    return carry(old, "truncate_table_req", lambda _: T.TruncateTableResponse())


_CONSTRAINT_CALLS = (
    # (method, its request class, the attribute of both its response and SQLAllTableConstraints)
    ("get_primary_keys", T.PrimaryKeysRequest, "primaryKeys"),
    ("get_foreign_keys", T.ForeignKeysRequest, "foreignKeys"),
    ("get_unique_constraints", T.UniqueConstraintsRequest, "uniqueConstraints"),
    ("get_not_null_constraints", T.NotNullConstraintsRequest, "notNullConstraints"),
    ("get_default_constraints", T.DefaultConstraintsRequest, "defaultConstraints"),
    ("get_check_constraints", T.CheckConstraintsRequest, "checkConstraints"),
)


def _get_all_table_constraints(args: Any, up: Upstream) -> Any:
    """Six calls; a kind of constraint the upstream has no method for (Hive 2 has only keys) is empty."""
    r = args.request
    everything = T.SQLAllTableConstraints()
    for method, request_class, attr in _CONSTRAINT_CALLS:
        if method == "get_foreign_keys":
            request = request_class(foreign_db_name=r.dbName, foreign_tbl_name=r.tblName, catName=r.catName)
        else:
            request = request_class(db_name=r.dbName, tbl_name=r.tblName, catName=r.catName or DEFAULT_CATALOG)
        try:
            old = up.call(method, getattr(H, f"{method}_args")(request=request))
        except MethodMissing:
            setattr(everything, attr, [])
            continue
        if raised(old) is not None:
            return carry(old, "get_all_table_constraints")
        setattr(everything, attr, list(getattr(old.success, attr, None) or ()))
    result = H.get_all_table_constraints_result()
    result.success = T.AllTableConstraintsResponse(allTableConstraints=everything)
    return result


def _get_fields_req(args: Any, up: Upstream) -> tuple[str, Any]:
    r = args.req
    return "get_fields_with_environment_context", H.get_fields_with_environment_context_args(
        db_name=qualify(up, r.catName, r.dbName), table_name=r.tblName, environment_context=r.envContext)


def _get_schema_req(args: Any, up: Upstream) -> tuple[str, Any]:
    r = args.req
    return "get_schema_with_environment_context", H.get_schema_with_environment_context_args(
        db_name=qualify(up, r.catName, r.dbName), table_name=r.tblName, environment_context=r.envContext)


def _get_table(args: Any, up: Upstream) -> Any:
    name = parse(args.dbname)
    old = up.call("get_table_req", H.get_table_req_args(req=T.GetTableRequest(
        dbName=name.db, tblName=args.tbl_name, catName=name.catalog)))
    return carry(old, "get_table", lambda res: res.table)


def _get_table_objects_by_name(args: Any, up: Upstream) -> Any:
    name = parse(args.dbname)
    old = up.call("get_table_objects_by_name_req", H.get_table_objects_by_name_req_args(req=T.GetTablesRequest(
        dbName=name.db, tblNames=list(args.tbl_names or ()), catName=name.catalog)))
    return carry(old, "get_table_objects_by_name", lambda res: list(res.tables or ()))


def _fire_listener_event(args: Any, up: Upstream) -> Any:
    """Insert data in the numbering the metastore reads: Hive 2.3's for one without catalogs (asked once)."""
    return up.call("fire_listener_event", insert_event.as_hive2(args) if up.catalogs is False else args)


_ALL = (
    Bridge("get_database_req", "get_database", HIVE_4, _get_database_req),
    Bridge("get_table_objects_by_name_req", "get_tables, then get_table_objects_by_name_req with the names",
           OLDEST, _get_table_objects_by_name_req, applies=_has_tables_pattern, field_since=HIVE_4,
           note="bridged for `tablesPattern` (a Hive 4 field) unless the upstream's `hive-version` is 4 or later"),
    Bridge("get_partitions_req", "get_partitions", HIVE_4, Wrap(_get_partitions_req, T.PartitionsResponse, 1)),
    Bridge("get_partitions_by_names_req", "get_partitions_by_names", HIVE_4,
           Wrap(_get_partitions_by_names_req, T.GetPartitionsByNamesResult, 1),
           note="column statistics (`get_col_stats`) are not returned by the older call"),
    Bridge("get_partition_names_req", "get_partition_names, or get_partitions_by_expr and get_table_req "
           "when there is an expression", HIVE_4, _get_partition_names_req, note="`order` is not applied"),
    Bridge("get_partitions_ps_with_auth_req", "get_partitions_ps_with_auth (get_partitions_by_names for "
           "`partNames`)", HIVE_4,
           Wrap(_get_partitions_ps_with_auth_req, T.GetPartitionsPsWithAuthResponse, 1)),
    Bridge("get_partition_req", "get_partition", HIVE_4, _get_partition_req),
    Bridge("alter_table_req", "alter_table_with_environment_context", HIVE_4, _alter_table_req,
           note="write ids and expected-parameter checks are Hive 4 only and are not sent"),
    Bridge("alter_partitions_req", "alter_partitions_with_environment_context", HIVE_4, _alter_partitions_req,
           note="Hive 4's alterPartitions; write ids and the partition column schema are Hive 4 only and are not "
                "sent"),
    Bridge("create_table_req", "create_table_with_environment_context, or create_table_with_constraints",
           HIVE_4, _create_table_req,
           note="a Hive 2 upstream refuses UNIQUE / NOT NULL / DEFAULT / CHECK constraints with a MetaException"),
    Bridge("drop_database_req", "drop_database", HIVE_4, _drop_database_req,
           note="`ignoreUnknownDb` is honoured with a get_database first; soft delete is Hive 4 only"),
    Bridge("truncate_table_req", "truncate_table", HIVE_4, _truncate_table_req, impossible_before=HIVE_3,
           note="Hive 2 has no truncate call at all: the client gets a MetaException that says so"),
    Bridge("get_all_table_constraints", "get_primary_keys, get_foreign_keys and (Hive 3) the four "
           "get_*_constraints calls", HIVE_4, _get_all_table_constraints),
    Bridge("get_fields_req", "get_fields_with_environment_context", HIVE_4,
           Wrap(_get_fields_req, T.GetFieldsResponse, 1)),
    Bridge("get_schema_req", "get_schema_with_environment_context", HIVE_4,
           Wrap(_get_schema_req, T.GetSchemaResponse, 1)),
    Bridge("get_table", "get_table_req", OLDEST, _get_table, removed=HIVE_4_0_1),
    Bridge("get_table_objects_by_name", "get_table_objects_by_name_req", OLDEST, _get_table_objects_by_name,
           removed=HIVE_4_0_1),
    Bridge("fire_listener_event", "fire_listener_event with Hive 2.3's field ids", OLDEST, _fire_listener_event,
           applies=insert_event.inserts, field_since=HIVE_3,
           note="InsertEventRequestData is numbered apart in Hive 2.3 (`filesAdded` is field 1, not 2): a call is "
                "renumbered for a metastore without catalogs, and a Hive 2.3 client's call for any other "
                "(waggle.hms.insert_event)"),
)

#: method -> its bridge
BRIDGES: dict[str, Bridge] = {b.method: b for b in _ALL}


def bridges_call(method: str, args: Any, missing: set[str] | frozenset[str], version: Version | None) -> bool:
    """Whether this call goes to its bridge for a metastore that lacks ``missing`` and is of ``version``."""
    bridge = BRIDGES.get(method)
    if bridge is None or not bridge.applies_to(args):
        return False
    if method in missing:
        return True
    return bridge.field_since is not None and (version is None or version < bridge.field_since)


def applies_to(method: str, args: Any) -> bool:
    """Whether ``method``'s bridge (if it has one) can answer this call."""
    bridge = BRIDGES.get(method)
    return bridge is not None and bridge.applies_to(args)


def missing_in(version: Version | None) -> frozenset[str]:
    """The bridged methods a metastore of this Hive release does not have (nothing is assumed without a hint)."""
    if version is None:
        return frozenset()
    return frozenset(b.method for b in _ALL if not b.exists_in(version))

