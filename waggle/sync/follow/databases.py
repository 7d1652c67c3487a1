"""A page's database and function work done at the target, state-based as a table's is: each database, and each
function, is made what the source holds now (read again from the source), or absent when the source no longer
holds it. Applying the same work twice writes nothing the second time.

A database the policy covers goes where its tables go: named as the batch sync names it (``target-database``, else
the source database's name, lower case), at the target metastore's default location as the batch sync creates it
(:func:`waggle.sync.runner.target_of`), with ``waggle.sync.source`` set; when it exists already, it is marked as the
batch sync marks it. Then:

- **created or altered at the source**: a database *the sync made* has the source's description, parameters and
  owner (never its location: the target's stays); the sync's own ``waggle.sync.*`` parameters stay. A Hive 2.3
  target changes no description on ``alter_database`` (its ``ObjectStore.alterDatabase`` sets parameters and owner
  only): there a description is the one the database was created with. A database the sync did not make (one that
  was there before, which the sync writes into) keeps its own. With ``target-database``, one target database
  gathers many source databases: it is made as the batch sync makes it, and none of theirs is carried;
- **dropped at the source** (with ``propagate-deletes``; kept otherwise, as tables are): the sync's copies of the
  database's tables are dropped (a copy's files too), and so are its functions; then the database itself, only
  when it is one the sync made and nothing is left in it (``drop_database`` without cascade and without its data).
  Anything else in it (a table or function made by someone else, or another source's copy) keeps it, and it is
  reported failed, naming what is left. A database the sync did not make, or the ``target-database`` of many, is
  never dropped.

The sync made a database when its ``waggle.sync.source`` is the policy's source and its ``waggle.sync.source-object``
names the source database (set by the follower), or its description is the one the batch sync gives the databases
it creates. A function has no parameters to say who made it: the target database records each function the sync
made as its parameter ``waggle.sync.function.NAME`` (``source:db.name``), written before the function is.
A function is created, altered or dropped only when the sync made it (or, created, when the name is free).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from waggle.common.logging import get_logger
from waggle.hms.gen.hive_metastore.ttypes import AlreadyExistsException, Database, Function, NoSuchObjectException
from waggle.sync.files import remove_tree
from waggle.sync.follow.plan import DatabaseWork, FunctionWork
from waggle.sync.hms import Metastore
from waggle.sync.job import SyncError
from waggle.sync.runner import TableSpec, target_of
from waggle.synced import objects as o

log = get_logger("waggle.sync.follow")
#: the parameter of a target database that says the sync made its function NAME: ``source:db.name``
FUNCTION = o.PREFIX + "function."


def database_key(spec: TableSpec, db: str) -> str:
    """How a failed database is named (``failed_tables``): the target database."""
    return (spec.target_database or db).lower()


def function_key(spec: TableSpec, db: str, name: str) -> str:
    """How a failed function is named (``failed_tables``): ``target_db.name()``."""
    return f"{database_key(spec, db)}.{name}()"


class Catalog:
    """Database and function work against one source and one target; ``locations`` is the applier's cache of
    target databases' locations (:func:`~waggle.sync.runner.target_of`), ``forget`` drops what it knows of a
    database's tables once the database is gone."""

    def __init__(self, spec: TableSpec, source: Metastore, target: Metastore, locations: dict[str, str | None],
                 forget: Callable[[str], None]) -> None:
        self.spec, self.source, self.target = spec, source, target
        self.locations, self.forget = locations, forget

    # -- reads --------------------------------------------------------------------------------------------------
    def source_database(self, db: str) -> Database | None:
        return _get(self.source.client.get_database, db)

    def _database(self, tdb: str) -> Database | None:
        return _get(self.target.client.get_database, tdb)

    def made(self, database: Database, db: str) -> bool:
        """Whether the sync made this target database for the source database ``db``."""
        params = database.parameters or {}
        if params.get(o.SOURCE) != self.spec.source:
            return False
        return (params.get(o.SOURCE_OBJECT, "").lower() == db.lower()
                or (database.description or "").lower() == f"synced by waggle from {self.spec.source}:{db}".lower())

    def _write(self, method: str, *args: Any) -> None:
        """One write call at the target, after its turn under the write budget."""
        if self.target.throttle is not None:
            self.target.throttle.acquire()
        getattr(self.target.client, method)(*args)

    def _ensure(self, db: str) -> tuple[str, bool]:
        """The target database of ``db``, created (or marked) as the batch sync does; and whether it was created."""
        tdb = database_key(self.spec, db)
        created = False
        if self._database(tdb) is None:
            self.locations.pop(tdb, None)  # gone since it was looked at: look again, make it
            created = True
        target_of(self.spec, db, "", self.target, self.locations)
        return tdb, created

    # -- a database ---------------------------------------------------------------------------------------------
    def present(self, work: DatabaseWork, source: Database) -> int:
        """The source holds the database: make the target's, carry its properties; the objects written."""
        if self.spec.target_database:
            return int(self._ensure(work.db)[1])
        tdb = database_key(self.spec, work.db)
        existing = self._database(tdb)
        if existing is None:  # made as the batch sync makes it (the target's default location), with the source's
            self.locations.pop(tdb, None)
            try:
                self._write("create_database", carried(Database(name=tdb), source, self.spec.source, work.db))
            except AlreadyExistsException:  # made meanwhile by another policy or job
                existing = self._database(tdb)
                if existing is None:
                    return 0
            else:
                log.info("sync.database_created", database=tdb)
                return 1
        if not self.made(existing, work.db):
            target_of(self.spec, work.db, "", self.target, self.locations)  # marked, as the batch sync marks it
            log.info("sync.follow_database_kept", database=tdb, source=f"{self.spec.source}:{work.db}",
                     reason="not made by waggle sync: its description, parameters and owner stay the target's")
            return 0
        wanted = carried(existing, source, self.spec.source, work.db)
        if wanted != existing:
            self._write("alter_database", tdb, wanted)
            return 1
        return 0

    def gone(self, work: DatabaseWork) -> int:
        """The source no longer holds the database: drop the target's when it is the sync's and nothing else is in
        it (see the module's docstring); the objects written."""
        tdb = database_key(self.spec, work.db)
        if self.spec.target_database or not self.spec.propagate_deletes:
            return 0
        existing = self._database(tdb)
        if existing is None:
            return 0
        if not self.made(existing, work.db):
            raise SyncError(f"target database {tdb} was not created by waggle sync from "
                            f"{self.spec.source}:{work.db}; refusing to drop it")
        written, left = 0, []
        for name in self.target.tables(tdb):
            table = self.target.table(tdb, name)
            params = (table.parameters or {}) if table is not None else {}
            if table is None:
                continue
            if params.get(o.SOURCE) != self.spec.source or \
                    not params.get(o.SOURCE_OBJECT, "").lower().startswith(f"{work.db}."):
                left.append(f"table {name}")
                continue
            self.target.drop_table(tdb, name)  # its source is gone with its database
            if self.spec.mode == o.COPY and params.get(o.MODE) == o.COPY and table.sd is not None and \
                    table.sd.location:
                remove_tree(table.sd.location)
            written += 1
        ours = recorded_functions(existing, self.spec.source, work.db)
        for name in self.target.client.get_functions(tdb, "*") or []:
            if name.lower() not in ours:
                left.append(f"function {name}")
                continue
            self._write("drop_function", tdb, name)
            written += 1
        self.forget(work.db)
        if left:
            raise SyncError(f"target database {tdb} is kept: it holds what waggle sync did not create from "
                            f"{self.spec.source}:{work.db} ({', '.join(sorted(left)[:10])})")
        self._write("drop_database", tdb, False, False)  # never its data: its directory stays
        self.locations.pop(tdb, None)
        log.info("sync.follow_database_dropped", database=tdb, source=f"{self.spec.source}:{work.db}")
        return written + 1

    # -- a function ---------------------------------------------------------------------------------------------
    def function(self, work: FunctionWork) -> int:
        """Make the target's function what the source's is now, or drop it; the objects written."""
        source = _get(self.source.client.get_function, work.db, work.name)
        tdb = database_key(self.spec, work.db)
        mark = FUNCTION + work.name
        origin = f"{self.spec.source}:{work.db}.{work.name}"
        if source is None:
            database = self._database(tdb)
            if database is None:
                return 0
            ours = (database.parameters or {}).get(mark) == origin
            have = _get(self.target.client.get_function, tdb, work.name)
            if have is not None and not self.spec.propagate_deletes:
                return 0
            if have is not None and not ours:
                raise SyncError(f"target function {tdb}.{work.name} was not created by waggle sync from {origin}; "
                                "refusing to drop it")
            if have is not None:
                self._write("drop_function", tdb, work.name)
            if ours:
                self._set_parameter(tdb, mark, None)
            return int(have is not None)
        tdb, _ = self._ensure(work.db)
        database = self._database(tdb)
        ours = database is not None and (database.parameters or {}).get(mark) == origin
        have = _get(self.target.client.get_function, tdb, work.name)
        if have is not None and not ours:
            raise SyncError(f"target function {tdb}.{work.name} exists and was not created by waggle sync from "
                            f"{origin}; refusing to change it")
        wanted = target_function(source, tdb)
        if not ours:  # said before the function is made: a replay finds it the sync's
            self._set_parameter(tdb, mark, origin)
        if have is None:
            self._write("create_function", wanted)
            return 1
        if _meaning(have) != _meaning(wanted):
            self._write("alter_function", tdb, work.name, wanted)
            return 1
        return 0

    def _set_parameter(self, tdb: str, key: str, value: str | None) -> None:
        database = self._database(tdb)
        if database is None:
            return
        params = dict(database.parameters or {})
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
        database.parameters = params
        self._write("alter_database", tdb, database)


