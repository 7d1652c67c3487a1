"""The compatibility page, generated from the version bridges so that the two cannot drift apart.

``python -m waggle.docs`` writes it, with the other generated pages; a unit test fails when the committed
page differs. Rows and cells come from :func:`matrix`, which follows the version bridges of
:mod:`waggle.hms.bridges`; each cell names the test case that covers it
(``tests/integration/test_compat_matrix.py::test_cell[<row>-<client>-<upstream>]``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from waggle.config.hive_values import Version
from waggle.docs import COMMAND, generated
from waggle.hms.bridges import _ALL, HIVE_3, HIVE_4
from waggle.hms.declared import DECLARED
from waggle.hms.declared import RELEASES as DECLARING_RELEASES

# -- the compatibility matrix ---------------------------------------------------------------------------------
#: The releases in the matrix, each represented by one concrete version.
RELEASES: dict[str, Version] = {"2.3": (2, 3, 10), "3.1": (3, 1, 3), "4.x": (4, 0, 1)}
MATRIX_TEST = "tests/integration/test_compat_matrix.py::test_cell"


@dataclass(frozen=True, slots=True)
class Cell:
    client: str
    upstream: str
    outcome: str  # what waggle does

    def test_id(self, row: str) -> str:
        return f"{row}-{self.client}-{self.upstream}"


@dataclass(frozen=True, slots=True)
class Row:
    key: str  # test id part
    call: str  # what the client sends
    cells: tuple[Cell, ...]  # only where the client's release sends this call


#: Calls that carry catalogs, and which client releases send them (Hive 2 clients never do).
CATALOG_ROWS = (
    ("get_databases_all", 'get_databases("@hive#")'),
    ("get_table_meta_pattern", 'get_table_meta("@hive#<prefix>*", ...)'),
    ("get_database_qualified", 'get_database("@hive#<db>")'),
    ("get_table_req_catname", "get_table_req with catName"),
)


def matrix() -> list[Row]:
    """Client release x upstream release x call: what waggle does. Rows follow :data:`BRIDGES` and the catalog
    rules; every cell is a case of :data:`MATRIX_TEST`."""
    rows = []
    for key, call in CATALOG_ROWS:
        cells = []
        for client, cv in RELEASES.items():
            if cv < HIVE_3:
                continue  # Hive 2 clients never name a catalog
            for upstream, uv in RELEASES.items():
                outcome = "relayed" if uv >= HIVE_3 else "catalog removed; replies carry catName"
                cells.append(Cell(client, upstream, outcome))
        rows.append(Row(key, call, tuple(cells)))
    for bridge in _ALL:
        cells = []
        for client, cv in RELEASES.items():
            if not bridge.exists_in(cv):
                continue
            if bridge.method == "get_table_objects_by_name_req" and cv < HIVE_4:
                continue  # the row is about tablesPattern, which only Hive 4 clients send
            for upstream, uv in RELEASES.items():
                if bridge.impossible_before is not None and uv < bridge.impossible_before:
                    outcome = "MetaException: no equivalent"
                elif bridge.method == "get_table_objects_by_name_req":
                    outcome = f"via {bridge.via} (relayed when hive-version is 4 or later)"
                elif bridge.method == "fire_listener_event":  # one struct's field ids, not a method, differ
                    outcome = "relayed" if (cv >= HIVE_3) == (uv >= HIVE_3) else "InsertEventRequestData renumbered"
                elif bridge.exists_in(uv):
                    outcome = "relayed"
                else:
                    outcome = f"via {bridge.via}"
                cells.append(Cell(client, upstream, outcome))
        rows.append(Row(bridge.method, bridge.method + ("(tablesPattern)" if bridge.method ==
                                                         "get_table_objects_by_name_req" else ""), tuple(cells)))
    return rows


# -- the page -------------------------------------------------------------------------------------------------
DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
REGENERATE = COMMAND

_INTRO = f"""\
# Compatibility: Hive client releases over Hive metastore releases

{generated("waggle/hms/bridges.py")}

waggle serves the union of the Hive 2.3, 3.1 and 4.x metastore APIs. A client of any of these releases can
use a metastore of any of them through waggle: each cell below says what waggle does with one call when a
client of one release (rows) meets a metastore of another (columns).

- **relayed**: the metastore has the call; it goes as the client sent it.
- **via ...**: the metastore lacks the call (it answered `UNKNOWN_METHOD`, or its `hive-version` says so), and
  waggle answers it with the calls named. What a metastore lacks is learned once per connection pool, never
  probed per call.
- **catalog removed**: the metastore has no catalogs (Hive 2), so `@hive#db` reaches it as `db` (`@hive#` as
  all databases) and its replies are given the catalog the client named (`catName`, `catalogName`).
