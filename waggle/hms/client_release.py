"""What a connection's calls say about its client's Hive release: enough to write waggle's own errors where the
client reads them (:mod:`waggle.hms.layouts`). Pure: learned from decoded arguments, never asked for.

The rule, one call at a time, before the call is planned:

* a call that names a catalog (``@hive#db`` in a string argument, ``catName`` in a request struct) comes from a
  Hive 3+ client: Hive 3.0+ ``HiveMetaStoreClient`` puts the catalog into every old-style call
  (``MetaStoreUtils.prependCatalogToDbName``) and into its requests. The connection is taken as Hive 3+ for
  good;
* a connection that named a database without a catalog in an earlier call, and never a catalog, is taken as
  Hive 2: Spark's built-in Hive 2.3 client keeps one connection and fetches a table (``get_table``) on it before
  it lists the table's partitions;
* a call that is the connection's first to name a database is answered in the Hive 3.1 / 4 layout: Trino opens
  a new connection for every metastore operation (``ThriftHiveMetastore``: ``createMetastoreClient()`` per
  operation) and reads the 3.1+ layout, as every Hive 3+ client does.

So a Hive 2 client's first database-naming call (usually ``get_database`` or ``get_table``, whose exceptions
every release declares alike) gets the newer layout, and a newer client without catalogs on a long-lived
connection (none is known) would get Hive 2's from its second call on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from waggle.hms.layouts import Layout
from waggle.hms.methods import MethodSpec
from waggle.hms.names import CATALOG_MARKER
from waggle.hms.rewrite import CALL_NAMES


@dataclass(frozen=True, slots=True)
class ClientRelease:
    """What one connection's calls so far say about its client."""

    #: some call named a catalog: a Hive 3+ client
    catalog: bool = False
    #: some call named a database without a catalog
    plain: bool = False
    #: the layout of the errors waggle writes for the call learned last
    layout: Layout = Layout.CURRENT

    @property
    def unread(self) -> Layout:
        """The layout for a call whose arguments were not read (shed before it was decoded): what the earlier
        calls say."""
        return Layout.HIVE_2 if self.plain and not self.catalog else Layout.CURRENT


#: every state there is, made once (learning allocates nothing)
_STATES = {(c, p, layout): ClientRelease(c, p, layout) for c in (False, True) for p in (False, True)
           for layout in Layout}
#: a connection that has called nothing yet
FRESH = _STATES[(False, False, Layout.CURRENT)]
_HIVE_2, _CURRENT = Layout.HIVE_2, Layout.CURRENT
_AFTER_CATALOG = {p: _STATES[(True, p, Layout.CURRENT)] for p in (False, True)}


def learn(known: ClientRelease, spec: MethodSpec | None, args: Any) -> ClientRelease:
    """``known`` updated with one call (``args`` None: a method waggle's IDL does not have, which names nothing
    waggle can read)."""
    if known.catalog:
        return known  # a Hive 3+ client for good
    named = catalog = False
    if spec is not None and args is not None:
        for name in _names(args):
            named = True
            if name[:1] == CATALOG_MARKER:
                catalog = True
        if not catalog and spec.catalog_fields:
            catalog = _catalog_field(args, spec)
    plain = known.plain
    if catalog:
        return _AFTER_CATALOG[plain]
    return _STATES[(False, plain or named, _HIVE_2 if plain else _CURRENT)]


def _names(args: Any) -> list[str]:
    return CALL_NAMES.names_in(args)


def _catalog_field(args: Any, spec: MethodSpec) -> bool:
    for path in spec.catalog_fields:
        value = args
        for attr in path:
            value = getattr(value, attr, None)
            if value is None:
                break
        if isinstance(value, str) and value:
            return True
    return False
