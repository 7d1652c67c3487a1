"""THE method table: for every HMS Thrift method, where database names travel and how the call is treated.

Everything that depends on the semantics of a method is derived from the data in this module, never from
per-method code elsewhere:

* routing (:class:`Route`) -- which member(s) of the federation receive the call;
* access control (:class:`Access`) -- whether the call needs write access to the databases it names;
* request and response rewriting -- :data:`METHODS` ``db_args`` name the *string* arguments that carry database
  names, :data:`STRUCT_DB_FIELDS` names every *struct* field that carries one (request and response structs
  alike; nested structs are found by :mod:`waggle.hms.specs`);
* the supported-methods documentation (``note`` says why anything non-obvious is the way it is).

:data:`NOT_DB_FIELDS` records fields and arguments whose name looks database-ish but that carry no database name,
so that ``tests/unit/hms/test_method_table.py`` can fail when the IDL gains a database-bearing field that nobody
has classified.

Conventions used below
----------------------
* ``Route.DATABASE`` goes to the member that owns the database name(s) found in the call. Some of these calls
  carry the name only as an *optional filter* (``show_locks``, ``show_compact``, ``get_privilege_set`` for a
  GLOBAL object, ...): with no name present there is no database context and the router uses the primary.
* ``Route.PRIMARY`` calls carry no database context. A WRITE there names no database, so per-database access
  control cannot apply to it; the note says so. Some PRIMARY calls still carry database names inside struct
  fields (``commit_txn``'s write events, the notification filters): those fields are rewritten like any other,
  they just do not choose the member.
* Transactions are opened, committed and aborted on the primary. Lock ids, transaction ids and compaction ids
  are numbers private to one metastore: calls that carry only such ids go to the primary.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from thrift.Thrift import TType

from waggle.config.kinds import Family, Privilege
from waggle.hms import specs
from waggle.hms.bridges import BRIDGES, Bridge
from waggle.hms.catalogs import CATALOG_ATTRS
from waggle.hms.gen.fb303 import FacebookService
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.hms.gen.hive_metastore.ttypes import HiveObjectType

__all__ = [
    "LIST_ALL_DATABASES",
    "METHODS",
    "NOT_DB_FIELDS",
    "STRUCT_DB_FIELDS",
    "Access",
    "Cached",
    "ConnectorCall",
    "ConnectorOp",
    "DbField",
    "LinkCall",
    "LinkOp",
    "LogOp",
    "Merge",
    "MethodSpec",
    "NameForm",
    "Path",
    "PointerGuard",
    "Route",
    "TableRef",
    "TokenCall",
    "TokenOp",
    "Txn",
    "database_of",
    "databases_of",
]


class Access(enum.Enum):
    """How access control treats the call."""

    READ = "read"  # never refused
    WRITE = "write"  # needs write access on every database it names
    CREATE_DATABASE = "create_database"  # primary only, needs a *_CREATE* access type
    CREATE_CATALOG = "create_catalog"  # a catalog namespace change: primary only, needs a *_CREATE* access type
    LOCK = "lock"  # per LockComponent: SHARED_READ is a read; EXCLUSIVE / SHARED_WRITE / EXCL_WRITE are writes


class Route(enum.Enum):
    """Which member(s) of the federation receive the call."""

    DATABASE = "database"  # the one metastore that owns the database name(s) found in the call
    PRIMARY = "primary"  # always the primary: no database context
    FANOUT = "fanout"  # every member in parallel, results merged (see :class:`Merge`)
    LOCK_ID = "lock_id"  # the member the lock id's slot names (waggle.call.lock_ids), else the primary
    #: the connection's identity: answered by the primary, remembered for the connection, and replayed to
    #: each member when waggle first connects to it as that user
    IDENTITY = "identity"


class TokenOp(enum.Enum):
    """A delegation-token call that waggle answers itself when its clients log in with Kerberos."""

    ISSUE = "issue"  # a new waggle token (success: the token string)
    RENEW = "renew"  # a new expiry (success: milliseconds)
    CANCEL = "cancel"  # no success value
    STORE = "store"  # the token store and master keys behind them: refused, waggle keeps its own


@dataclass(frozen=True, slots=True)
class TokenCall:
    op: TokenOp
    args: tuple[str, ...] = ()  # the string arguments the operation takes, in order


class LinkOp(enum.Enum):
    """A call that may create or drop a link (a remote database under a local name; see waggle.remotes)."""

    CREATE = "create"  # ``path`` leads to the new Database: parameters waggle.remote.* make it a link
    DROP = "drop"  # ``path`` leads to the database name: dropping a link drops only the link, in the primary
    CREATE_TABLE = "create table"  # ``path`` leads to the new Table: waggle.remote.table makes it a remote table
    DROP_TABLE = "drop table"  # the table named by ``table_refs``: a remote table's stub is dropped, nothing else


@dataclass(frozen=True, slots=True)
class LinkCall:
    op: LinkOp
    path: tuple[str, ...]


class ConnectorOp(enum.Enum):
    """A Hive 4 data-connector call, answered by waggle when remote databases are enabled (waggle.remotes)."""

    CREATE = "create"  # paths: (the DataConnector)
    GET = "get"  # paths: (its name); success: the DataConnector
    LIST = "list"  # success: the names
    ALTER = "alter"  # paths: (its name, the new DataConnector)
    DROP = "drop"  # paths: (its name)


@dataclass(frozen=True, slots=True)
class ConnectorCall:
    op: ConnectorOp
    paths: tuple[tuple[str, ...], ...] = ()


class LogOp(enum.Enum):
    """A notification-log call, answered by waggle from the federation's merged log when the server's
    ``notification-log`` is ``federated`` (:mod:`waggle.events`); else it follows the method's route."""

    CURRENT = "current"  # success: the newest merged event id
    NEXT = "next"  # success: the events after the request's lastEvent
    COUNT = "count"  # success: how many events from the request's fromEventId


class Merge(enum.Enum):
    """How the answers of a fan-out are merged (members in federation order, the primary first)."""

    DATABASE_NAMES = "database names"  # success is a list of database names, cut by the client's pattern
    TABLE_METAS = "table metas"  # success is a list of TableMeta, cut by the client's pattern and mapped-tables
    FUNCTIONS = "functions"  # success.functions; only the primary's unless query-functions-across-all-metastores


class Cached(enum.Enum):
    """Whether a read's reply may be remembered (:mod:`waggle.cache`), and which change forgets it. A write
    forgets what it names (the databases and tables in its arguments) in any case."""

    TABLE = "table"  # about one table: forgotten when that table (or its database) changes
    DATABASE = "database"  # about a database or its tables as a whole: forgotten when any of them changes


class Txn(enum.Enum):
    """A call that opens or ends a client's transaction: while one is open, its reads skip the cache."""

    OPEN = "open"
    END = "end"


class NameForm(enum.Enum):
    """How a database name is spelled inside a field."""

    NAME = "name"  # a database name (may arrive catalog-qualified as "@cat#db")
    PATTERN = "pattern"  # a database-name pattern with * | . wildcards (may be "@cat#pattern")
    QUALIFIED = "qualified"  # a "db.table" string
    OBJECT_NAME = "object_name"  # HiveObjectRef.objectName: a database name only when objectType == DATABASE
    VIEW_SQL = "view_sql"  # view text: database qualifiers of table references, found by a SQL parser


@dataclass(frozen=True, slots=True)
class DbField:
    attr: str  # attribute name in the generated struct / args class
    form: NameForm
    is_list: bool = False  # list<string> or set<string> of such names


#: attribute names from a decoded ``<method>_args`` (or ``_result``) object down to one field
Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TableRef:
    """Where a call names one table: the paths to its database and to its table name."""

    db: Path
    table: Path


@dataclass(frozen=True, slots=True)
class PointerGuard:
    """An alter that carries a table's whole new definition, where it names the table (paths into its args):
    waggle's Iceberg pointer guard reads the table first and refuses an alter that would erase or roll back its
    ``metadata_location`` (:mod:`waggle.call.pointer_guard`)."""

    db: Path
    table: Path
    new: Path  # the new Table
    catalog: Path = ()  # the catalog name, where the call carries it apart from the database name
    context: Path = ()  # its EnvironmentContext, where the call carries one (the metastore's check goes there)
    reads: str = "get_table_req"  # how the table is read first (every Hive release from 2.3 answers it)