- **MetaException**: no older call can do it; the client gets a `MetaException` naming the metastore.
- Calls not listed are the same in every release, or exist only in releases that have them: a call the
  metastore does not have and that no older call can stand in for gets the metastore's own
  `TApplicationException`.

Each cell names its test: `{MATRIX_TEST}[<call>-<client>-<upstream>]`. In the tests the Hive 2.3 metastore
is real; the Hive 3.1 and 4.x metastores are stubs around a real Hive 2.3 one (`tests/support/hive_stubs.py`), since
neither runs locally.
"""


def render() -> str:
    upstreams = list(RELEASES)
    lines = [_INTRO, "## The matrix", "",
             "| Call | Client | " + " | ".join(f"Hive {u} metastore" for u in upstreams) + " |",
             "|---|---|" + "---|" * len(upstreams)]
    for row in matrix():
        clients = sorted({c.client for c in row.cells}, key=list(RELEASES).index)
        for client in clients:
            cells = {c.upstream: c for c in row.cells if c.client == client}
            rendered = [f"{cells[u].outcome}<br>`{cells[u].test_id(row.key)}`" if u in cells else "—"
                        for u in upstreams]
            lines.append(f"| `{row.call}` | Hive {client} | " + " | ".join(rendered) + " |")
    lines += ["", "## Bridges", "",
              "| Call | Hive releases that have it | Answered on other releases with | Note |", "|---|---|---|---|"]
    for bridge in _ALL:
        since = _show(bridge.since)
        have = f"{since} and later" if bridge.removed is None else \
            f"{since} up to, not including, {_show(bridge.removed)}"
        lines.append(f"| `{bridge.method}` | {have} | {bridge.via} | {bridge.note} |")
    lines += ["", "Set `hive-version` on a metastore to apply the bridges from the first call; without it each gap "
              "costs one `UNKNOWN_METHOD` answer per connection pool, the first time.", ""]
    lines += declared_errors()
    return "\n".join(lines)


_ERRORS_INTRO = """## Errors, where each release reads them

A client reads a declared exception only at the field id its own Hive release declares for it; any other field is
"unknown result" to it, or another class. These methods are declared differently across releases (derived from the
Hive 2.3.10 jar, Hive 3.1's generated code and waggle's IDL by `scripts/declared_exceptions.py`, into
`waggle/hms/declared.py`):
"""

_ERRORS_RULE = """An error waggle writes itself (a member down or unreachable, a refusal, an overload) is put where the
client's release reads it. waggle learns the release per connection, from the calls themselves and without
asking anything: a connection that has named a catalog (`@hive#db`, `catName`) is a Hive 3+ client; one that
named a database without a catalog in an earlier call, and never a catalog, is a Hive 2 client (Spark's built-in
client fetches a table before it lists its partitions, on one connection); a connection's first database-naming
call gets the layout Hive 3.1 and 4 agree on (Trino opens a connection per operation). Where those releases agree
on no field (a method Hive 3.1 declares without exceptions), the message travels as a `TApplicationException`.
A Hive 2 metastore's own exception is moved the same way for a newer client (its `MetaException` at field 1 of
`get_partition_names` is never read as a `NoSuchObjectException`); whether a metastore is Hive 2 is its
`hive-version`, else whether it has catalogs, asked once.
"""


def declared_errors() -> list[str]:
    """The section on exceptions declared differently across releases, from :data:`DECLARED`."""
    shown = {r: f"Hive {r}" + (" (waggle's IDL)" if r == DECLARING_RELEASES[-1] else "") for r in DECLARING_RELEASES}
    lines = [_ERRORS_INTRO, "| Method | " + " | ".join(shown.values()) + " |",
             "|---|" + "---|" * len(DECLARING_RELEASES)]
    for method, layouts in DECLARED.items():
        cells = [", ".join(f"{fid}: {cls}" for fid, cls in layouts[r]) or "none" if r in layouts else "—"
                 for r in DECLARING_RELEASES]
        lines.append(f"| `{method}` | " + " | ".join(cells) + " |")
    return [*lines, "", _ERRORS_RULE]


def _show(version: tuple[int, ...]) -> str:
    """(4, 0, 0) -> "4.0"; (4, 0, 1) -> "4.0.1"."""
    parts = list(version)
    while len(parts) > 2 and parts[-1] == 0:
        parts.pop()
    return ".".join(map(str, parts))


def main() -> None:  # pragma: no cover - documentation helper
    sys.stdout.write(render())


if __name__ == "__main__":  # pragma: no cover
    main()
