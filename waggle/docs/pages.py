"""Every generated page of the docs site: its path under the repository and the function that renders it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from waggle.docs.cli_page import render as cli_page
from waggle.docs.compat_page import render as compatibility_page
from waggle.docs.config_page import configuration_page, sync_configuration_page
from waggle.docs.helm_page import render as helm_page
from waggle.docs.methods_page import render as methods_page
from waggle.docs.metrics_page import render as metrics_page

#: The repository's root: pages are written under it.
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Page:
    path: str  # relative to the repository's root
    render: Callable[[], str]


PAGES: tuple[Page, ...] = (
    Page("docs/reference/configuration.md", configuration_page),
    Page("docs/reference/sync-configuration.md", sync_configuration_page),
    Page("docs/reference/metrics.md", metrics_page),
    Page("docs/reference/cli.md", cli_page),
    Page("docs/reference/helm-values.md", helm_page),
    Page("docs/supported-methods.md", methods_page),
    Page("docs/compatibility.md", compatibility_page),
)


def stale(root: Path = ROOT) -> list[str]:
    """The pages whose committed text differs from what the code renders now (or that are missing)."""
    out = []
    for page in PAGES:
        path = root / page.path
        if not path.is_file() or path.read_text(encoding="utf-8") != page.render():
            out.append(page.path)
    return out


def write(root: Path = ROOT) -> list[str]:
    """Write every page; return the paths whose text changed."""
    changed = []
    for page in PAGES:
        path = root / page.path
        text = page.render()
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        changed.append(page.path)
    return changed