@dataclass(frozen=True, slots=True)
class MethodSpec:
    name: str
    access: Access
    route: Route
    db_args: tuple[DbField, ...] = ()  # string / list<string> arguments of <name>_args that carry database names
    result_names: NameForm | None = None  # when `success` itself is a list<string> of database names
    note: str = ""  # short reason for anything non-obvious (shown in generated docs)
    lists_tables: bool = False  # `success` is a list<string> of table names (filtered by mapped-tables)
    merge: Merge | None = None  # Route.FANOUT: how the members' answers are merged
    never_shed: bool = False  # answered even when limits.max-in-flight-calls are taken
    never_limited: bool = False  # never counted by the rate limits (limits.rates): keeps what a client holds
    #: the reply may be remembered by waggle's cache, and what forgets it (see :class:`Cached`)
    cached: Cached | None = None
    #: the method family rate limits count the call in; None in an entry: derived (see _family)
    family: Family | None = None
    releases_lock: bool = False  # a success releases the lock id it names (the connection may forget its owner)
    txn: Txn | None = None  # a success opens or ends the connection's transaction
    #: with a Kerberos front door, waggle answers this call itself (see :class:`TokenOp`); else the route applies
    token: TokenCall | None = None
    #: the call creates or drops a link when it names one (see :class:`LinkOp`)
    link: LinkCall | None = None
    #: with remote databases enabled, waggle answers this data-connector call itself
    connector: ConnectorCall | None = None
    #: with ``notification-log: federated``, waggle answers this log call from the merged log (see :class:`LogOp`)
    log: LogOp | None = None
    #: an alter of a table that may be Iceberg's: read first, refused when it would move the metadata pointer back
    pointer_guard: PointerGuard | None = None
    # -- derived from the IDL when the table is built (see _derive); never written by hand ------------------
    lock_id: Path = ()  # args path to the lock id (Route.LOCK_ID)
    lock_components: Path = ()  # args path to the list of LockComponent (Access.LOCK)
    granted_lock: Path = ()  # result path to the lock id a successful Access.LOCK call was granted
    #: result paths to the lock ids a reply shows (lists along the way walked): a federated member's are shown
    #: with its slot (waggle.call.lock_ids)
    shown_lock_ids: tuple[Path, ...] = ()
    table_refs: tuple[TableRef, ...] = ()  # (database, table) pairs checked against mapped-tables
    catalog_fields: tuple[Path, ...] = ()  # args paths to catalog names inside request structs
    bridge: Bridge | None = None  # how an upstream of another Hive release answers it (waggle.hms.bridges)
    #: what a grant must allow on the objects the call names (``authorization``); None in an entry: derived (see
    #: _privilege). A lock component of type SHARED_READ needs only ``select``.
    privilege: Privilege | None = None

    @property
    def changes(self) -> bool:
        """Whether the call may change what a metastore holds (anything but a plain read)."""
        return self.access is not Access.READ


# --------------------------------------------------------------------------------------------------------------
# Small constructors: they only fill in fields, they never guess.
# --------------------------------------------------------------------------------------------------------------


def db(attr: str) -> DbField:
    """A database name."""
    return DbField(attr, NameForm.NAME)


def db_pattern(attr: str) -> DbField:
    """A database-name pattern."""
    return DbField(attr, NameForm.PATTERN)


def qualified(attr: str, *, is_list: bool = False) -> DbField:
    """A "db.table" name (or a list / set of them)."""
    return DbField(attr, NameForm.QUALIFIED, is_list)


def view_sql(attr: str) -> DbField:
    """Hive SQL of a view, whose table references may be database-qualified."""
    return DbField(attr, NameForm.VIEW_SQL)


def object_name(attr: str) -> DbField:
    """HiveObjectRef.objectName: a database name when the object is a DATABASE."""
    return DbField(attr, NameForm.OBJECT_NAME)


def _read(name: str, *db_args: DbField, note: str = "") -> MethodSpec:
    """A read routed by the database it names (in ``db_args`` or in its struct arguments)."""
    return MethodSpec(name, Access.READ, Route.DATABASE, db_args, note=note)


def _write(name: str, *db_args: DbField, note: str = "") -> MethodSpec:
    """A write routed by the database it names; needs write access on every database it names."""
    return MethodSpec(name, Access.WRITE, Route.DATABASE, db_args, note=note)


def _listing(name: str, *db_args: DbField, note: str = "", cached: Cached | None = None) -> MethodSpec:
    """A read of one database's table names (``mapped-tables`` filters them)."""
    return MethodSpec(name, Access.READ, Route.DATABASE, db_args, note=note, lists_tables=True, cached=cached)


def _table_read(name: str, *db_args: DbField, note: str = "") -> MethodSpec:
    """A read about one table that clients repeat: its reply may be remembered until that table changes."""
    return MethodSpec(name, Access.READ, Route.DATABASE, db_args, note=note, cached=Cached.TABLE)


def _database_read(name: str, *db_args: DbField, note: str = "") -> MethodSpec:
    """A read about a database as a whole that clients repeat: remembered until the database or any of its
    tables changes."""
    return MethodSpec(name, Access.READ, Route.DATABASE, db_args, note=note, cached=Cached.DATABASE)


_TOKENS_NOTE = "with a Kerberos front door (hive.metastore.sasl.enabled), answered by waggle's own token service"


def _tokens(entries: Any) -> list[MethodSpec]:
    """Delegation-token methods: the primary's, unless waggle's Kerberos front door answers them itself."""
    out = []
    for spec, token in entries:
        own = _TOKENS_NOTE if token.op is not TokenOp.STORE else \
            "the token store behind delegation tokens: refused with a Kerberos front door, where waggle keeps its own"
        note = f"{spec.note}; {own}" if spec.note else own
        out.append(replace(spec, token=token, note=note))
    return out


def _connectors(entries: Any) -> list[MethodSpec]:
    """Data-connector methods: the primary's, unless remote databases are enabled (then waggle's own)."""
    note = "with remote-databases.enabled, answered by waggle (type hivemetastore; kept in the primary)"
    return [replace(spec, connector=call, note=f"{spec.note}; {note}") for spec, call in entries]


def _primary_read(name: str, note: str = "") -> MethodSpec:
    """A read without database context: served by the primary."""
    return MethodSpec(name, Access.READ, Route.PRIMARY, note=note)


_NO_DB = "no database: access control cannot apply"


def _primary_write(name: str, note: str = "") -> MethodSpec:
    """A write without database context: served by the primary; there is no database to check access on."""
    return MethodSpec(name, Access.WRITE, Route.PRIMARY, note=f"{note}; {_NO_DB}" if note else _NO_DB)


def _catalog(name: str, note: str) -> MethodSpec:
    """Catalog namespace change: primary only, gated like database creation; names no database."""
    return MethodSpec(name, Access.CREATE_CATALOG, Route.PRIMARY, note=note)


def _create(name: str, note: str) -> MethodSpec:
    """Database (namespace) creation: primary only, needs a *_CREATE* access type."""
    return MethodSpec(name, Access.CREATE_DATABASE, Route.PRIMARY, note=note)


def _fanout(name: str, merge: Merge, *db_args: DbField, result_names: NameForm | None = None, note: str = ""
            ) -> MethodSpec:
    """Sent to every member in parallel; results merged by ``merge``."""
    return MethodSpec(name, Access.READ, Route.FANOUT, db_args, result_names, note, merge=merge)


# Reasons shared by several entries.
_TXN_SCOPED = "the transaction lives on the primary (open_txns has no database)"
_TABLE_ID_ONLY = ("names its table by numeric id only, which cannot be routed: a federated table's id may name "
                  "an unrelated table on the primary")
_LOCK_ID = ("lock ids are private to the metastore that granted them: a federated member's ids are shown with "
            "the member's slot in their top 16 bits, so the id names its metastore on any connection")
_COMPACTOR = "compactor-internal (HMS-side Initiator/Worker/Cleaner); routed by the compaction's database"
_ACID_FEDERATED = ("ACID on a federated database only works when that member also runs the transaction; "
                   "routed to the database's member so that a mismatch fails loudly instead of writing "
                   "write-id state for a foreign table into the primary")


