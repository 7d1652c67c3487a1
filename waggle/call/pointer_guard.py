"""The Iceberg pointer guard's decision: whether an alter would erase or roll back an Iceberg table's metadata
pointer. Pure: plain values in, plain values out (the handler that reads the table and sends or refuses is
:mod:`waggle.server.own_pointer_guard`).

An Iceberg table in a Hive metastore is a table whose parameter ``metadata_location`` names its current metadata
file; a commit is an alter that sets a new ``metadata_location`` and, as ``previous_metadata_location``, the one it
was built on. A client that does not know Iceberg (HiveServer2 on Hive 2/3, a tool that round-trips the table
object) may send an alter with a table object it read before someone else's commit: the alter drops the pointer,
or puts an older one back, and the table silently loses its newest commits. waggle refuses such an alter rather
than merging it (a merge would apply the stale object's other fields, its columns or its location, over a table
whose metadata moved on; a refusal loses nothing, and the client re-reads).

The rule, for a member's current table whose parameters have ``metadata_location``:

* an alter whose table keeps ``metadata_location`` as it is passes;
* one that sets another pointer passes only with ``previous_metadata_location`` equal to the current one (an
  honest Iceberg commit on top of what the metastore holds);
* one that drops ``metadata_location``, or sets another without that, is refused.

A current table without ``metadata_location`` is no Iceberg table: its alters pass as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from waggle.hms.fields import replaced, value_at
from waggle.hms.gen.hive_metastore.ttypes import EnvironmentContext, GetTableRequest
from waggle.hms.methods import PointerGuard
from waggle.hms.names import parse

METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
#: the metastore's own check of an alter (HIVE-26882: Hive 2.3.10, 4.0.0-beta-1 and later; 3.1 ignores them): the
#: alter fails unless the current table's parameter ``expected_parameter_key`` is ``expected_parameter_value``
EXPECTED_KEY = "expected_parameter_key"
EXPECTED_VALUE = "expected_parameter_value"


def pointer(parameters: Mapping[str, str] | None) -> str | None:
    """The table's Iceberg metadata pointer, or None for a table that is no Iceberg table."""
    return None if parameters is None else parameters.get(METADATA_LOCATION)


def why_refused(current: Mapping[str, str] | None, new: Mapping[str, str] | None) -> str | None:
    """Why an alter to a table with parameters ``new`` would lose Iceberg commits of the table whose parameters are
    ``current`` (what the new table object does), or None when it passes."""
    now = pointer(current)
    if now is None:
        return None
    new = new or {}
    if METADATA_LOCATION not in new:
        return f"drops {METADATA_LOCATION}"
    moved = new[METADATA_LOCATION]
    if moved == now or new.get(PREVIOUS_METADATA_LOCATION) == now:
        return None
    return (f"sets {METADATA_LOCATION} to '{moved}' with {PREVIOUS_METADATA_LOCATION} "
            f"{_shown(new.get(PREVIOUS_METADATA_LOCATION))}, not the current pointer")


def refusal(method: str, db: str, table: str, metastore: str, current: str, why: str) -> str:
    """The refusal's text: the table (in the client's names), its metastore, its current pointer, what to do."""
    return (f"{method} refused by waggle's Iceberg pointer guard: table '{db}.{table}' of metastore '{metastore}' "
            f"is an Iceberg table whose {METADATA_LOCATION} is '{current}', and the new table object {why}, which "
            f"would lose the table's Iceberg commits (an object read before the latest commit, or one without "
            f"Iceberg's parameters). Re-read the table and retry the alter.")


def named(args: Any, guard: PointerGuard) -> tuple[str, str]:
    """(database, table) an alter names, as its ``args`` spell them."""
    return str(value_at(args, guard.db) or ""), str(value_at(args, guard.table) or "")


def new_parameters(args: Any, guard: PointerGuard) -> Mapping[str, str] | None:
    """The parameters of the alter's new table object; None when the call carries no table at all (nothing to
    guard: the metastore refuses it)."""
    new = value_at(args, guard.new)
    return None if new is None else new.parameters or {}


def read_request(args: Any, guard: PointerGuard) -> GetTableRequest:
    """The request of the read of the table an alter with ``args`` (in the member's names) changes (the
    :attr:`~waggle.hms.methods.PointerGuard.reads` call; a metastore without catalogs skips the catalog field)."""
    name = parse(value_at(args, guard.db))
    return GetTableRequest(dbName=name.db, tblName=value_at(args, guard.table),
                           catName=value_at(args, guard.catalog) or name.catalog)


def with_expectation(args: Any, guard: PointerGuard, current: str) -> Any | None:
    """A copy of an alter's ``args`` whose environment context asks the metastore to apply it only while the table's
    ``metadata_location`` is still ``current`` (the pointer the guard read), so that the check and the write are
    one step on the member. None where nothing changes: the method carries no environment context, or the client
    set the check itself (an Iceberg commit without Iceberg's lock does)."""
    if not guard.context:
        return None
    context = value_at(args, guard.context)
    properties = dict(context.properties or {}) if context is not None else {}
    if EXPECTED_KEY in properties:
        return None
    properties[EXPECTED_KEY] = METADATA_LOCATION
    properties[EXPECTED_VALUE] = current
    return replaced(args, [(guard.context, EnvironmentContext(properties=properties))])


def _shown(value: str | None) -> str:
    return "unset" if value is None else f"'{value}'"
