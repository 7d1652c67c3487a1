"""What each route of the Iceberg REST port does, over one request's :class:`~waggle.rest.catalog.FederatedCatalog`.

Namespaces are the databases waggle shows (one level: a database), under waggle's names; tables are the Iceberg
tables among them (``table_type=ICEBERG`` with a ``metadata_location``). A scope (the config's ``prefix``) may
narrow what a client sees to one member. Each operation returns the JSON body to answer, or None for 204.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyiceberg.catalog import METADATA_LOCATION, TABLE_TYPE, MetastoreCatalog
from pyiceberg.catalog.hive import DEFAULT_PROPERTIES
from pyiceberg.catalog.rest import CreateTableRequest, RegisterTableRequest
from pyiceberg.exceptions import TableAlreadyExistsError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table import CommitTableRequest, TableIdentifier
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

from waggle.rest.catalog import FederatedCatalog
from waggle.rest.commits import commit_together
from waggle.rest.errors import RestError, bad_request, forbidden, not_found

#: a namespace's parts travel joined by the unit separator (``%1F``)
UNIT = "\x1f"
#: the scope of a client that asked for no warehouse: every member
EVERYWHERE = "federation"


@dataclass(frozen=True, slots=True)
class Scope:
    """What one request may see: the whole federation (``member`` None) or one member's databases."""

    member: str | None
    #: a database's member by waggle's name (None: no such database)
    owner: Callable[[str], str | None]

    def namespace(self, text: str) -> str:
        """The database a path's namespace names, checked to be in scope."""
        if not text or UNIT in text:
            raise not_found("NoSuchNamespaceException", f"namespace {text.replace(UNIT, '.')!r} does not exist: "
                            "waggle's namespaces are its databases, one level")
        if self.member is not None and self.owner(text) != self.member:
            raise not_found("NoSuchNamespaceException", f"namespace {text!r} is not in metastore {self.member!r}")
        return text

    def shows(self, database: str) -> bool:
        return self.member is None or self.owner(database) == self.member