# --------------------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------------------

_SPECS: tuple[MethodSpec, ...] = (
    # ---- fb303 (FacebookService) -----------------------------------------------------------------------------
    _primary_read("getName"),
    _primary_read("getVersion"),
    _primary_read("getStatus"),
    _primary_read("getStatusDetails"),
    _primary_read("aliveSince"),
    _primary_read("getCounters"),
    _primary_read("getCounter"),
    _primary_write("setOption", "fb303 option of the primary's handler"),
    _primary_read("getOption"),
    _primary_read("getOptions"),
    _primary_read("getCpuProfile"),
    _primary_read("reinitialize", "oneway; a no-op in HMS (FacebookBase)"),
    replace(_primary_read("shutdown", "oneway; HiveMetaStoreClient.close() sends it on every disconnect and HMS "
                                      "only releases that connection's RawStore, so it must never be refused"),
            never_limited=True),
    # ---- session, configuration, misc ------------------------------------------------------------------------
    _primary_read("getMetaConf"),
    _primary_write("setMetaConf", "metastore conf of the client's session on the primary"),
    _primary_read("get_properties", "Hive 4 property store"),
    _primary_write("set_properties", "Hive 4 property store"),
    _primary_read("get_config_value"),
    MethodSpec("set_ugi", Access.READ, Route.IDENTITY, never_shed=True, never_limited=True,
               note="identity of the connection: answered by the primary (its group list) and replayed to each "
                    "member when waggle first connects to it as that user; never shed, so that no call runs "
                    "upstream as waggle's own user"),
    _primary_read("flushCache", "clears the primary's object cache only; changes no metadata"),
    _primary_read("get_metastore_db_uuid", "the primary's backing-database uuid"),
    # ---- catalogs ------------------------------------------------------------------------------------------------
    _catalog("create_catalog", "catalog namespace change: gated like database creation (primary with a *_CREATE* "
                              "access type); names no database"),
    _catalog("alter_catalog", "catalog namespace change: gated like database creation; names no database"),
    _primary_read("get_catalog"),
    _primary_read("get_catalogs"),
    _catalog("drop_catalog", "catalog namespace change: gated like database creation; names no database"),
    # ---- databases -----------------------------------------------------------------------------------------------
    replace(_create("create_database", "always the primary; Database.name is the new database; with "
                                       "waggle.remote.* parameters, a link (remote databases)"),
            link=LinkCall(LinkOp.CREATE, ("database",))),
    replace(_create("create_database_req", "Hive 4; always the primary; CreateDatabaseRequest.databaseName is "
                                           "the new database; a REMOTE one (or waggle.remote.* parameters) is a link"),
            link=LinkCall(LinkOp.CREATE, ("createDatabaseRequest",))),
    _database_read("get_database", db("name")),
    _database_read("get_database_req", note="Hive 4; GetDatabaseRequest.name"),
    replace(_write("drop_database", db("name"), note="a link's name drops the link only, in the primary"),
            link=LinkCall(LinkOp.DROP, ("name",))),
    replace(_write("drop_database_req", note="Hive 4; DropDatabaseRequest.name; a link's name drops the link only, "
                                             "in the primary"),
            link=LinkCall(LinkOp.DROP, ("req", "name"))),
    _fanout("get_databases", Merge.DATABASE_NAMES, db_pattern("pattern"), result_names=NameForm.NAME,
            note="Hive 3/4 clients send get_databases('@hive#') for all databases"),
    _fanout("get_all_databases", Merge.DATABASE_NAMES, result_names=NameForm.NAME),
    _write("alter_database", db("dbname"), note="also Database.name of the new definition"),
    _write("alter_database_req", note="Hive 4; AlterDatabaseRequest.oldDbName and newDb.name"),
    # ---- data connectors (Hive 4) --------------------------------------------------------------------------------
    *_connectors((
        (_primary_write("create_dataconnector_req", "Hive 4 data connector"),
         ConnectorCall(ConnectorOp.CREATE, (("connectorReq", "connector"),))),
        (_primary_read("get_dataconnector_req", "Hive 4 data connector"),
         ConnectorCall(ConnectorOp.GET, (("request", "connectorName"),))),
        (_primary_write("drop_dataconnector_req", "Hive 4 data connector"),
         ConnectorCall(ConnectorOp.DROP, (("dropDcReq", "connectorName"),))),
        (_primary_read("get_dataconnectors", "Hive 4; connector names, not databases"),
         ConnectorCall(ConnectorOp.LIST)),
        (_primary_write("alter_dataconnector_req", "Hive 4 data connector"),
         ConnectorCall(ConnectorOp.ALTER, (("alterReq", "connectorName"), ("alterReq", "newConnector")))),
        (_primary_write("create_dataconnector", "Hive 4 data connector"),
         ConnectorCall(ConnectorOp.CREATE, (("connector",),))),
        (_primary_write("drop_dataconnector", "Hive 4 data connector"), ConnectorCall(ConnectorOp.DROP, (("name",),))),
        (_primary_write("alter_dataconnector", "Hive 4 data connector"),
         ConnectorCall(ConnectorOp.ALTER, (("name",), ("connector",)))),
    )),
    # ---- types (legacy) ----------------------------------------------------------------------------------------
    _primary_read("get_type"),
    _primary_write("create_type"),
    _primary_write("drop_type"),
    _primary_read("get_type_all"),
    # ---- tables ----------------------------------------------------------------------------------------------
    _table_read("get_fields", db("db_name")),
    _table_read("get_fields_with_environment_context", db("db_name")),
    _table_read("get_fields_req", note="Hive 4"),
    _table_read("get_schema", db("db_name"), note="table columns, not the schema registry"),
    _table_read("get_schema_with_environment_context", db("db_name")),
    _table_read("get_schema_req", note="Hive 4"),
    replace(_write("create_table", note="Table.dbName; waggle.remote.table makes a remote table"),
            link=LinkCall(LinkOp.CREATE_TABLE, ("tbl",))),
    replace(_write("create_table_with_environment_context",
                   note="Table.dbName; waggle.remote.table makes a remote table"),
            link=LinkCall(LinkOp.CREATE_TABLE, ("tbl",))),
    _write("create_table_with_constraints",
           note="Table.dbName and every constraint's table_db; a foreign key's pktable_db is also checked"),
    replace(_write("create_table_req", note="Hive 4; CreateTableRequest.table.dbName and the constraints"),
            link=LinkCall(LinkOp.CREATE_TABLE, ("request", "table"))),
    _read("translate_table_dryrun", note="Hive 4; returns the table as it would be created, changes nothing"),
    replace(_write("drop_table", db("dbname"), note="a remote table's stub is dropped, never the remote table"),
            link=LinkCall(LinkOp.DROP_TABLE, ())),
    replace(_write("drop_table_with_environment_context", db("dbname"),
                   note="a remote table's stub is dropped, never the remote table"),
            link=LinkCall(LinkOp.DROP_TABLE, ())),
    _write("drop_table_req", note="Hive 4"),
    _write("truncate_table", db("dbName")),
    _write("truncate_table_req", note="Hive 4"),
    _listing("get_tables", db("db_name"), cached=Cached.DATABASE),
    _listing("get_tables_by_type", db("db_name"), cached=Cached.DATABASE),
    _primary_read("get_all_materialized_view_objects_for_rewriting",
                  "no database argument: only the primary's materialized views are offered for rewriting"),
    _listing("get_materialized_views_for_rewriting", db("db_name")),
    _fanout("get_table_meta", Merge.TABLE_METAS, db_pattern("db_patterns"),
            note="db_patterns may be '@cat#pattern'; TableMeta.dbName rewritten per member"),
    _listing("get_all_tables", db("db_name"), cached=Cached.DATABASE),
    _read("get_tables_ext", note="Hive 4; GetTablesExtRequest.database is an exact name"),
    _table_read("get_table_req"),
    _database_read("get_table_objects_by_name_req"),
    _read("get_materialization_invalidation_info",
          note="CreationMetadata.dbName routes; tablesUsed are 'db.table' names"),
    _write("update_creation_metadata", db("dbname")),
    _listing("get_table_names_by_filter", db("dbname"), cached=Cached.DATABASE),
    replace(_write("alter_table", db("dbname"), note="also new_tbl.dbName (rename target)"),
            pointer_guard=PointerGuard(("dbname",), ("tbl_name",), ("new_tbl",))),
    replace(_write("alter_table_with_environment_context", db("dbname"),
                   note="also new_tbl.dbName (rename target)"),
            pointer_guard=PointerGuard(("dbname",), ("tbl_name",), ("new_tbl",),
                                       context=("environment_context",))),
    replace(_write("alter_table_with_cascade", db("dbname"), note="also new_tbl.dbName (rename target)"),
            pointer_guard=PointerGuard(("dbname",), ("tbl_name",), ("new_tbl",))),
    replace(_write("alter_table_req", note="Hive 4; AlterTableRequest.dbName and table.dbName (rename target)"),
            pointer_guard=PointerGuard(("req", "dbName"), ("req", "tableName"), ("req", "table"),
                                       ("req", "catName"), ("req", "environmentContext"))),
    _table_read("get_table", db("dbname"), note="removed in Hive 4.0.1 (HIVE-26537); still sent by Spark's Hive 2.3"),
    _database_read("get_table_objects_by_name", db("dbname")),
    # ---- constraints -----------------------------------------------------------------------------------------
    _write("drop_constraint"),
    _write("add_primary_key"),
    _write("add_foreign_key", note="pktable_db is only referenced but is checked for write access too (strict); "
                                   "both tables must live in one member"),
    _write("add_unique_constraint"),
    _write("add_not_null_constraint"),
    _write("add_default_constraint"),
    _write("add_check_constraint"),
    _read("get_primary_keys"),
    _read("get_foreign_keys", note="parent_db_name or foreign_db_name (either may be null)"),
    _read("get_unique_constraints"),
    _read("get_not_null_constraints"),
    _read("get_default_constraints"),
    _read("get_check_constraints"),
    _read("get_all_table_constraints", note="Hive 4"),
    # ---- partitions ------------------------------------------------------------------------------------------
    _write("add_partition", note="Partition.dbName"),
    _write("add_partition_with_environment_context", note="Partition.dbName"),
    _write("add_partitions", note="every Partition.dbName"),
    _write("add_partitions_pspec", note="every PartitionSpec.dbName and its nested partitions"),
    _write("append_partition", db("db_name")),
    _write("add_partitions_req", note="AddPartitionsRequest.dbName and every parts[].dbName"),
    _write("append_partition_with_environment_context", db("db_name")),
    _write("append_partition_req", note="Hive 4"),
    _write("append_partition_by_name", db("db_name")),
    _write("append_partition_by_name_with_environment_context", db("db_name")),
    _write("drop_partition", db("db_name")),
    _write("drop_partition_with_environment_context", db("db_name")),
    _write("drop_partition_req", note="Hive 4"),
    _write("drop_partition_by_name", db("db_name")),
    _write("drop_partition_by_name_with_environment_context", db("db_name")),
    _write("drop_partitions_req"),
    _table_read("get_partition", db("db_name")),
    _table_read("get_partition_req", note="Hive 4"),
    _read("get_partition_with_auth", db("db_name")),
    _table_read("get_partition_by_name", db("db_name")),
    _table_read("get_partitions", db("db_name")),
    _table_read("get_partitions_req", note="Hive 4"),
    _read("get_partitions_with_auth", db("db_name")),
    _read("get_partitions_pspec", db("db_name")),
    _table_read("get_partition_names", db("db_name")),
    _table_read("fetch_partition_names_req", note="Hive 4"),
    _read("get_partition_values"),
    _table_read("get_partitions_ps", db("db_name")),
    _read("get_partitions_ps_with_auth", db("db_name")),
    _read("get_partitions_ps_with_auth_req", note="Hive 4"),
    _table_read("get_partition_names_ps", db("db_name")),
    _read("get_partition_names_ps_req", note="Hive 4"),
    _table_read("get_partition_names_req", note="Hive 4"),
    _table_read("get_partitions_by_filter", db("db_name")),
    _read("get_partitions_by_filter_req", note="Hive 4"),
    _read("get_part_specs_by_filter", db("db_name")),
    _table_read("get_partitions_by_expr"),
    _read("get_partitions_spec_by_expr", note="Hive 4"),
    _table_read("get_num_partitions_by_filter", db("db_name")),
    _table_read("get_partitions_by_names", db("db_name")),
    _table_read("get_partitions_by_names_req", note="Hive 4"),
    _read("get_partitions_with_specs", note="Hive 4"),
    _write("exchange_partition", db("source_db"), db("dest_db"),
           note="moves partitions between two tables: both databases must live in one member and be writable"),
    _write("exchange_partitions", db("source_db"), db("dest_db"),
           note="moves partitions between two tables: both databases must live in one member and be writable"),
    _write("alter_partition", db("db_name"), note="also new_part.dbName"),
    _write("alter_partitions", db("db_name"), note="also every new_parts[].dbName"),
    _write("alter_partitions_with_environment_context", db("db_name"), note="also every new_parts[].dbName"),
    _write("alter_partitions_req", note="Hive 4; AlterPartitionsRequest.dbName and partitions[].dbName"),
    _write("alter_partition_with_environment_context", db("db_name"), note="also new_part.dbName"),
    _write("rename_partition", db("db_name"), note="also new_part.dbName"),
    _write("rename_partition_req", note="Hive 4"),
    replace(_primary_read("partition_name_has_valid_characters", "pure check of partition values"),
            family=Family.READS),
    replace(_primary_read("partition_name_to_vals", "pure string parsing"), family=Family.READS),
    replace(_primary_read("partition_name_to_spec", "pure string parsing"), family=Family.READS),
    _write("markPartitionForEvent", db("db_name")),
    _read("isPartitionMarkedForEvent", db("db_name")),
    # ---- statistics ------------------------------------------------------------------------------------------
    _write("update_table_column_statistics", note="ColumnStatistics.statsDesc.dbName"),
    _write("update_partition_column_statistics", note="ColumnStatistics.statsDesc.dbName"),
    _write("update_table_column_statistics_req", note="Hive 4; colStats[].statsDesc.dbName"),
    _write("update_partition_column_statistics_req", note="Hive 4; colStats[].statsDesc.dbName"),
    _primary_write("update_transaction_statistics", f"Hive 4; {_TABLE_ID_ONLY}"),
    _read("get_table_column_statistics", db("db_name")),
    _read("get_partition_column_statistics", db("db_name")),
    _read("get_table_statistics_req"),
    _read("get_partitions_statistics_req"),
    _read("get_aggr_stats_for"),
    _write("set_aggr_stats_for", note="colStats[].statsDesc.dbName"),
    _write("delete_partition_column_statistics", db("db_name")),
    _write("delete_table_column_statistics", db("db_name")),
    # ---- functions -------------------------------------------------------------------------------------------
    _write("create_function", note="Function.dbName"),
    _write("drop_function", db("dbName")),
    _write("alter_function", db("dbName"), note="also newFunc.dbName"),
    _read("get_functions", db("dbName")),
    _read("get_function", db("dbName")),
    _fanout("get_all_functions", Merge.FUNCTIONS, note="Hive session start; Function.dbName rewritten per member"),
    # ---- roles and privileges --------------------------------------------------------------------------------
    _primary_write("create_role", "roles are global"),
    _primary_write("drop_role", "roles are global"),
    _primary_read("get_role_names"),
    _primary_write("grant_role", "roles are global"),
    _primary_write("revoke_role", "roles are global"),
    _primary_read("list_roles"),
    _primary_write("grant_revoke_role", "roles are global"),
    _primary_read("get_principals_in_role"),
    _primary_read("get_role_grants_for_principal"),
    _read("get_privilege_set", note="HiveObjectRef.dbName (objectName for DATABASE objects); a GLOBAL object "
                                    "has no database and goes to the primary"),
    _read("list_privileges", note="HiveObjectRef.dbName (objectName for DATABASE objects); a GLOBAL object "
                                  "has no database and goes to the primary"),
    _write("grant_privileges", note="every privileges[].hiveObject; GLOBAL objects name no database"),
    _write("revoke_privileges", note="every privileges[].hiveObject; GLOBAL objects name no database"),
    _write("grant_revoke_privileges", note="every privileges.privileges[].hiveObject"),
    _write("refresh_privileges", note="objToRefresh and grantRequest objects"),
    # ---- delegation tokens and master keys -------------------------------------------------------------------
    *_tokens((
        (_primary_read("get_delegation_token", "issues a token but changes no metadata; Kerberos clients need it"),
         TokenCall(TokenOp.ISSUE, ("token_owner", "renewer_kerberos_principal_name"))),
        (_primary_write("renew_delegation_token"), TokenCall(TokenOp.RENEW, ("token_str_form",))),
        (_primary_write("cancel_delegation_token"), TokenCall(TokenOp.CANCEL, ("token_str_form",))),
        *((_primary_write(name), TokenCall(TokenOp.STORE)) for name in (
            "add_token", "remove_token", "add_master_key", "update_master_key", "remove_master_key")),
        *((_primary_read(name), TokenCall(TokenOp.STORE)) for name in (
            "get_token", "get_all_token_identifiers", "get_master_keys")),
    )),
    # ---- transactions and write ids --------------------------------------------------------------------------
    _primary_read("get_open_txns"),
    _primary_read("get_open_txns_info"),
    replace(_primary_write("open_txns", "readers open transactions too"), txn=Txn.OPEN),
    replace(_primary_write("abort_txn"), txn=Txn.END),
    replace(_primary_write("abort_txns"), txn=Txn.END),
    MethodSpec("commit_txn", Access.WRITE, Route.PRIMARY, txn=Txn.END,
               note=f"{_TXN_SCOPED}; usually names no database, so {_NO_DB}; writeEventInfos[].database and "
                    "replLastIdInfo.database (replication only) are rewritten and checked but do not route"),
    _primary_read("get_latest_txnid_in_conflict"),
    _write("repl_tbl_writeid_state", note=f"replication; {_ACID_FEDERATED}"),
    _read("get_valid_write_ids",
          note=f"fullTableNames are 'db.table'; all must live in one member; {_ACID_FEDERATED}"),
    _primary_write("add_write_ids_to_min_history",
                   f"Hive 4; {_TXN_SCOPED}; the writeIds map is keyed by 'db.table' names, which a DbField "
                   "cannot describe (map keys): not rewritten"),
    _write("allocate_table_write_ids", note=_ACID_FEDERATED),
    _read("get_max_allocated_table_write_id"),
    _write("seed_write_id", note=f"replication; {_ACID_FEDERATED}"),
    _primary_write("seed_txn_id", "replication"),
    _write("add_dynamic_partitions", note=_ACID_FEDERATED),
    _primary_read("get_open_txns_req", "Hive 4"),
    _read("get_all_write_event_info", note="replication; dbName is an optional filter (none: the primary); "
                                           "write events are stored with the table (add_write_notification_log)"),
    # ---- locks -----------------------------------------------------------------------------------------------
    MethodSpec("lock", Access.LOCK, Route.DATABASE, never_limited=True,
               note="LockComponent.dbname of every component; all components must live in one member; "
                    "SHARED_READ components need read access only; never rate-limited: Hive's client never "
                    "retries it (IMetaStoreClient.lock is @RetrySemantics.CannotRetry), so a refusal fails the "
                    "query"),
    MethodSpec("check_lock", Access.READ, Route.LOCK_ID, note=_LOCK_ID, never_limited=True),
    MethodSpec("unlock", Access.READ, Route.LOCK_ID, note=f"releasing a granted lock; {_LOCK_ID}",
               releases_lock=True, never_limited=True),
    _read("show_locks", note="ShowLocksRequest.dbname is an optional filter (none: the primary's locks)"),
    MethodSpec("heartbeat", Access.READ, Route.LOCK_ID, never_limited=True,
               note=f"keep-alive by lock / txn id, needed by readers too; {_LOCK_ID}"),
    replace(_primary_read("heartbeat_txn_range", "keep-alive by txn id range"), never_limited=True),
    _write("get_lock_materialization_rebuild", db("dbName"),
           note="despite its name it takes the rebuild lock of a materialized view: a write"),
    _write("heartbeat_lock_materialization_rebuild", db("dbName"),
           note="keeps a materialized-view rebuild lock alive: part of a write"),
    # ---- compaction ------------------------------------------------------------------------------------------
    _primary_write("abort_Compactions", "Hive 4; compaction ids only"),
    _write("compact", note="CompactionRequest.dbname"),
    _write("compact2", note="CompactionRequest.dbname"),
    _read("show_compact", note="ShowCompactRequest.dbName is an optional filter (none: the primary's queue)"),
    _write("submit_for_cleanup", note=_COMPACTOR),
    _primary_write("find_next_compact", "compactor-internal: claims the next queued compaction of the primary"),
    _primary_write("find_next_compact2", "compactor-internal: claims the next queued compaction of the primary"),
    _write("update_compactor_state", note=_COMPACTOR),
    _read("find_columns_with_stats", note=_COMPACTOR),
    _write("mark_cleaned", note=_COMPACTOR),
    _write("mark_compacted", note=_COMPACTOR),
    _write("mark_failed", note=_COMPACTOR),
    _write("mark_refused", note=_COMPACTOR),
    _write("update_compaction_metrics_data", note=_COMPACTOR),
    _write("remove_compaction_metrics_data", note=_COMPACTOR),
    _primary_write("set_hadoop_jobid", "compaction id only"),
    _read("get_latest_committed_compaction_info"),
    # ---- notifications and replication -----------------------------------------------------------------------
    MethodSpec("get_next_notification", Access.READ, Route.PRIMARY, log=LogOp.NEXT,
               note="the primary's log, or the federation's merged log (notification-log: federated) with each "
                    "event's names rewritten; the request's dbName (Hive 4) filters"),
    MethodSpec("get_current_notificationEventId", Access.READ, Route.PRIMARY, log=LogOp.CURRENT,
               note="the primary's event sequence, or the merged log's (notification-log: federated)"),
    MethodSpec("get_notification_events_count", Access.READ, Route.PRIMARY, log=LogOp.COUNT,
               note="counts in the primary's log, or the merged log's (notification-log: federated); dbName "
                    "filters"),
    _write("fire_listener_event", note="fires the listeners of the metastore owning the table"),
    _write("add_write_notification_log", note="WriteNotificationLogRequest.db"),
    _write("add_write_notification_log_in_batch", note="Hive 4; db and every requestList[].db"),
    _primary_write("cm_recycle", "change-management paths only"),
    _primary_write("add_replication_metrics", "Hive 4"),
    _primary_read("get_replication_metrics", "Hive 4"),
    # ---- file metadata ---------------------------------------------------------------------------------------
    _primary_read("get_file_metadata_by_expr", "file ids only"),
    _primary_read("get_file_metadata", "file ids only"),
    _primary_write("put_file_metadata", "file ids only"),
    _primary_write("clear_file_metadata", "file ids only"),
    _write("cache_file_metadata", note="CacheFileMetadataRequest.dbName"),
    # ---- workload management (resource plans) ----------------------------------------------------------------
    _primary_write("create_resource_plan", "workload management is global"),
    _primary_read("get_resource_plan"),
    _primary_read("get_active_resource_plan"),
    _primary_read("get_all_resource_plans"),
    _primary_write("alter_resource_plan", "workload management is global"),
    _primary_read("validate_resource_plan"),
    _primary_write("drop_resource_plan", "workload management is global"),
    _primary_write("create_wm_trigger", "workload management is global"),
    _primary_write("alter_wm_trigger", "workload management is global"),
    _primary_write("drop_wm_trigger", "workload management is global"),
    _primary_read("get_triggers_for_resourceplan"),
    _primary_write("create_wm_pool", "workload management is global"),
    _primary_write("alter_wm_pool", "workload management is global"),
    _primary_write("drop_wm_pool", "workload management is global"),
    _primary_write("create_or_update_wm_mapping", "workload management is global"),
    _primary_write("drop_wm_mapping", "workload management is global"),
    _primary_write("create_or_drop_wm_trigger_to_pool_mapping", "workload management is global"),
    # ---- schema registry -------------------------------------------------------------------------------------
    _write("create_ischema", note="ISchema.dbName"),
    _write("alter_ischema", note="name.dbName and newSchema.dbName"),
    _read("get_ischema"),
    _write("drop_ischema"),
    _write("add_schema_version", note="SchemaVersion.schema.dbName"),
    _read("get_schema_version"),
    _read("get_schema_latest_version"),
    _read("get_schema_all_versions"),
    _write("drop_schema_version"),
    _primary_read("get_schemas_by_cols", "searches by column, names no database: only the primary's schemas"),
    _write("map_schema_version_to_serde"),
    _write("set_schema_version_state"),
    _primary_write("add_serde", "serdes are global"),
    _primary_read("get_serde"),
    # ---- runtime stats and scheduled queries -----------------------------------------------------------------
    _primary_write("add_runtime_stats"),
    _primary_read("get_runtime_stats"),
    _primary_write("scheduled_query_poll", "claims the next due scheduled query (changes its state)"),
    _primary_write("scheduled_query_maintenance", "the query text is SQL and is not rewritten"),
    _primary_write("scheduled_query_progress"),
    _primary_read("get_scheduled_query"),
    # ---- stored procedures and packages (Hive 4) -------------------------------------------------------------
    _write("create_stored_procedure", note="Hive 4; StoredProcedure.dbName"),
    _read("get_stored_procedure", note="Hive 4"),
    _write("drop_stored_procedure", note="Hive 4"),
    _read("get_all_stored_procedures", note="Hive 4; dbName is an optional filter (none: the primary)"),
    _read("find_package", note="Hive 4"),
    _write("add_package", note="Hive 4"),
    _read("get_all_packages", note="Hive 4; dbName is an optional filter (none: the primary)"),
    _write("drop_package", note="Hive 4"),
    # ---- indexes (Hive 2.x legacy) ---------------------------------------------------------------------------
    _write("add_index", note="Hive 2 legacy; Index.dbName and index_table.dbName"),
    _write("alter_index", db("dbname"), note="Hive 2 legacy; also new_idx.dbName"),
    _write("drop_index_by_name", db("db_name"), note="Hive 2 legacy"),
    _read("get_index_by_name", db("db_name"), note="Hive 2 legacy"),
    _read("get_indexes", db("db_name"), note="Hive 2 legacy"),
    _read("get_index_names", db("db_name"), note="Hive 2 legacy"),
)


