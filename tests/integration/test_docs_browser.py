"""The built docs site in a real headless Chromium (Debian's), offline: the front page's navigation and search box,
and a guide's Mermaid diagram drawn from the site's own copy of Mermaid.

The site is built with ``mkdocs build --strict`` from the repository's mkdocs.yml and docs/ (inherited, built into a
temporary directory; before a mkdocs.yml exists, a two-page fixture site), with the site's own Mermaid, which
scripts/setup.sh --test fetches and mkdocs.yml's ``extra_javascript`` loads. It is
served by ``http.server`` on 127.0.0.1, and Chromium resolves no other host, so a diagram drawn proves that Mermaid
came from the site and not from unpkg.com (mkdocs-material's fallback).

mkdocs-material draws each diagram into a *closed* shadow root, which no DOM dump shows; the test adds one script
of its own to the built site (:data:`PROBE`) that makes ``attachShadow`` draw into the element itself. The page,
the theme and Mermaid are otherwise as served. Chromium's ``--dump-dom`` with a virtual time budget gives the DOM
once the page's scripts have run.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.env import ROOT, require

SITE_MERMAID = "javascripts/mermaid.min.js"  # as mkdocs.yml's extra_javascript names it
MERMAID = ROOT / "docs" / SITE_MERMAID
CONFIG = ROOT / "mkdocs.yml"
PROBE_NAME = "waggle-test-probe.js"
#: Test instrument, added to the built site only: diagrams are drawn into the element, not a closed shadow root.
PROBE = "Element.prototype.attachShadow = function () { return this; };\n"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")

FIXTURE_CONFIG = """\
site_name: waggle (fixture)
theme:
  name: material
plugins:
  - search
markdown_extensions:
  - pymdownx.superfences:
      custom_fences:
        - name: mermaid
          class: mermaid
          format: !!python/name:pymdownx.superfences.fence_code_format
nav:
  - Home: index.md
  - Guides:
      - A guide: guides/diagram.md
"""
FIXTURE_PAGES = {
    "index.md": "# waggle\n\nA federating Hive Metastore proxy.\n",
    "guides/diagram.md": "# A guide\n\n```mermaid\nflowchart LR\n  c[clients] --> w[waggle] --> p[primary]\n```\n",
}


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _Tolerant(yaml.SafeLoader):
    """Reads mkdocs.yml's plain values, leaving its ``!!python/name`` and ``!ENV`` tags unread."""


_Tolerant.add_multi_constructor("", lambda loader, suffix, node: None)


def _extra_javascript(config: Path) -> list[str]:
    extra = (yaml.load(config.read_text(encoding="utf-8"), Loader=_Tolerant) or {}).get("extra_javascript") or []
    return [e if isinstance(e, str) else e["path"] for e in extra]


def _diagram_page(docs: Path) -> str:
    """The site path of a page with a Mermaid diagram, a guide's first."""
    pages = sorted(docs.rglob("*.md"), key=lambda p: (p.parts[len(docs.parts)] != "guides", str(p)))
    for page in pages:
        if "```mermaid" in page.read_text(encoding="utf-8"):
            rel = page.relative_to(docs).with_suffix("")
            return "" if rel.name == "index" and rel.parent == Path() else f"{rel}/".removesuffix("index/")
    raise AssertionError(f"no page under {docs} has a ```mermaid diagram")


def _build(tmp: Path) -> tuple[Path, str]:
    """Build the site into tmp; return its directory and the site path of the page with a diagram."""
    site = tmp / "site"
    config = tmp / "mkdocs.yml"
    if CONFIG.is_file():
        docs = ROOT / "docs"
        # the site's own Mermaid, whether or not mkdocs.yml names it yet (test_mkdocs_loads_the_sites_mermaid)
        extra = list(dict.fromkeys([*_extra_javascript(CONFIG), SITE_MERMAID, PROBE_NAME]))
        config.write_text(yaml.safe_dump({"INHERIT": str(CONFIG), "docs_dir": str(docs), "site_dir": str(site),
                                          "extra_javascript": extra}))
    else:
        docs = tmp / "docs"
        for name, text in FIXTURE_PAGES.items():
            (docs / name).parent.mkdir(parents=True, exist_ok=True)
            (docs / name).write_text(text)
        (docs / "javascripts").mkdir()
        shutil.copy(MERMAID, docs / "javascripts" / "mermaid.min.js")
        config.write_text(FIXTURE_CONFIG + yaml.safe_dump({
            "docs_dir": str(docs), "site_dir": str(site),
            "extra_javascript": [SITE_MERMAID, PROBE_NAME]}))
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(config)],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr
    (site / PROBE_NAME).write_text(PROBE)
    return site, _diagram_page(docs)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL of the built site, site path of a page with a diagram)."""
    require(_chromium() is not None, "Chromium is needed for the docs browser test (scripts/setup.sh --test "
            "installs Debian's chromium)")
    require(importlib.util.find_spec("material") is not None, "mkdocs-material is needed to build the docs site")
    require(MERMAID.is_file(), f"{MERMAID.relative_to(ROOT)} is needed (scripts/setup.sh --test fetches it from "
            "the npm registry)")
    site, page = _build(tmp_path_factory.mktemp("docs-site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", page
    finally:
        server.shutdown()
        server.server_close()


def _dom(url: str, profile: Path) -> str:
    chromium = _chromium()
    assert chromium is not None
    done = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=15000",
                           "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout


def test_mkdocs_loads_the_sites_mermaid() -> None:
    """mkdocs-material fetches Mermaid from unpkg.com unless a page already has it: the site must bring its own."""
    require(CONFIG.is_file(), "no mkdocs.yml yet")
    assert SITE_MERMAID in _extra_javascript(CONFIG), f"mkdocs.yml: add {SITE_MERMAID} to extra_javascript"


def test_the_front_page_has_navigation_and_search(served: tuple[str, str], tmp_path: Path) -> None:
    base, page = served
    dom = _dom(base, tmp_path / "profile")
    assert re.search(r'<nav class="md-nav md-nav--primary[ "]', dom), "no primary navigation"
    assert f'href="{page}"' in dom or f'href="./{page}"' in dom, f"the navigation has no link to {page}"
    assert re.search(r'<input [^>]*class="md-search__input"', dom), "no search box"


def test_a_guide_draws_its_diagram_offline(served: tuple[str, str], tmp_path: Path) -> None:
    base, page = served
    dom = _dom(base + page, tmp_path / "profile")
    assert re.search(r'<div class="mermaid"><svg [^>]*id="__mermaid_0"', dom), "no drawn diagram"
    assert re.search(r"<g [^>]*class=\"[^\"]*node", dom), "the diagram has no nodes"