def body(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError as exc:
        raise bad_request(f"the request body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise bad_request("the request body must be a JSON object")
    return value


def _namespace_of(value: Any) -> str:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        return value[0]
    raise bad_request(f"namespace {value!r}: waggle's namespaces are its databases, one level")


# -- namespaces ----------------------------------------------------------------------------------------------
def list_namespaces(catalog: FederatedCatalog, scope: Scope, parent: str | None) -> dict[str, Any]:
    if parent:  # databases hold no namespaces
        scope.namespace(parent)
        return {"namespaces": []}
    names = [ns[0] for ns in catalog.list_namespaces()]
    return {"namespaces": [[n] for n in names if scope.shows(n)]}


def create_namespace(catalog: FederatedCatalog, scope: Scope, request: dict[str, Any]) -> dict[str, Any]:
    name = _namespace_of(request.get("namespace"))
    if scope.member is not None and scope.owner(name) not in (None, scope.member):
        raise bad_request(f"namespace {name!r} would not be in metastore {scope.member!r}")
    properties = request.get("properties") or {}
    if not isinstance(properties, dict):
        raise bad_request("properties must be an object of strings")
    catalog.create_namespace(name, {str(k): str(v) for k, v in properties.items()})
    return {"namespace": [name], "properties": properties}


def load_namespace(catalog: FederatedCatalog, scope: Scope, ns: str) -> dict[str, Any]:
    name = scope.namespace(ns)
    return {"namespace": [name], "properties": catalog.load_namespace_properties(name)}


def drop_namespace(catalog: FederatedCatalog, scope: Scope, ns: str) -> None:
    catalog.drop_namespace(scope.namespace(ns))


def update_properties(catalog: FederatedCatalog, scope: Scope, ns: str, request: dict[str, Any]) -> dict[str, Any]:
    removals, updates = request.get("removals") or [], request.get("updates") or {}
    if not isinstance(removals, list) or not isinstance(updates, dict):
        raise bad_request("removals must be a list and updates an object")
    summary = catalog.update_namespace_properties(scope.namespace(ns), set(map(str, removals)),
                                                  {str(k): str(v) for k, v in updates.items()})
    return {"removed": summary.removed, "updated": summary.updated, "missing": summary.missing}


# -- tables --------------------------------------------------------------------------------------------------
def list_tables(catalog: FederatedCatalog, scope: Scope, ns: str) -> dict[str, Any]:
    name = scope.namespace(ns)
    catalog.load_namespace_properties(name)  # a namespace that does not exist is 404, not an empty list
    return {"identifiers": [{"namespace": [name], "name": t} for _, t in catalog.list_tables(name)]}


def _table_namespace(scope: Scope, ns: str, table: str) -> str:
    """The database of a table read's namespace. A namespace that does not exist (or is out of scope) means no
    such table, 404 ``NoSuchTableException``, as the spec's loadTable answers: Iceberg's Java client
    (``RESTSessionCatalog.loadTable``) falls back to a metadata table (``db.t.snapshots``: table ``db.t``) only on
    that exception, and reads ``db.t.snapshots`` as table ``snapshots`` in the two-level namespace ``db.t``."""
    try:
        return scope.namespace(ns)
    except RestError as exc:
        raise not_found("NoSuchTableException", f"table {ns.replace(UNIT, '.')}.{table} does not exist: "
                        f"{exc.message}") from None


def _pointer(catalog: FederatedCatalog, scope: Scope, ns: str, table: str) -> str:
    """The metadata file an Iceberg table's metastore record points at (one ``get_table``, nothing read)."""
    name = _table_namespace(scope, ns, table)
    with catalog.client() as client:
        hive = catalog._get_hive_table(client, name, table)
    parameters = hive.parameters or {}
    location = parameters.get(METADATA_LOCATION)
    if parameters.get(TABLE_TYPE, "").lower() != "iceberg" or not location:
        raise not_found("NoSuchTableException", f"table {name}.{table} is not an Iceberg table")
    return str(location)


def load_table(catalog: FederatedCatalog, scope: Scope, ns: str, table: str) -> bytes:
    """The table's metadata as its metadata file holds it, spliced into the answer unparsed."""
    location = _pointer(catalog, scope, ns, table)
    with catalog._load_file_io(location=location).new_input(location).open() as f:
        data = f.read()
    if location.endswith(".gz.metadata.json"):
        data = gzip.decompress(data)
    return b'{"metadata-location":%s,"metadata":%s,"config":{}}' % (json.dumps(location).encode(), data)


def table_exists(catalog: FederatedCatalog, scope: Scope, ns: str, table: str) -> None:
    _pointer(catalog, scope, ns, table)


def _response(location: str | None, metadata: Any) -> bytes:
    return b'{"metadata-location":%s,"metadata":%s,"config":{}}' % (
        json.dumps(location).encode(), metadata.model_dump_json().encode())


def create_table(catalog: FederatedCatalog, scope: Scope, ns: str, request: dict[str, Any]) -> bytes:
    name = scope.namespace(ns)
    for key in ("location", "partition-spec", "write-order"):
        request.setdefault(key, None)
    create = CreateTableRequest.model_validate(request)
    ident = (name, create.name)
    options: Mapping[str, Any] = {
        "schema": create.table_schema, "location": create.location,
        "partition_spec": create.partition_spec or UNPARTITIONED_PARTITION_SPEC,
        "sort_order": create.write_order or UNSORTED_SORT_ORDER, "properties": create.properties}
    if create.stage_create:
        if catalog.table_exists(ident):
            raise TableAlreadyExistsError(f"Table already exists: {name}.{create.name}")
        staged = catalog._create_staged_table(ident, **{**options, "properties": {**DEFAULT_PROPERTIES,
                                                                                    **create.properties}})
        return _response(None, staged.metadata)
    created = catalog.create_table(ident, **options)
    return _response(created.metadata_location, created.metadata)


class _Named:
    """What pyiceberg's ``commit_table`` reads of its table argument: the name alone."""

    def __init__(self, ident: tuple[str, str]) -> None:
        self._ident = ident

    def name(self) -> tuple[str, str]:
        return self._ident


def commit_table(catalog: FederatedCatalog, scope: Scope, ns: str, table: str, request: dict[str, Any]) -> bytes:
    name = scope.namespace(ns)
    request["identifier"] = {"namespace": [name], "name": table}
    commit = CommitTableRequest.model_validate(request)
    done = catalog.commit_table(_Named((name, table)), commit.requirements, commit.updates)  # type: ignore[arg-type]
    return _response(done.metadata_location, done.metadata)


def drop_table(catalog: FederatedCatalog, scope: Scope, ns: str, table: str, purge: bool,
               purge_allowed: bool) -> None:
    ident = (scope.namespace(ns), table)
    if not purge:
        catalog.load_table(ident)  # only Iceberg tables are this catalog's to drop
        catalog.drop_table(ident)
        return
    if not purge_allowed:
        raise forbidden(f"dropping {ident[0]}.{table} with its files (purgeRequested) is not allowed here "
                        "(iceberg-rest.allow-purge); drop it without purging to keep the files")
    MetastoreCatalog.purge_table(catalog, ident)


def rename_table(catalog: FederatedCatalog, scope: Scope, request: dict[str, Any]) -> None:
    try:
        source = TableIdentifier.model_validate(request["source"])
        destination = TableIdentifier.model_validate(request["destination"])
    except (KeyError, TypeError):
        raise bad_request("a rename needs source and destination, each {namespace, name}") from None
    src_ns, dst_ns = _namespace_of(source.namespace.root), _namespace_of(destination.namespace.root)
    scope.namespace(src_ns)
    if scope.owner(dst_ns) is None:
        raise not_found("NoSuchNamespaceException", f"namespace {dst_ns!r} does not exist")
    if scope.owner(src_ns) != scope.owner(dst_ns):
        raise bad_request(f"{src_ns}.{source.name} is in metastore {scope.owner(src_ns)!r} and {dst_ns!r} in "
                          f"{scope.owner(dst_ns)!r}: a table is renamed within its metastore only")
    catalog.load_table((src_ns, source.name))
    catalog.rename_table((src_ns, source.name), (dst_ns, destination.name))


def register_table(catalog: FederatedCatalog, scope: Scope, ns: str, request: dict[str, Any]) -> bytes:
    name = scope.namespace(ns)
    request.setdefault("overwrite", False)
    register = RegisterTableRequest.model_validate(request)
    if register.overwrite:
        raise RestError(501, "UnsupportedOperationException", "registering over an existing table (overwrite) "
                        "is not supported: drop it first")
    done = catalog.register_table((name, register.name), register.metadata_location)
    return _response(done.metadata_location, done.metadata)


def commit_transaction(catalog: FederatedCatalog, scope: Scope, request: dict[str, Any]) -> None:
    changes = request.get("table-changes")
    if not isinstance(changes, list) or not changes:
        raise bad_request("a transaction needs table-changes: a list of {identifier, requirements, updates}")
    commits = []
    for change in changes:
        if not isinstance(change, dict) or "identifier" not in change:
            raise bad_request("each of table-changes needs its identifier")
        commit = CommitTableRequest.model_validate(change)
        ns = scope.namespace(_namespace_of(commit.identifier.namespace.root))
        commits.append(((ns, commit.identifier.name), commit))
    owners = {scope.owner(ident[0]) for ident, _ in commits}
    if len(owners) != 1:
        raise bad_request("the tables of one transaction must share a metastore; these are in "
                          f"{sorted(map(str, owners))}")
    commit_together(catalog, commits)