# --------------------------------------------------------------------------------------------------------------
# Facts derived from the IDL, once, when the table is built: where each method carries lock ids, lock
# components, table names and catalog names. Dispatch reads them from the entry; nothing guesses at call time.
# --------------------------------------------------------------------------------------------------------------

_DB_ATTRS = ("dbname", "db_name", "dbName")
_TABLE_ATTRS = ("tbl_name", "tblName", "tableName", "table_name", "tablename", "tbl")
_ARGS_TABLE_ATTRS = (*_TABLE_ATTRS, "name")  # drop_table(dbname, name)


def _io_classes(name: str) -> tuple[type | None, type | None]:
    for service in (ThriftHiveMetastore, FacebookService):
        args = getattr(service, f"{name}_args", None)
        if isinstance(args, type):
            return args, getattr(service, f"{name}_result", None)
    return None, None


def _string_attr(cls: type, candidates: tuple[str, ...]) -> str | None:
    names = {f.attr for f in specs.fields(cls) if f.is_string}
    return next((a for a in candidates if a in names), None)


def _struct_args(args: type) -> list[tuple[str, type]]:
    """The struct-typed arguments of an args class (request structs), with their classes."""
    return [(f.attr, f.type_args[0]) for f in specs.fields(args) if f.ttype == TType.STRUCT]


