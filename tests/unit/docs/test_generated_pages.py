"""Every generated page of the docs site is what the code renders now (``python -m waggle.docs`` writes them)."""

from __future__ import annotations

import pytest

from waggle.docs import COMMAND
from waggle.docs.pages import PAGES, ROOT, Page


@pytest.mark.parametrize("page", PAGES, ids=[p.path for p in PAGES])
def test_the_committed_page_is_current(page: Page) -> None:
    path = ROOT / page.path
    assert path.is_file(), f"{page.path} is missing: run {COMMAND}"
    assert path.read_text(encoding="utf-8") == page.render(), f"{page.path} is stale: run {COMMAND}"


@pytest.mark.parametrize("page", PAGES, ids=[p.path for p in PAGES])
def test_a_page_says_under_its_title_that_it_is_generated_and_how(page: Page) -> None:
    lines = page.render().splitlines()
    assert lines[0].startswith("# ") and lines[1] == ""
    assert lines[2].startswith("*Generated from ") and f"by `{COMMAND}`" in lines[2]


def test_the_pages_are_plain_markdown() -> None:
    """mkdocs-material renders them with no raw HTML: a `<word` outside code would be read as a tag."""
    import re

    for page in PAGES:
        if page.path == "docs/compatibility.md":
            continue  # its cells break lines with <br> (issue 28 leaves its content to its own branch)
        prose = re.sub(r"`[^`]*`", "", page.render())
        assert re.findall(r"<[A-Za-z!/]", prose) == [], page.path
