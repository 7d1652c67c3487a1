"""docs/supported-methods.md is generated from the method table; test_generated_pages.py checks it is current."""

from __future__ import annotations

import subprocess
import sys

from waggle.docs.methods_page import render
from waggle.hms.methods import METHODS, STRUCT_DB_FIELDS


def test_every_method_and_struct_is_on_the_page() -> None:
    page = render()
    assert [name for name in METHODS if f"| `{name}` |" not in page] == []
    assert [name for name in STRUCT_DB_FIELDS if f"| `{name}` |" not in page] == []


def test_paths_are_written_as_the_request_carries_them() -> None:
    rows = {line.split(" | ")[0].strip("| `"): line for line in render().splitlines() if line.startswith("| `")}
    assert "| `get_table` | database | read | see | `dbname` |" in rows["get_table"]
    assert "`pattern` (pattern), returns database names" in rows["get_databases"]
    assert "`new_parts[].dbName`" in rows["add_partitions"]
    assert "`rqst.fullTableNames[]` (db.table)" in rows["get_valid_write_ids"]
    assert "`hiveObject.objectName` (DATABASE objects only)" in rows["get_privilege_set"]
    # deeper than database_of looks: the rewriter reaches it, so the page lists it
    assert "`new_parts[].partitionList.partitions[].colStats.statsDesc.dbName`" in rows["add_partitions_pspec"]
    assert "| `open_txns` | primary | write | update | - |" in rows["open_txns"]
    assert "| `drop_table` | database | write | drop |" in rows["drop_table"]


def test_check_flag() -> None:
    done = subprocess.run([sys.executable, "-m", "waggle.docs.methods_page", "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