def _table_refs(args: type) -> tuple[TableRef, ...]:
    refs = []
    db_attr, table_attr = _string_attr(args, _DB_ATTRS), _string_attr(args, _ARGS_TABLE_ATTRS)
    if db_attr and table_attr:
        refs.append(TableRef((db_attr,), (table_attr,)))
    for attr, struct in _struct_args(args):
        db_attr, table_attr = _string_attr(struct, _DB_ATTRS), _string_attr(struct, _TABLE_ATTRS)
        if db_attr and table_attr:
            refs.append(TableRef((attr, db_attr), (attr, table_attr)))
    return tuple(refs)


def _lock_id(args: type) -> Path:
    for attr, struct in _struct_args(args):
        if specs.field_named(struct, "lockid") is not None:
            return attr, "lockid"
    return ()


def _lock_components(args: type) -> Path:
    for attr, struct in _struct_args(args):
        for f in specs.fields(struct):
            if f.struct is not None and f.struct.__name__ == "LockComponent":
                return attr, f.attr
    return ()


def _granted_lock(result: type | None) -> Path:
    success = specs.field_named(result, "success") if result is not None else None
    if success is not None and success.struct is not None and specs.field_named(success.struct, "lockid"):
        return "success", "lockid"
    return ()


#: the fields of a reply's structs that hold a lock id (the external id: what check_lock and unlock take)
_LOCK_ID_ATTRS = ("lockid", "blockedByExtId")


