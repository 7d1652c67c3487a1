"""The docs pages and the README stay true: every YAML snippet that is a server, federation or sync file passes the
checks ``waggle check --strict`` (or the sync file loader) makes, the README stays short, and its commands are the
ones the pages give.

A snippet's kind comes from its fence title (```yaml title="waggle-federation.yml"```), else from a first-line
comment naming the file, else from its keys; a snippet titled ``fragment`` is skipped. A federation snippet is
checked with the nearest server snippet before it on its page whose title has the same suffix (``(B)``), as the
page shows them together; a server snippet with a federation of the members the pages name, on a machine whose
Kerberos configuration has a KDC for the pages' realm. Files that a snippet names (keytabs, keys, certificates
under ``/etc/...``) do not exist here: the only problems allowed are the ones naming such a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from waggle.checks import file_problems
from waggle.config.loader import ConfigError, load
from waggle.sync.runner import SyncConfigError, load_sync_file

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
QUICK_START = DOCS / "getting-started" / "quick-start.md"
PAGES = sorted([README, *DOCS.rglob("*.md")])
FENCE = re.compile(r'^```yaml(?:[ \t]+title="(?P<title>[^"]*)")?[ \t]*\n(?P<body>.*?)^```[ \t]*$', re.M | re.S)
KINDS = {"waggle-server.yml": "server", "waggle-federation.yml": "federation", "sync.yml": "sync"}
# what a server snippet is checked with: a federation of the members the pages name
FEDERATION_OF_THE_PAGES = """\
primary-meta-store:
  name: primary
  remote-meta-store-uris: thrift://localhost:9083
federated-meta-stores:
- name: analytics
  remote-meta-store-uris: thrift://localhost:9084
- name: ops
  remote-meta-store-uris: thrift://localhost:9085
"""
# the Kerberos configuration of a machine in the pages' realm (waggle check looks for a KDC of waggle's realm)
KRB5_CONF = """\
[libdefaults]
  default_realm = EXAMPLE.COM
[realms]
  EXAMPLE.COM = {
    kdc = kdc.example.com
  }
