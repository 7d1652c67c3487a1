"""docs/compatibility.md is generated from the version bridges and names a test for every cell."""

from __future__ import annotations

from waggle.docs.compat_page import matrix, render


def test_every_cell_names_its_test() -> None:
    page = render()
    for row in matrix():
        for cell in row.cells:
            assert f"`{cell.test_id(row.key)}`" in page