def _shown_lock_ids(result: type | None) -> tuple[Path, ...]:
    """The lock ids in a successful reply: fields of its ``success`` struct, or of the structs it lists."""
    success = specs.field_named(result, "success") if result is not None else None
    if success is None or success.struct is None:
        return ()
    paths: list[Path] = [("success", a) for a in _LOCK_ID_ATTRS if specs.field_named(success.struct, a)]
    for f in specs.fields(success.struct):
        if f.struct is not None:
            paths += [("success", f.attr, a) for a in _LOCK_ID_ATTRS if specs.field_named(f.struct, a)]
    return tuple(paths)


def _catalog_fields(args: type) -> tuple[Path, ...]:
    return tuple((attr, f.attr) for attr, struct in _struct_args(args)
                 for f in specs.fields(struct) if f.is_string and f.attr in CATALOG_ATTRS)


def _family(spec: MethodSpec) -> Family:
    """The family rate limits count a call in, unless its entry names one: a call that changes anything is a
    write (a lock request included); a read that lists names (a fan-out, a table listing) is a listing; a read
    whose name speaks of partitions is a partitions read; any other call is a read."""
    if spec.family is not None:
        return spec.family
    if spec.access is not Access.READ:
        return Family.WRITES
    if spec.merge is not None or spec.lists_tables or spec.result_names is not None:
        return Family.LISTINGS
    if "partition" in spec.name.lower():
        return Family.PARTITIONS
    return Family.READS


#: words of a method's name that make it an administrator's call (roles, grants, catalogs, keys, resource plans)
_ADMIN_WORDS = ("grant", "revoke", "role", "privilege", "catalog", "master_key", "token", "resource_plan", "wm_",
                "schema_version", "ischema", "serde", "runtime_stats", "scheduled_query", "replication", "package")


def _privilege(spec: MethodSpec) -> Privilege:
    """The privilege a call needs on what it names, unless its entry names one: a read needs ``select``; creating
    a database ``create``; a write's name says the rest: an administrator's object (a role, a grant, a catalog)
    needs ``admin``; a partition's change (added, dropped, altered, its statistics) ``update``, as data does; a
    constraint ``alter``; creating, dropping, altering or renaming a database, table or function ``create``,
    ``drop`` or ``alter``; anything else (statistics, events, write ids, a lock) ``update``."""
    if spec.privilege is not None:
        return spec.privilege
    name = spec.name.lower()
    if spec.access is Access.READ:
        return Privilege.SELECT
    if spec.access is Access.CREATE_DATABASE:
        return Privilege.CREATE
    if spec.access is Access.CREATE_CATALOG or any(w in name for w in _ADMIN_WORDS):
        return Privilege.ADMIN
    if spec.access is Access.LOCK or "partition" in name:
        return Privilege.UPDATE
    if ("constraint" in name and not name.startswith("create_")) or name.endswith(("_primary_key", "_foreign_key")):
        return Privilege.ALTER
    for prefix, privilege in (("create_", Privilege.CREATE), ("drop_", Privilege.DROP), ("alter_", Privilege.ALTER),
                              ("rename", Privilege.ALTER)):
        if name.startswith(prefix):
            return privilege
    return Privilege.UPDATE


