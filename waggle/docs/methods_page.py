"""The supported-methods page, generated from the method table so that the two cannot drift apart.

``python -m waggle.docs`` writes it, with the other generated pages; ``python -m waggle.docs.methods_page --check``
exits 1 when the committed page differs from what the table says now. Everything on the page comes from
:mod:`waggle.hms.methods`: the method table, the struct fields that carry database names, and the walk over
the generated specs (:mod:`waggle.hms.specs`) that :func:`~waggle.hms.methods.database_of` uses to find
them, here followed to any depth as the rewriter does.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import textwrap
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from thrift.Thrift import TType

from waggle.docs import COMMAND, generated
from waggle.hms import specs
from waggle.hms.gen.fb303 import FacebookService
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.hms.methods import (
    METHODS,
    STRUCT_DB_FIELDS,
    Access,
    DbField,
    MethodSpec,
    NameForm,
    Route,
    _Path,
    _paths,
)

__all__ = ["DOC_PATH", "render"]

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "supported-methods.md"
REGENERATE = COMMAND

# Enum value -> (label on the page, what it means). Keyed by value so that a member added to the table shows up,
# under its value, before it is described here.
_ROUTES = {
    "database": ("database", "the metastore that owns the database named in the call. When a call names no "
                             "database (an optional filter left empty, a GLOBAL privilege object), it goes to the "
                             "primary"),
    "primary": ("primary", "always the primary metastore. The call has no database context"),
    "fanout": ("fan-out", "every metastore in parallel; the results are merged"),
    "lock_id": ("lock id", "the metastore that granted the lock id, as remembered for the client's connection; "
                           "the primary when waggle did not see it granted"),
    "identity": ("identity", "the connection's identity: the primary answers, and each metastore gets it when "
                             "waggle first connects to it as that user"),
}
_ACCESSES = {
    "read": ("read", "never refused"),
    "write": ("write", "needs write access on every database the call names. A `write` routed to `primary` names "
                       "no database, so per-database access control cannot apply to it; its note says so"),
    "create_database": ("create-database", "primary only, and only with a `..._CREATE...` access type"),
    "create_catalog": ("create-catalog", "a catalog change: primary only, and only with a `..._CREATE...` access "
                                         "type"),
    "lock": ("lock", "judged per lock component. `SHARED_READ` components are reads; `EXCLUSIVE`, `SHARED_WRITE` "
                     "and `EXCL_WRITE` components are writes"),
}
_FORMS = {
    "name": ("", "a database name"),
    "pattern": ("pattern", "a database-name pattern (`*` matches anything, `|` separates alternatives)"),
    "qualified": ("db.table", "a table name qualified by its database"),
    "object_name": ("DATABASE objects only", "`HiveObjectRef.objectName`, a database name only when the object "
                                             "is a database"),
    "view_sql": ("view SQL", "a view's SQL text, whose database-qualified table references are rewritten"),
}
# Walk every struct path, however deep: database_of stops at a few levels, the rewriter does not.
_ALL_DEPTHS = 64
_WIDTH = 110  # prose line length

_INTRO = f"""\
# Supported HMS methods

{generated("waggle/hms/methods.py")}

Every method of the HMS Thrift API that waggle serves (Hive 2.3, 3.1 and 4.x, plus fb303), in the order of
waggle's method table. The routing, the access checks and the database-name rewriting all read that table,
and this page is generated from it.

Columns:

- **Route**: which metastore(s) receive the call.
{{routes}}
- **Access**: how access control treats the call.
{{accesses}}
- **Database names in**: where database names travel in the request, and so what is rewritten and checked.
  - Plain argument names (`dbname`) are string arguments.
  - Dotted paths (`req.dbName`) are struct fields reached through the arguments; `[]` marks a list or set.
  - A database name may arrive catalog-qualified (`@hive#sales`).
  - A suffix says when a value is not a plain database name:
{{forms}}
  - `returns database names` marks calls whose result is itself a list of database names.
- **Handling**: what dispatch does besides routing, all read from the table entry: how a fan-out is merged,
  where lock ids and lock components travel and whether a success grants or releases a lock id for the
  connection, calls that are never shed, the version bridge, the (database, table) pairs `mapped-tables`
  checks, and where a request struct names a catalog. `cached` marks the reads whose replies a member with
  `cache` on answers from memory (see [Caching](guides/caching.md)): `per table`, forgotten when that table or
  its database changes; `per database`, when anything in the database changes. A write forgets what it names.