"""


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    title: str
    body: str

    @property
    def kind(self) -> str:
        name = self.title.split(" ")[0]
        if name == "fragment":
            return "fragment"
        if name in KINDS:
            return KINDS[name]
        data = yaml.safe_load(self.body)
        assert isinstance(data, dict), f"{self}: a YAML snippet that is not a map: title it \"fragment\""
        if "primary-meta-store" in data or "federated-meta-stores" in data:
            return "federation"
        return "sync" if "jobs" in data else "server"

    @property
    def suffix(self) -> str:
        return self.title.partition(" ")[2]

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _snippets(page: Path) -> list[Snippet]:
    text = page.read_text()
    found = []
    for m in FENCE.finditer(text):
        title, body = m.group("title") or "", m.group("body")
        first = body.splitlines()[0] if body.strip() else ""
        named = re.fullmatch(r"# (waggle-(?:server|federation)\.yml(?: \([^)]*\))?)", first.strip())
        if not title and named:
            title = named.group(1)
        found.append(Snippet(page, text.count("\n", 0, m.start()) + 1, title, body))
    return found


SNIPPETS = [s for page in PAGES for s in _snippets(page)]


def _paired_server(snippet: Snippet) -> Snippet | None:
    before = [s for s in SNIPPETS if s.page == snippet.page and s.line < snippet.line and s.kind == "server"
              and s.suffix == snippet.suffix]
    return before[-1] if before else None


def _absent_files(*snippets: Snippet) -> set[str]:
    named = {p for s in snippets for p in re.findall(r"(/(?:etc|home|opt|var)/[\w./-]+)", s.body)}
    return {p for p in named if not Path(p).exists()}


@pytest.fixture(autouse=True)
def _krb5_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "krb5.conf"
    conf.write_text(KRB5_CONF)
    monkeypatch.setenv("KRB5_CONFIG", str(conf))


def _check(server: Snippet | None, federation: str, tmp_path: Path, *shown: Snippet) -> None:
    server_file = None
    if server is not None:
        server_file = tmp_path / "waggle-server.yml"
        server_file.write_text(server.body)
    federation_file = tmp_path / "waggle-federation.yml"
    federation_file.write_text(federation)
    where = ", ".join(str(s) for s in shown)
    try:
        config = load(str(server_file) if server_file else None, str(federation_file), strict=True)
    except ConfigError as exc:
        pytest.fail(f"{where}: waggle check --strict fails: {exc.problems}")
    absent = _absent_files(*shown)
    unexplained = [p for p in file_problems(config) if not any(f in p for f in absent)]
    assert unexplained == [], f"{where}: waggle check fails: {unexplained}"


def test_the_pages_have_yaml_snippets_of_each_kind() -> None:
    kinds = {s.kind for s in SNIPPETS}
    assert {"server", "federation", "sync", "fragment"} <= kinds, kinds
    assert len([s for s in SNIPPETS if s.kind != "fragment"]) >= 10


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.kind == "server"], ids=str)
def test_a_server_snippet_passes_waggle_check(snippet: Snippet, tmp_path: Path) -> None:
    _check(snippet, FEDERATION_OF_THE_PAGES, tmp_path, snippet)


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.kind == "federation"], ids=str)
def test_a_federation_snippet_passes_waggle_check(snippet: Snippet, tmp_path: Path) -> None:
    server = _paired_server(snippet)
    _check(server, snippet.body, tmp_path, *([server] if server else []), snippet)


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.kind == "sync"], ids=str)
def test_a_sync_snippet_passes_the_sync_file_loader(snippet: Snippet, tmp_path: Path) -> None:
    path = tmp_path / "sync.yml"
    path.write_text(snippet.body)
    try:
        run = load_sync_file(str(path))
    except SyncConfigError as exc:
        pytest.fail(f"{snippet}: {exc}")
    assert run.specs


def test_a_typo_in_a_snippet_would_fail(tmp_path: Path) -> None:
    """The check above is not vacuous: the federation snippet of the five-minute page with a misspelled key fails."""
    page = DOCS / "getting-started" / "your-own-metastores.md"
    federation = next(s for s in _snippets(page) if s.kind == "federation")
    typo = Snippet(page, federation.line, federation.title, federation.body.replace("access-control-type",
                                                                                    "acess-control-type"))
    with pytest.raises(pytest.fail.Exception, match=re.escape("did you mean 'primary-meta-store.access-control-type'")):
        _check(None, typo.body, tmp_path, typo)


def test_the_readme_fits_on_a_few_screens() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move the detail into docs/"


def _bash_commands(page: Path) -> list[str]:
    return [line.strip() for block in re.findall(r"^```(?:bash|console)\n(.*?)^```", page.read_text(), re.M | re.S)
            for line in block.splitlines() if line.strip()]


def test_the_quick_start_commands_exist_and_match_the_pages() -> None:
    readme, page = _bash_commands(README), _bash_commands(QUICK_START)
    for command in ("./scripts/demo.sh", "./scripts/test.sh", "source .venv/bin/activate"):
        assert command in readme, f"README.md lacks {command}"
        assert command in page, f"{QUICK_START.relative_to(ROOT)} lacks {command}"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "./scripts/test.sh" in ci, ".ci/run must run the README's test command as the README shows it"
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        path = ROOT / script
        assert path.is_file() and path.stat().st_mode & 0o111, f"{script} is not an executable file"
    test_sh = (ROOT / "scripts" / "test.sh").read_text()
    assert "mkdocs build --strict" in test_sh, "the test command builds the docs site"
    assert "pytest" in test_sh
    assert "python -m waggle demo" in (ROOT / "scripts" / "demo.sh").read_text() or \
        "waggle demo" in (ROOT / "scripts" / "demo.sh").read_text()


def test_a_whole_run_tests_the_unit_tests_in_processes_of_their_own() -> None:
    """docs/development.md, "two runs": the unit tests' greenlets never reach a process that runs the real
    components' threads, and the second run appends to the first's coverage, so the floor sees both."""
    runs = [line.strip() for line in (ROOT / "scripts" / "test.sh").read_text().splitlines()
            if line.strip().startswith("pytest ")]
    whole = [run for run in runs if '"$@"' not in run]
    assert len(whole) == 2 and whole[0].endswith(" tests/unit"), runs
    assert "--cov-append" in whole[1] and "tests/unit" not in whole[1], runs
    assert "--cov-append" not in whole[0], "the first run starts the coverage data afresh"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading (the README's links are read on GitHub)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_readme_links_reach_pages_and_anchors() -> None:
    """mkdocs --strict checks the pages' links; the README is read on GitHub, so its links are checked here."""
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README links into the docs"
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.is_file(), f"README.md links to {link}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, f"README.md links to {link}: no such heading"


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    missing = sorted(p for p in pages if p not in nav)
    assert missing == [], f"pages missing from mkdocs.yml's nav: {missing}"