def _derive(spec: MethodSpec) -> MethodSpec:
    spec = replace(spec, family=_family(spec), privilege=_privilege(spec))
    args, result = _io_classes(spec.name)
    if args is None:
        return spec
    return replace(
        spec,
        lock_id=_lock_id(args) if spec.route is Route.LOCK_ID else (),
        lock_components=_lock_components(args) if spec.access is Access.LOCK else (),
        granted_lock=_granted_lock(result) if spec.access is Access.LOCK else (),
        shown_lock_ids=_shown_lock_ids(result),
        table_refs=_table_refs(args),
        catalog_fields=_catalog_fields(args),
        bridge=BRIDGES.get(spec.name),
    )


def _by_name(entries: tuple[MethodSpec, ...]) -> Mapping[str, MethodSpec]:
    table: dict[str, MethodSpec] = {}
    for spec in entries:
        if spec.name in table:
            raise ValueError(f"method {spec.name!r} is listed twice in the method table")
        table[spec.name] = _derive(spec)
    return MappingProxyType(table)


METHODS: Mapping[str, MethodSpec] = _by_name(_SPECS)

#: the listing of one metastore's databases (MANUAL mode learns which member owns which database with it)
LIST_ALL_DATABASES = METHODS["get_all_databases"]


# --------------------------------------------------------------------------------------------------------------
# Struct fields that carry database names (request and response structs). Only each struct's OWN string,
# list<string> and set<string> fields: nested structs are reached through waggle.hms.specs.
# --------------------------------------------------------------------------------------------------------------

STRUCT_DB_FIELDS: Mapping[str, tuple[DbField, ...]] = MappingProxyType({
    # databases
    "Database": (db("name"),),
    "CreateDatabaseRequest": (db("databaseName"),),
    "GetDatabaseRequest": (db("name"),),
    "DropDatabaseRequest": (db("name"),),
    "AlterDatabaseRequest": (db("oldDbName"),),
    # tables
    "Table": (db("dbName"), view_sql("viewOriginalText"), view_sql("viewExpandedText")),
    "TableMeta": (db("dbName"),),
    "GetTableRequest": (db("dbName"),),
    "GetTablesRequest": (db("dbName"),),
    "GetTablesExtRequest": (db("database"),),
    "DropTableRequest": (db("dbName"),),
    "AlterTableRequest": (db("dbName"),),
    "TruncateTableRequest": (db("dbName"),),
    "GetFieldsRequest": (db("dbName"),),
    "GetSchemaRequest": (db("dbName"),),
    "CreationMetadata": (db("dbName"), qualified("tablesUsed", is_list=True)),
    # partitions
    "Partition": (db("dbName"),),
    "PartitionSpec": (db("dbName"),),
    "AddPartitionsRequest": (db("dbName"),),
    "AppendPartitionsRequest": (db("dbName"),),
    "DropPartitionRequest": (db("dbName"),),
    "DropPartitionsRequest": (db("dbName"),),
    "AlterPartitionsRequest": (db("dbName"),),
    "RenamePartitionRequest": (db("dbName"),),
    "GetPartitionRequest": (db("dbName"),),
    "PartitionsRequest": (db("dbName"),),
    "PartitionsByExprRequest": (db("dbName"),),
    "PartitionValuesRequest": (db("dbName"),),
    "GetPartitionsByFilterRequest": (db("dbName"),),
    "GetPartitionsByNamesRequest": (db("db_name"),),
    "GetPartitionsPsWithAuthRequest": (db("dbName"),),
    "GetPartitionNamesPsRequest": (db("dbName"),),
    "GetPartitionsRequest": (db("dbName"),),
    # statistics
    "ColumnStatisticsDesc": (db("dbName"),),
    "TableStatsRequest": (db("dbName"),),
    "PartitionsStatsRequest": (db("dbName"),),
    # constraints
    "SQLPrimaryKey": (db("table_db"),),
    "SQLForeignKey": (db("pktable_db"), db("fktable_db")),
    "SQLUniqueConstraint": (db("table_db"),),
    "SQLNotNullConstraint": (db("table_db"),),
    "SQLDefaultConstraint": (db("table_db"),),
    "SQLCheckConstraint": (db("table_db"),),
    "PrimaryKeysRequest": (db("db_name"),),
    "ForeignKeysRequest": (db("parent_db_name"), db("foreign_db_name")),
    "UniqueConstraintsRequest": (db("db_name"),),
    "NotNullConstraintsRequest": (db("db_name"),),
    "DefaultConstraintsRequest": (db("db_name"),),
    "CheckConstraintsRequest": (db("db_name"),),
    "AllTableConstraintsRequest": (db("dbName"),),
    "DropConstraintRequest": (db("dbname"),),
    # functions
    "Function": (db("dbName"),),
    # privileges
    "HiveObjectRef": (db("dbName"), object_name("objectName")),
    # transactions, write ids, locks
    "GetValidWriteIdsRequest": (qualified("fullTableNames", is_list=True),),
    "TableValidWriteIds": (qualified("fullTableName"),),
    "AllocateTableWriteIdsRequest": (db("dbName"),),
    "MaxAllocatedTableWriteIdRequest": (db("dbName"),),
    "SeedTableWriteIdsRequest": (db("dbName"),),
    "ReplTblWriteIdStateRequest": (db("dbName"),),
    "AddDynamicPartitions": (db("dbname"),),
    "WriteEventInfo": (db("database"),),
    "ReplLastIdInfo": (db("database"),),
    "GetAllWriteEventInfoRequest": (db("dbName"),),
    "BasicTxnInfo": (db("dbname"),),
    "LockComponent": (db("dbname"),),
    "ShowLocksRequest": (db("dbname"),),
    "ShowLocksResponseElement": (db("dbname"),),
    # compaction
    "CompactionRequest": (db("dbname"),),
    "ShowCompactRequest": (db("dbName"),),
    "ShowCompactResponseElement": (db("dbname"),),
    "CompactionInfoStruct": (db("dbname"),),
    "CompactionMetricsDataStruct": (db("dbname"),),
    "CompactionMetricsDataRequest": (db("dbName"),),
    "GetLatestCommittedCompactionInfoRequest": (db("dbname"),),
    # notifications and replication
    "NotificationEvent": (db("dbName"),),
    "NotificationEventRequest": (db("dbName"),),
    "NotificationEventsCountRequest": (db("dbName"),),
    "FireEventRequest": (db("dbName"),),
    "WriteNotificationLogRequest": (db("db"),),
    "WriteNotificationLogBatchRequest": (db("db"),),
    # file metadata
    "CacheFileMetadataRequest": (db("dbName"),),
    # schema registry
    "ISchema": (db("dbName"),),
    "ISchemaName": (db("dbName"),),
    # stored procedures and packages
    "StoredProcedure": (db("dbName"),),
    "StoredProcedureRequest": (db("dbName"),),
    "ListStoredProcedureRequest": (db("dbName"),),
    "Package": (db("dbName"),),
    "GetPackageRequest": (db("dbName"),),
    "AddPackageRequest": (db("dbName"),),
    "ListPackageRequest": (db("dbName"),),
    "DropPackageRequest": (db("dbName"),),
    # indexes (Hive 2 legacy)
    "Index": (db("dbName"),),
})


# --------------------------------------------------------------------------------------------------------------
# Fields and arguments whose name looks database-ish but that carry no database name.
# --------------------------------------------------------------------------------------------------------------