- **Note**: why anything non-obvious is the way it is.
- **Privilege**: what the grants of `authorization` need on every database and table the call names (see the
  [grants guide](guides/grants.md)): `see` for a read (any privilege on the object makes it visible; a listing
  is filtered instead), else the privilege a write needs; a lock needs `select` for a shared read lock.
- **Limits**: the method family the rate limits of `limits.rates` count the call in (`reads`, `writes`,
  `listings`, `partitions`), or `never` for the calls that keep a client going, which are never limited.
"""

_STRUCTS_INTRO = """\
## Structs whose database fields are rewritten

The struct fields that carry database names, in requests and replies alike. waggle rewrites them wherever
they occur, however deeply they are nested. **In** says whether the struct occurs in a request, a reply, or
both.
"""


def _generated(name: str, part: str) -> type | None:
    """The generated ``<name>_args`` or ``<name>_result`` class (oneway methods have no result)."""
    for service in (ThriftHiveMetastore, FacebookService):
        cls = getattr(service, f"{name}_{part}", None)
        if isinstance(cls, type):
            return cls
    return None


def _args_class(name: str) -> type:
    cls = _generated(name, "args")
    if cls is None:
        raise LookupError(f"{name}: no generated args class")
    return cls


def _follow(root: type, path: _Path) -> tuple[str, str]:
    """The path as written on the page (``new_parts[].dbName``), and the struct that owns its last field."""
    cls = root
    steps: list[str] = []
    for attr in path.attrs[:-1]:
        field = specs.field_named(cls, attr)
        if field is None or field.struct is None:
            raise LookupError(f"{cls.__name__}.{attr} is not a struct")
        steps.append(f"{attr}[]" if field.ttype != TType.STRUCT else attr)
        cls = field.struct
    steps.append(_field_text(path.field))
    return ".".join(steps), cls.__name__


def _field_text(field: DbField) -> str:
    return f"{field.attr}[]" if field.is_list else field.attr


def _described(member: enum.Enum, table: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """(label, meaning) of an enum member of the method table."""
    undescribed = (str(member.value), f"see `{type(member).__name__}.{member.name}` in waggle/hms/methods.py")
    return table.get(str(member.value), undescribed)


def _form(form: NameForm) -> tuple[str, str]:
    return _described(form, _FORMS)


def _route(route: Route) -> str:
    return _described(route, _ROUTES)[0]


def _access(access: Access) -> str:
    return _described(access, _ACCESSES)[0]


def _code(text: str, field: DbField) -> str:
    suffix = _form(field.form)[0]
    return f"`{text}` ({suffix})" if suffix else f"`{text}`"


def _bullet(level: int, text: str) -> str:
    indent = "  " * level
    return textwrap.fill(text, _WIDTH, initial_indent=f"{indent}- ", subsequent_indent=f"{indent}  ",
                         break_on_hyphens=False, break_long_words=False)


def _intro() -> str:
    routes = [_bullet(1, f"`{label}`: {meaning}.") for label, meaning in (_described(r, _ROUTES) for r in Route)]
    accesses = [_bullet(1, f"`{label}`: {meaning}.")
                for label, meaning in (_described(a, _ACCESSES) for a in Access)]
    forms = [_bullet(2, f"`({suffix})`: {meaning}.") for suffix, meaning in map(_form, NameForm) if suffix]
    text = _INTRO
    for name, lines in (("routes", routes), ("accesses", accesses), ("forms", forms)):
        text = text.replace(f"{{{name}}}", "\n".join(lines))
    return text


def _where(spec: MethodSpec) -> str:
    args = _args_class(spec.name)
    parts = [_code(_follow(args, path)[0], path.field) for path in _paths(args, spec, _ALL_DEPTHS)]
    if spec.result_names is not None:
        parts.append("returns database names")
    return ", ".join(parts) or "-"


def _handling(spec: MethodSpec) -> str:
    """What dispatch does besides routing: merge, lock bookkeeping, shedding, bridge, mapped-tables checks."""
    parts = []
    if spec.merge is not None:
        parts.append(f"merges {spec.merge.value}")
    if spec.lock_id:
        parts.append(f"lock id in `{'.'.join(spec.lock_id)}`")
    if spec.lock_components:
        parts.append(f"lock components in `{'.'.join(spec.lock_components)}[]`")
    if spec.granted_lock:
        parts.append(f"remembers the lock id in `{'.'.join(spec.granted_lock)}`")
    if spec.releases_lock:
        parts.append("forgets the lock id")
    if spec.never_shed:
        parts.append("never shed")
    if spec.cached is not None:
        parts.append(f"cached ({'per table' if spec.cached.value == 'table' else 'per database'})")
    if spec.txn is not None:
        parts.append(f"{'opens' if spec.txn.value == 'open' else 'ends'} the connection's transaction (no cache)")
    if spec.bridge is not None:
        parts.append(f"bridge: {spec.bridge.via}")
    if spec.pointer_guard is not None:
        parts.append(f"Iceberg pointer guard (reads the table with {spec.pointer_guard.reads} first"
                     f"{'; adds the metastore check to the context' if spec.pointer_guard.context else ''})")
    if spec.table_refs:
        tables = ", ".join(f"`{'.'.join(r.db)}`/`{'.'.join(r.table)}`" for r in spec.table_refs)
        parts.append(f"mapped-tables checks {tables}")
    if spec.catalog_fields:
        parts.append("catalog in " + ", ".join(f"`{'.'.join(p)}`" for p in spec.catalog_fields))
    return "; ".join(parts) or "-"


def _privilege(spec: MethodSpec) -> str:
    """What a grant must allow on the objects the call names (a read: that they are visible to the caller)."""
    if spec.access is Access.READ:
        return "see"
    return spec.privilege.value if spec.privilege is not None else "-"


def _limits(spec: MethodSpec) -> str:
    """The family rate limits count the call in, or never."""
    if spec.never_limited or spec.family is None:
        return "never"
    return spec.family.label


def _cell(text: str) -> str:
    """Plain text for a table cell: pipes would end the cell, asterisks would start emphasis."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")