def carried(existing: Database, source: Database, source_name: str, db: str) -> Database:
    """The target database with the source's description, parameters and owner; its own name, location and
    ``waggle.sync.*`` parameters (marked as made for ``db``)."""
    wanted = copy.deepcopy(existing)
    wanted.description = source.description
    wanted.ownerName, wanted.ownerType = source.ownerName, source.ownerType
    params = {k: v for k, v in (source.parameters or {}).items() if not k.startswith(o.PREFIX)}
    params.update({k: v for k, v in (existing.parameters or {}).items() if k.startswith(o.PREFIX)})
    params[o.SOURCE], params[o.SOURCE_OBJECT] = source_name, db
    wanted.parameters = params
    return wanted


def recorded_functions(database: Database, source: str, db: str) -> set[str]:
    """The functions (lower case) the target database records the sync made from ``source:db``."""
    return {k[len(FUNCTION):].lower() for k, v in (database.parameters or {}).items()
            if k.startswith(FUNCTION) and v == f"{source}:{db}.{k[len(FUNCTION):]}"}


def target_function(source: Function, tdb: str) -> Function:
    """The target's function for a source function: in the target database, otherwise the same."""
    f = copy.deepcopy(source)
    f.dbName, f.catName = tdb, None
    return f


def _meaning(f: Function) -> tuple[Any, ...]:
    return (f.className, f.ownerName, f.ownerType, f.functionType,
            [(r.resourceType, r.uri) for r in f.resourceUris or []])


def _get(call: Callable[..., Any], *args: Any) -> Any:
    """A read's answer; None for an object that does not exist."""
    try:
        return call(*args)
    except NoSuchObjectException:
        return None
