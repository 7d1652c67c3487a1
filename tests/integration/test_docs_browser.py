"""The built docs site in a real headless Chromium (Debian's), offline, in a 1280 x 900 window: the front page's
navigation and search box; every Mermaid diagram drawn from the site's own copy of Mermaid, its text legible at 1x;
and on every page, no code block that scrolls sideways, no copy button over code, no word in code (a flag such as
``--federation-config``) broken at a hyphen, no drawing in a code block wrapped, and in the generated pages no link
that reads as a ``.md`` path.

The site is built with ``mkdocs build --strict`` from the repository's mkdocs.yml and docs/ (inherited, built into a
temporary directory; before a mkdocs.yml exists, a two-page fixture site), with the site's own Mermaid, which
scripts/setup.sh --test fetches and mkdocs.yml's ``extra_javascript`` loads. It is
served by ``http.server`` on 127.0.0.1, and Chromium resolves no other host, so a diagram drawn proves that Mermaid
came from the site and not from unpkg.com (mkdocs-material's fallback).

The test adds one script of its own to the built site (:data:`PROBE`); the page, the theme and Mermaid are
otherwise as served. mkdocs-material draws each diagram into a *closed* shadow root, which no script can read; the
probe has it opened instead (still a shadow root, so the page's stylesheets reach into it no more than they do for
a reader). Once the page's diagrams are drawn, the probe measures the page as laid out and writes what it found into
the DOM as JSON. The pages are opened in frames of the window's size, a
share of them in each of two Chromiums, by a harness page that gathers their reports (:func:`_harness`); Chromium's
``--dump-dom`` with a virtual time budget gives the harness's DOM once the pages' scripts have run. Each page measures
as it does alone in the window (checked: the same reports for all 45 pages).
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.env import ROOT, require

SITE_MERMAID = "javascripts/mermaid.min.js"  # as mkdocs.yml's extra_javascript names it
MERMAID = ROOT / "docs" / SITE_MERMAID
CONFIG = ROOT / "mkdocs.yml"
PROBE_NAME = "waggle-test-probe.js"
HARNESS_PREFIX = "waggle-test-harness-"
#: The window every page is measured in.
WIDTH, HEIGHT = 1280, 900
#: The smallest diagram text, in CSS pixels as drawn (font-size times the SVG's scale on the page).
MIN_DIAGRAM_FONT_PX = 12.0
#: Test instrument, added to the built site only. Diagrams are drawn into open shadow roots; once they are drawn
#: (or 10 s after load), the page is measured and the report written as JSON into <script id="waggle-probe">.
PROBE = r"""
(() => {
  const attach = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (init) { return attach.call(this, { ...init, mode: "open" }); };
  const expected = document.querySelectorAll("pre.mermaid").length;
  const svgOf = (el) => (el.shadowRoot || el).querySelector("svg");
  const drawn = () => [...document.querySelectorAll("div.mermaid")].filter(svgOf);
  const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const short = (text) => text.trim().replace(/\s+/g, " ").slice(0, 80);
  const rects = (node, start, end) => {
    const range = document.createRange();
    range.setStart(node, start);
    range.setEnd(node, end);
    return [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
  };
  const texts = (root) => {
    const out = [];
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) out.push(node);
    return out;
  };

  function diagram(el) {
    const svg = svgOf(el);
    if (!svg) return { drawn: false };
    let min = null;
    let smallest = "";
    for (const node of texts(svg)) {
      const host = node.parentElement && node.parentElement.closest("foreignObject, text");
      if (!host || !node.data.trim()) continue;  // the SVG's <style>, or white space
      const ctm = host.getScreenCTM();
      const px = parseFloat(getComputedStyle(node.parentElement).fontSize) * Math.hypot(ctm.a, ctm.b);
      if (min === null || px < min) { min = px; smallest = short(node.data); }
    }
    return { drawn: true, id: svg.id, nodes: svg.querySelectorAll("g.node").length, minFontPx: min, smallest,
             width: Math.round(svg.getBoundingClientRect().width),
             viewBoxWidth: Math.round(svg.viewBox.baseVal.width) };
  }

  function covered(code) {  // the words of a code block under its copy button
    const nav = code.parentElement.querySelector(":scope > .md-code__nav");
    if (!nav) return [];
    const box = nav.getBoundingClientRect();
    const out = [];
    for (const node of texts(code)) {
      const all = rects(node, 0, node.length);
      if (all.length && all[0].top >= box.bottom) break;
      for (const m of node.data.matchAll(/\S+/g)) {
        if (rects(node, m.index, m.index + m[0].length).some((r) => hit(r, box))) out.push(m[0]);
      }
    }
    return out;
  }

  function broken(code) {  // the words of up to 40 characters with a hyphen that a line break splits
    const out = [];
    for (const node of texts(code)) {
      for (const m of node.data.matchAll(/\S+/g)) {
        if (m[0].length > 40 || !m[0].includes("-") || !/[A-Za-z0-9]/.test(m[0])) continue;
        const lines = new Set(rects(node, m.index, m.index + m[0].length).map((r) => Math.round(r.top)));
        if (lines.size > 1) out.push(m[0]);
      }
    }
    return out;
  }

  function torn(code) {  // a block whose lines do not each take one line on the page
    const range = document.createRange();
    range.selectNodeContents(code);
    const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
    return tops.size > code.textContent.replace(/\n$/, "").split("\n").length;
  }

  function measure() {
    document.querySelectorAll("details").forEach((d) => { d.open = true; });
    const blocks = [...document.querySelectorAll("pre > code")];
    return {
      width: window.innerWidth,
      expectedDiagrams: expected,
      diagrams: [...document.querySelectorAll(".mermaid")].map(diagram),
      overflowing: blocks.filter((c) => c.scrollWidth > c.clientWidth)
        .map((c) => ({ scrollWidth: c.scrollWidth, clientWidth: c.clientWidth, start: short(c.textContent) })),
      copyButtonOver: blocks.map((c) => ({ words: covered(c), start: short(c.textContent) }))
        .filter((c) => c.words.length),
      brokenWords: [...document.querySelectorAll(".md-content code")].flatMap(broken),
      tornDrawings: blocks.filter((c) => /[\u2500-\u257f]/.test(c.textContent) && torn(c))
        .map((c) => short(c.textContent)),
      pathLinks: [...document.querySelectorAll(".md-content a[href]")]
        .map((a) => a.textContent.trim()).filter((t) => /\.md(#\S*)?$/.test(t)),
    };
  }

  function report() {
    let out = document.getElementById("waggle-probe");
    if (!out) {
      out = document.createElement("script");
      out.type = "application/json";
      out.id = "waggle-probe";
      document.body.append(out);
    }
    out.textContent = JSON.stringify(measure()).replace(/</g, "\\u003c");
  }

  addEventListener("load", () => {
    const loaded = performance.now();
    const poll = () => {
      if (drawn().length >= expected || performance.now() - loaded > 10000) setTimeout(report, 250);
      else setTimeout(poll, 100);
    };
    poll();
  });
})();
"""
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--window-size={WIDTH},{HEIGHT}",
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


def _setting(config: Path, key: str) -> list[Any]:
    return list((yaml.load(config.read_text(encoding="utf-8"), Loader=_Tolerant) or {}).get(key) or [])


def _extra_javascript(config: Path) -> list[str]:
    return [e if isinstance(e, str) else e["path"] for e in _setting(config, "extra_javascript")]


def _site_path(docs: Path, page: Path) -> str:
    """The site path of a page under docs (``guides/copies/``; ``""`` for the front page)."""
    rel = page.relative_to(docs).with_suffix("")
    return "" if rel.name == "index" and rel.parent == Path() else f"{rel}/".removesuffix("index/")


def _diagram_page(docs: Path) -> str:
    """The site path of a page with a Mermaid diagram, a guide's first."""
    pages = sorted(docs.rglob("*.md"), key=lambda p: (p.parts[len(docs.parts)] != "guides", str(p)))
    for page in pages:
        if "```mermaid" in page.read_text(encoding="utf-8"):
            return _site_path(docs, page)
    raise AssertionError(f"no page under {docs} has a ```mermaid diagram")


def _generated_pages(docs: Path) -> list[str]:
    """The site paths of the pages ``python -m waggle.docs`` writes."""
    if docs != ROOT / "docs":
        return []
    from waggle.docs.pages import PAGES

    return [_site_path(docs, ROOT / page.path) for page in PAGES]


def _build(tmp: Path) -> tuple[Path, Path]:
    """Build the site into tmp; return its directory and the docs directory it was built from."""
    site = tmp / "site"
    config = tmp / "mkdocs.yml"
    if CONFIG.is_file():
        docs = ROOT / "docs"
        # the site's own Mermaid, whether or not mkdocs.yml names it yet (test_mkdocs_loads_the_sites_mermaid)
        extra = list(dict.fromkeys([*_extra_javascript(CONFIG), SITE_MERMAID, PROBE_NAME]))
        # mkdocs reads the hooks' paths as relative to this file, not to the one it inherits
        hooks = [str(ROOT / hook) for hook in _setting(CONFIG, "hooks")]
        config.write_text(yaml.safe_dump({"INHERIT": str(CONFIG), "docs_dir": str(docs), "site_dir": str(site),
                                          "extra_javascript": extra, "hooks": hooks}))
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
    return site, docs


def _pages(site: Path) -> list[str]:
    """The site path of every page of the built site."""
    return sorted(f"{p.parent.relative_to(site)}/" if p.parent != site else "" for p in site.rglob("index.html"))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass(frozen=True)
class Site:
    """The built site, served."""

    base: str  # its URL
    root: Path  # the directory it is served from
    diagram_page: str  # the site path of a page with a diagram
    pages: list[str]  # the site path of every page
    generated: list[str]  # those of the pages python -m waggle.docs writes


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    require(_chromium() is not None, "Chromium is needed for the docs browser test (scripts/setup.sh --test "
            "installs Debian's chromium)")
    require(importlib.util.find_spec("material") is not None, "mkdocs-material is needed to build the docs site")
    require(MERMAID.is_file(), f"{MERMAID.relative_to(ROOT)} is needed (scripts/setup.sh --test fetches it from "
            "the npm registry)")
    site, docs = _build(tmp_path_factory.mktemp("docs-site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Site(f"http://127.0.0.1:{server.server_address[1]}/", site, _diagram_page(docs), _pages(site),
                   _generated_pages(docs))
    finally:
        server.shutdown()
        server.server_close()


def _dom(url: str, profile: Path, budget_ms: int = 15000) -> str:
    """The DOM of ``url`` once its scripts have run for ``budget_ms`` of virtual time (timers fast-forwarded)."""
    chromium = _chromium()
    assert chromium is not None
    done = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                           "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout


def _harness(pages: list[str]) -> str:
    """A page that opens ``pages`` each in a frame of the window's size, all at the top left corner (so that none is
    off screen, which Chromium would not render), and writes their probes' reports, once all are in, into
    <script id="waggle-harness"> as JSON."""
    frame = f"position:absolute;top:0;left:0;width:{WIDTH}px;height:{HEIGHT}px;border:0"
    return f"""<!doctype html><html><head><meta charset="utf-8"></head><body style="margin:0"><script>
const pages = {json.dumps(pages)};
const loaded = new Map();  // frame -> when its page's load event came
const frames = pages.map((page) => {{
  const f = document.createElement("iframe");
  f.src = "/" + page;
  f.style.cssText = "{frame}";
  f.addEventListener("load", () => loaded.set(f, performance.now()));
  document.body.append(f);
  return f;
}});
const report = (f) => f.contentDocument && f.contentDocument.getElementById("waggle-probe");
// a page's probe reports at most 10 s after the page's load (then 250 ms): a frame is done once it has, or 12 s
// after its load, or when it has not loaded in 30 s
const started = performance.now();
const done = (f, now) => report(f) || (loaded.has(f) ? now - loaded.get(f) > 12000 : now - started > 30000);
const collect = () => {{  // every page's report, or null for a page without one
  if (!frames.every((f) => done(f, performance.now()))) {{ setTimeout(collect, 100); return; }}
  const reports = frames.map((f, i) => [pages[i], report(f) ? JSON.parse(report(f).textContent) : null]);
  const out = document.createElement("script");
  out.type = "application/json";
  out.id = "waggle-harness";
  out.textContent = JSON.stringify(Object.fromEntries(reports)).replace(/</g, "\\u003c");
  document.body.append(out);
}};
addEventListener("load", collect);
</script></body></html>"""


#: Chromiums measuring the pages at once, each with its share of them in frames: one per core (a Chromium's start
#: costs about as much as measuring a dozen pages; 45 pages took 60 s in Chromiums of one page each, four at a time,
#: and 18 s in two)
CHROMIUMS = 2
#: the virtual time a harness may take: past its last page's 30 s to load and 12 s to report
HARNESS_BUDGET_MS = 45000


@pytest.fixture(scope="module")
def measured(served: Site, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Site path -> the probe's report, for every page: the pages in frames of a few harness pages
    (:func:`_harness`), each harness in one Chromium."""
    work = tmp_path_factory.mktemp("harness")
    batches = [served.pages[i::CHROMIUMS] for i in range(CHROMIUMS)]

    def one(index: int) -> dict[str, dict[str, Any]]:
        name = f"{HARNESS_PREFIX}{index}.html"
        (served.root / name).write_text(_harness(batches[index]))
        url = served.base + name
        dom = _dom(url, work / f"profile-{index}", budget_ms=HARNESS_BUDGET_MS)
        found = re.search(r'<script type="application/json" id="waggle-harness">(.*?)</script>', dom, re.S)
        assert found, f"{url}: the harness wrote nothing (did it load?)"
        reports: dict[str, dict[str, Any]] = json.loads(found.group(1))
        silent = [page for page, report in reports.items() if report is None]
        assert not silent, f"the probe wrote no report on {silent} (did the pages load their scripts?)"
        return reports

    with ThreadPoolExecutor(max_workers=CHROMIUMS) as pool:
        return {page: report for reports in pool.map(one, range(len(batches))) for page, report in reports.items()}


def _failures(measured: dict[str, dict[str, Any]], key: str) -> dict[str, Any]:
    return {page: report[key] for page, report in measured.items() if report[key]}


def test_mkdocs_loads_the_sites_mermaid() -> None:
    """mkdocs-material fetches Mermaid from unpkg.com unless a page already has it: the site must bring its own."""
    require(CONFIG.is_file(), "no mkdocs.yml yet")
    assert SITE_MERMAID in _extra_javascript(CONFIG), f"mkdocs.yml: add {SITE_MERMAID} to extra_javascript"


def test_the_sites_hook_changes_markup_only() -> None:
    """waggle/docs/site_hooks.py (what the stylesheet needs marked) leaves every page's text as it was."""
    from waggle.docs.site_hooks import on_page_content

    page = ('<p>not-code</p><p><code>waggle --federation-config x-y.yml</code></p>'
            '<pre class="mermaid"><code>a --&gt;|--follow| b</code></pre>'
            '<div class="highlight"><pre><span></span><code>tree\n\u251c\u2500 a-b\n</code></pre></div>')
    out = on_page_content(page)
    assert re.sub(r"<[^>]*>", "", out) == re.sub(r"<[^>]*>", "", page)
    assert '<code>waggle <span class="nobreak">--federation-config</span> <span class="nobreak">x-y.yml</span>' in out
    assert "<p>not-code</p>" in out and '<code>a --&gt;|--follow| b</code>' in out, "only code, and no diagram"
    assert '<pre class="drawing" style="--columns: 6">' in out


def test_the_front_page_has_navigation_and_search(served: Site, tmp_path: Path) -> None:
    dom = _dom(served.base, tmp_path / "profile")
    page = served.diagram_page
    assert re.search(r'<nav class="md-nav md-nav--primary[ "]', dom), "no primary navigation"
    assert f'href="{page}"' in dom or f'href="./{page}"' in dom, f"the navigation has no link to {page}"
    assert re.search(r'<input [^>]*class="md-search__input"', dom), "no search box"


def test_a_guide_draws_its_diagram_offline(served: Site, measured: dict[str, dict[str, Any]]) -> None:
    report = measured[served.diagram_page]
    assert report["diagrams"], f"{served.diagram_page}: no diagram"
    first = report["diagrams"][0]
    assert first["drawn"] and first["id"] == "__mermaid_0", f"{served.diagram_page}: no drawn diagram: {first}"
    assert first["nodes"] > 0, f"{served.diagram_page}: the diagram has no nodes"


def test_every_diagram_is_drawn_with_text_legible_at_1x(measured: dict[str, dict[str, Any]]) -> None:
    """Each diagram's smallest text, as drawn at 1280 px (a wide diagram is scaled down to the page's width)."""
    undrawn = {page: r["expectedDiagrams"] - sum(d["drawn"] for d in r["diagrams"])
               for page, r in measured.items() if sum(d["drawn"] for d in r["diagrams"]) < r["expectedDiagrams"]}
    assert not undrawn, f"diagrams not drawn (page: how many): {undrawn}"
    small = {page: [(d["minFontPx"], d["smallest"], f"{d['viewBoxWidth']} px wide, drawn {d['width']}")
                    for d in r["diagrams"] if d["minFontPx"] is not None and d["minFontPx"] < MIN_DIAGRAM_FONT_PX]
             for page, r in measured.items()}
    small = {page: found for page, found in small.items() if found}
    assert not small, f"diagram text under {MIN_DIAGRAM_FONT_PX} px at {WIDTH} px (page: px, text, size): {small}"


def test_no_code_block_scrolls_sideways(measured: dict[str, dict[str, Any]]) -> None:
    """Commands and YAML wrap (or, for a drawing, fit) rather than hide behind a horizontal scrollbar."""
    assert len(measured) > 1 and all(r["width"] == WIDTH for r in measured.values())
    wide = _failures(measured, "overflowing")
    assert not wide, f"code blocks wider than the page at {WIDTH} px (scrollWidth > clientWidth): {wide}"


def test_no_copy_button_covers_code(measured: dict[str, dict[str, Any]]) -> None:
    """No word of a code block is under the block's copy button (its top right corner)."""
    covered = _failures(measured, "copyButtonOver")
    assert not covered, f"code under a code block's copy button: {covered}"


def test_no_word_in_code_breaks_at_a_hyphen(measured: dict[str, dict[str, Any]]) -> None:
    """A flag such as ``--federation-config`` in a table of flags, a file name at the end of a wrapped command: words
    of up to 40 characters with a hyphen, in inline code and code blocks, are each on one line."""
    broken = _failures(measured, "brokenWords")
    assert not broken, f"words in code broken over two lines: {broken}"


def test_drawings_in_code_blocks_are_not_wrapped(measured: dict[str, dict[str, Any]]) -> None:
    """A block drawn with box-drawing characters (a tree) keeps each of its lines on one line, and still fits."""
    torn = _failures(measured, "tornDrawings")
    assert not torn, f"drawings wrapped over more lines than they have: {torn}"


def test_generated_pages_link_to_titles_not_paths(served: Site, measured: dict[str, dict[str, Any]]) -> None:
    """The pages ``python -m waggle.docs`` writes name the pages they link to by title, not as ``guides/sync.md``."""
    paths = {page: measured[page]["pathLinks"] for page in served.generated if measured[page]["pathLinks"]}
    assert not paths, f"links that read as .md paths in generated pages: {paths}"
