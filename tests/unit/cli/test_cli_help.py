"""``waggle --help`` and each command's help lead with an example and point to the docs pages that exist."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from waggle.cli import CLI_REFERENCE, DOCS, EXAMPLES, build_parser, site_page

ROOT = Path(__file__).resolve().parents[3]


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"waggle": parser, **{name: p for name, p in sub.choices.items() if not name.startswith("_")}}


def test_every_command_has_an_example_and_docs() -> None:
    assert set(_parsers()) == set(EXAMPLES) == set(DOCS)


@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_help_leads_with_an_example_and_ends_with_docs(command: str) -> None:
    text = _parsers()[command].format_help()
    after_usage = text.split("\n\n", 1)[1]  # argparse prints the usage first, then the description
    assert after_usage.startswith("Example:")
    for line in EXAMPLES[command]:
        assert line in after_usage and line.startswith("waggle" if command == "waggle" else f"waggle {command}")
    # pages of the docs site, not paths of a clone (an installed waggle has none), and how to read them
    docs = text.rsplit("\nDocs, pages of waggle's docs site (from a clone, ./scripts/docs.sh builds it and serves it "
                       "on http://127.0.0.1:8000/):\n", 1)[1]
    assert "docs/" not in docs and ".md" not in docs
    for path in (*DOCS[command], CLI_REFERENCE):
        assert f"  {site_page(path)}" in docs


@pytest.mark.parametrize("path", sorted({p for paths in DOCS.values() for p in paths} | {CLI_REFERENCE}))
def test_the_docs_pages_that_help_names_exist(path: str) -> None:
    assert (ROOT / path).is_file(), f"{path}: named by waggle.cli.DOCS, not in docs/"


def test_the_examples_parse() -> None:
    import shlex

    for lines in EXAMPLES.values():
        for line in lines:
            words = shlex.split(line)
            assert build_parser().parse_args(words[1:]).command == words[1]


def test_a_docs_page_is_named_as_the_site_serves_it() -> None:
    assert site_page("docs/guides/sync.md") == "guides/sync/"
    assert site_page("docs/operations/index.md") == "operations/"
    assert site_page("docs/index.md") == ""
    assert "use_directory_urls" not in (ROOT / "mkdocs.yml").read_text()  # the site serves pages there (the default)
