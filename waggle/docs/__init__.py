"""The generated pages of the docs site: every reference page is rendered from the code it describes.

``python -m waggle.docs`` writes them all (:data:`waggle.docs.pages.PAGES`); ``python -m waggle.docs --check``
exits 1 naming each committed page that differs from what the code renders now. A unit test does the same.

This module holds only what every page's renderer shares (so that :mod:`waggle.docs.methods_page` and the others
import it without importing each other): the line under a page's title, and links that read as the pages' titles in
the site's navigation. :mod:`waggle.docs.site_hooks` is the site's mkdocs hook, which mkdocs.yml loads by path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

#: The one command that writes every generated page.
COMMAND = "python -m waggle.docs"
#: The docs site's configuration: its ``nav`` names every page.
MKDOCS = Path(__file__).resolve().parents[2] / "mkdocs.yml"


def generated(sources: str) -> str:
    """The line under a generated page's title: where it comes from and how to write it again."""
    return f"*Generated from {sources} by `{COMMAND}`. Do not edit by hand.*"


class _Tolerant(yaml.SafeLoader):
    """Reads mkdocs.yml's plain values, leaving its ``!!python/name`` and ``!ENV`` tags unread."""


_Tolerant.add_multi_constructor("", lambda loader, suffix, node: None)


def titles(config: Path = MKDOCS) -> dict[str, str]:
    """Each page's title in the site's navigation (mkdocs.yml ``nav``), by its path under docs/."""
    found: dict[str, str] = {}

    def walk(items: list[Any]) -> None:
        for item in items:
            if isinstance(item, dict):
                for title, target in item.items():
                    if isinstance(target, list):
                        walk(target)
                    elif isinstance(target, str):
                        found[target] = str(title)

    walk((yaml.load(config.read_text(encoding="utf-8"), Loader=_Tolerant) or {}).get("nav") or [])
    return found


def link(path: str, start: str, found: dict[str, str] | None = None) -> str:
    """A Markdown link to the page at ``path`` (under the repository's root, ``docs/...``) that reads as the page's
    title in the site's navigation, from a page in the directory ``start`` (under docs/, such as ``reference``)."""
    page = path.removeprefix("docs/")
    title = (titles() if found is None else found).get(page)
    if title is None:
        raise LookupError(f"{path} has no title in {MKDOCS.name}'s nav")
    up = "../" * len(Path(start).parts)
    return f"[{title}]({up}{page})"