_CATALOG = "catalog name (bridged separately)"
_CATALOG_FIELDS = (
    "AddPackageRequest.catName", "AddPartitionsRequest.catName", "AllTableConstraintsRequest.catName",
    "AlterPartitionsRequest.catName", "AlterTableRequest.catName", "AppendPartitionsRequest.catalogName",
    "CheckConstraintsRequest.catName", "ColumnStatisticsDesc.catName", "CreateDatabaseRequest.catalogName",
    "CreationMetadata.catName", "Database.catalogName", "DefaultConstraintsRequest.catName",
    "DropConstraintRequest.catName", "DropDatabaseRequest.catalogName", "DropPackageRequest.catName",
    "DropPartitionRequest.catName", "DropPartitionsRequest.catName", "DropTableRequest.catalogName",
    "FireEventRequest.catName", "ForeignKeysRequest.catName", "Function.catName",
    "GetDatabaseRequest.catalogName", "GetFieldsRequest.catName", "GetPackageRequest.catName",
    "GetPartitionNamesPsRequest.catName", "GetPartitionRequest.catName", "GetPartitionsByFilterRequest.catName",
    "GetPartitionsPsWithAuthRequest.catName", "GetPartitionsRequest.catName", "GetSchemaRequest.catName",
    "GetTableRequest.catName", "GetTablesExtRequest.catalog", "GetTablesRequest.catName",
    "HiveObjectRef.catName", "ISchema.catName", "ISchemaName.catName", "ListPackageRequest.catName",
    "ListStoredProcedureRequest.catName", "NotNullConstraintsRequest.catName", "NotificationEvent.catName",
    "NotificationEventRequest.catName", "NotificationEventsCountRequest.catName", "Package.catName",
    "Partition.catName", "PartitionSpec.catName", "PartitionValuesRequest.catName",
    "PartitionsByExprRequest.catName", "PartitionsRequest.catName", "PartitionsStatsRequest.catName",
    "PrimaryKeysRequest.catName", "RenamePartitionRequest.catName", "ReplLastIdInfo.catalog",
    "SQLCheckConstraint.catName", "SQLDefaultConstraint.catName", "SQLForeignKey.catName",
    "SQLNotNullConstraint.catName", "SQLPrimaryKey.catName", "SQLUniqueConstraint.catName",
    "StoredProcedure.catName", "StoredProcedureRequest.catName", "Table.catName", "TableMeta.catName",
    "TableStatsRequest.catName", "UniqueConstraintsRequest.catName", "WriteNotificationLogBatchRequest.catalog",
    "update_creation_metadata(catName)",
)
_REPL_POLICY = ("replication policy ('db.*' / 'db.table' of the REPL LOAD target): an opaque key of the "
                "transaction map on the metastore running the transaction; not a routable name")

NOT_DB_FIELDS: Mapping[str, str] = MappingProxyType({
    **dict.fromkeys(_CATALOG_FIELDS, _CATALOG),
    # catalogs, connectors and other named objects
    "Catalog.name": "catalog name",
    "AlterCatalogRequest.name": "catalog name",
    "DropCatalogRequest.name": "catalog name",
    "GetCatalogRequest.name": "catalog name",
    "DataConnector.name": "data connector name",
    "drop_dataconnector(name)": "data connector name",
    "alter_dataconnector(name)": "data connector name",
    "Database.remote_dbname": "name of the database in the remote system behind a data connector (Hive 4)",
    "CreateDatabaseRequest.remote_dbname": "name of the database in the remote system behind a data connector",
    "FieldSchema.name": "column name",
    "Type.name": "type name",
    "get_type(name)": "type name",
    "get_type_all(name)": "type name",
    "SerDeInfo.name": "serde name",
    "StoredProcedure.name": "stored procedure name",
    "AppendPartitionsRequest.name": "partition name",
    "WMResourcePlan.name": "resource plan name",
    "WMNullableResourcePlan.name": "resource plan name",
    "get_config_value(name)": "configuration key",
    # schema registry
    "ISchema.name": "schema-registry schema name",
    "ISchemaName.schemaName": "schema-registry schema name",
    "ISchema.schemaGroup": "schema-registry group label",
    "SchemaVersion.name": "schema version name",
    "SchemaVersion.schemaText": "schema definition text (Avro, JSON, ...)",
    # table and function names / patterns next to a database argument
    "drop_table(name)": "table name",
    "drop_table_with_environment_context(name)": "table name",
    "get_tables(pattern)": "table-name pattern",
    "get_tables_by_type(pattern)": "table-name pattern",
    "get_table_meta(tbl_patterns)": "table-name pattern",
    "get_functions(pattern)": "function-name pattern",
    # replication and transactions
    "OpenTxnRequest.replPolicy": _REPL_POLICY,
    "AbortTxnRequest.replPolicy": _REPL_POLICY,
    "CommitTxnRequest.replPolicy": _REPL_POLICY,
    "AllocateTableWriteIdsRequest.replPolicy": _REPL_POLICY,
    "GetOpenTxnsResponse.abortedBits": "bitset of aborted transactions (binary)",
    "TableValidWriteIds.abortedBits": "bitset of aborted write ids (binary)",
})


# --------------------------------------------------------------------------------------------------------------
# database_of: the first database name in a decoded <method>_args object (for logging)
# --------------------------------------------------------------------------------------------------------------

_MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class _Path:
    """Attributes to follow from an args object to a database-bearing field (lists: their first element)."""

    attrs: Path
    field: DbField


def _db_field(cls: type, f: specs.Field) -> DbField | None:
    return next((d for d in STRUCT_DB_FIELDS.get(cls.__name__, ()) if d.attr == f.attr), None)


def _paths(args_class: type, spec: MethodSpec, max_depth: int = _MAX_DEPTH) -> tuple[_Path, ...]:
    """db_args first, then struct fields breadth-first (shallowest first), without revisiting a struct type.

    ``max_depth`` bounds how many structs deep the walk goes; the generated docs pass a larger one to list every
    path, which the per-path revisit guard keeps finite.
    """
    found = specs.paths(args_class, _db_field, max_depth, own=tuple(((f.attr,), f) for f in spec.db_args))
    return tuple(_Path(attrs, f) for attrs, f in found)


def _args_paths() -> dict[type, tuple[_Path, ...]]:
    out: dict[type, tuple[_Path, ...]] = {}
    for name, spec in METHODS.items():
        args_class, _ = _io_classes(name)
        if args_class is not None:
            out[args_class] = _paths(args_class, spec)
    return out


_ARGS_PATHS: dict[type, tuple[_Path, ...]] = _args_paths()


def _first(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return value[0] if value else None
    if isinstance(value, (set, frozenset)):
        return next(iter(value), None)
    return value


def _name_in(value: Any, field: DbField, parent: Any) -> str | None:
    if field.is_list:
        value = _first(value)
    if not isinstance(value, str) or not value:
        return None
    form = field.form
    if form is NameForm.NAME:
        return value
    if form is NameForm.QUALIFIED:
        dot = value.find(".")
        return value[:dot] if dot > 0 else None
    if form is NameForm.OBJECT_NAME:
        return value if getattr(parent, "objectType", None) == HiveObjectType.DATABASE else None
    return None  # a pattern names no single database


def database_of(args: object) -> str | None:
    """The first database name in a decoded ``<method>_args`` object, as the client wrote it, or None.

    Looks at the method's ``db_args`` first, then at the database-bearing fields of its struct arguments
    (shallowest first; in a list, its first element). Patterns are not names and are skipped; a "db.table"
    name yields its database part. For logging: cheap, never raises on odd input.
    """
    paths = _ARGS_PATHS.get(type(args))
    if not paths:
        return None
    for path in paths:
        parent: Any = None
        value: Any = args
        last = len(path.attrs) - 1
        for i, attr in enumerate(path.attrs):
            parent = value
            value = getattr(value, attr, None)
            if value is None:
                break
            if i < last:
                value = _first(value)  # through a list of structs: its first element
        else:
            name = _name_in(value, path.field, parent)
            if name is not None:
                return name
    return None


def databases_of(args: object) -> set[str]:
    """Every database name in a decoded ``<method>_args`` object, as the client wrote it: the fields
    :func:`database_of` reads, every element of a list (a rename's target, each partition of a batch)."""
    found: set[str] = set()
    for path in _ARGS_PATHS.get(type(args), ()):
        _collect(args, path, 0, None, found)
    return found


def _collect(value: Any, path: _Path, depth: int, parent: Any, found: set[str]) -> None:
    if depth == len(path.attrs):
        values = value if path.field.is_list and isinstance(value, (list, set, tuple)) else (value,)
        for one in values:
            name = _name_in(one, replace(path.field, is_list=False), parent)
            if name is not None:
                found.add(name)
        return
    inner = getattr(value, path.attrs[depth], None)
    if inner is None:
        return
    if depth < len(path.attrs) - 1 and isinstance(inner, (list, tuple)):
        for item in inner:
            _collect(item, path, depth + 1, value, found)
    else:
        _collect(inner, path, depth + 1, value, found)
