"""The generated pages of the docs site: every reference page is rendered from the code it describes.

``python -m waggle.docs`` writes them all (:data:`waggle.docs.pages.PAGES`); ``python -m waggle.docs --check``
exits 1 naming each committed page that differs from what the code renders now. A unit test does the same.

This module holds only what every page's renderer shares (so that :mod:`waggle.hms.methods_doc` and the others
import it without importing each other).
"""

from __future__ import annotations

#: The one command that writes every generated page.
COMMAND = "python -m waggle.docs"


def generated(sources: str) -> str:
    """The line under a generated page's title: where it comes from and how to write it again."""
    return f"*Generated from {sources} by `{COMMAND}`. Do not edit by hand.*"