def _owners(paths: Iterable[tuple[type, _Path]]) -> set[str]:
    return {_follow(root, path)[1] for root, path in paths if len(path.attrs) > 1}


def _struct_sides() -> dict[str, set[str]]:
    """Struct name -> {"request", "reply"}: where, over all methods, that struct's database fields occur."""
    requests: list[tuple[type, _Path]] = []
    replies: list[tuple[type, _Path]] = []
    for spec in METHODS.values():
        args = _args_class(spec.name)
        requests.extend((args, p) for p in _paths(args, spec, _ALL_DEPTHS))
        result = _generated(spec.name, "result")
        if result is not None:
            no_args = dataclasses.replace(spec, db_args=())  # a result has no db_args: walk its structs only
            replies.extend((result, p) for p in _paths(result, no_args, _ALL_DEPTHS))
    sides: dict[str, set[str]] = {}
    for side, found in (("request", _owners(requests)), ("reply", _owners(replies))):
        for struct in found:
            sides.setdefault(struct, set()).add(side)
    return sides


def _summary() -> str:
    routes = Counter(spec.route for spec in METHODS.values())
    access = Counter(spec.access for spec in METHODS.values())
    by_route = ", ".join(f"{routes[r]} `{_route(r)}`" for r in Route)
    by_access = ", ".join(f"{access[a]} `{_access(a)}`" for a in Access)
    return textwrap.fill(f"{len(METHODS)} methods. By route: {by_route}. By access: {by_access}.", _WIDTH) + "\n"


def _methods_table() -> list[str]:
    rows = ["## Methods", "", "| Method | Route | Access | Privilege | Database names in | Handling | Note | Limits |",
            "|---|---|---|---|---|---|---|---|"]
    for spec in METHODS.values():
        rows.append(f"| `{spec.name}` | {_route(spec.route)} | {_access(spec.access)} | {_privilege(spec)} "
                    f"| {_where(spec)} | {_cell(_handling(spec))} | {_cell(spec.note)} | {_limits(spec)} |")
    return rows


def _structs_table() -> list[str]:
    sides = _struct_sides()
    rows = ["| Struct | Fields | In |", "|---|---|---|"]
    for struct, fields in STRUCT_DB_FIELDS.items():
        cells = ", ".join(_code(_field_text(f), f) for f in fields)
        side = sides.get(struct, set())
        where = "request and reply" if len(side) == 2 else next(iter(side), "no method carries it")
        rows.append(f"| `{struct}` | {cells} | {where} |")
    return rows


def render() -> str:
    """The whole page, as Markdown."""
    parts = [_intro(), _summary(), "\n".join(_methods_table()), "", _STRUCTS_INTRO, "\n".join(_structs_table())]
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        try:
            committed = DOC_PATH.read_text()
        except OSError as exc:
            print(f"{DOC_PATH}: cannot read: {exc.strerror or exc}; run {REGENERATE}", file=sys.stderr)
            return 1
        if committed != render():
            print(f"{DOC_PATH} is stale: run {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: python -m waggle.docs.methods_page [--check]", file=sys.stderr)
        return 2
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
