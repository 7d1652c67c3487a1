"""What the set-up scripts show a new user, and the light path to the docs site.

``scripts/setup.sh`` (run by ``scripts/demo.sh``) says one line per step with the time it takes the first time,
keeps what pip, apt and javac print in ``.venv/setup.log`` (shown, named, only when a step fails) and ends with a
line saying what is ready. ``scripts/docs.sh`` sets up only mkdocs and Material for MkDocs (no waggle, no pyspark)
and builds the site without Material's end-of-life notice. ``pip install -e .`` prints no setuptools warning box.

The demo's set-up runs in this clone, which ``scripts/test.sh`` has already set up, so it takes seconds; the docs
path runs its first time for real, in a copy of the clone's docs with a new ``.venv`` (about 30 s, packages from the
configured package index).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.env import java_available, require

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DEVELOPMENT = ROOT / "docs" / "development.md"
MERMAID = Path("docs") / "javascripts" / "mermaid.min.js"

# What the tools print when let through: pip's warnings and progress, setuptools' boxes, Material for MkDocs' notice.
NOISE = ["WARNING", "Requirement already satisfied", "Successfully installed", "Collecting ", "DEPRECATION",
         "Please be careful", "BuildBackendWarning", "*****", "end of life", "NO_MKDOCS_2_WARNING", "Zensical"]
STEP = re.compile(r"^  (?P<title>.+) \(first time about [^)]+\) \.\.\. (?P<result>.+)$")


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "NO_MKDOCS_2_WARNING")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=timeout)


def _steps(stdout: str) -> dict[str, str]:
    return {m["title"]: m["result"] for m in map(STEP.match, stdout.splitlines()) if m}


def _assert_quiet(done: subprocess.CompletedProcess[str]) -> None:
    shown = done.stdout + done.stderr
    for noise in NOISE:
        assert noise not in shown, f"{noise!r} reached the terminal:\n{shown}"


@pytest.mark.integration
def test_the_demo_set_up_says_each_step_and_what_is_ready() -> None:
    require(java_available(), "Java 17 is needed: the set-up compiles the listener and prepares the template")
    done = _run(["bash", "scripts/setup.sh"], ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert re.match(r"Setting up the demo in \.venv: about \d+ minutes the first time, seconds after that "
                    r"\(the tools' output: \.venv/setup\.log\)$", lines[0]), lines[0]
    steps = _steps(done.stdout)
    assert list(steps) == ["Python environment .venv", "waggle, pyspark, pyiceberg and hmsclient", "waggle's bytecode",
                           "notification listener jar (javac)", "metastore template (Hive's Derby schema)"], lines
    for title, result in steps.items():
        assert re.fullmatch(r"done in \d+ s|already there|already installed", result), f"{title}: {result}"
    assert lines[-1].startswith("Ready for the demo: .venv has waggle, pyspark, pyiceberg and hmsclient; the listener "
                                "jar and the metastore template are in "), lines[-1]
    assert len(lines) == 2 + len(steps), f"lines other than the steps':\n{done.stdout}"
    assert done.stderr == ""
    _assert_quiet(done)
    assert (ROOT / ".venv" / "setup.log").is_file()


@pytest.fixture(scope="module")
def docs_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What ``scripts/docs.sh`` reads, copied without a ``.venv``: its set-up runs from the start."""
    clone = tmp_path_factory.mktemp("docs-clone")
    hooks = re.findall(r"^hooks:\n((?:  - .+\n)+)", (ROOT / "mkdocs.yml").read_text(), re.M)
    hook_files = [line.strip()[2:].strip() for block in hooks for line in block.splitlines()]
    for name in ("scripts/setup.sh", "scripts/docs.sh", "pyproject.toml", "mkdocs.yml", "README.md", *hook_files):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    shutil.copytree(ROOT / "docs", clone / "docs", ignore=shutil.ignore_patterns("mermaid.min.js"))
    # Mermaid as the set-up left it in this clone (fetched from the npm registry), so the test fetches nothing
    if (ROOT / MERMAID).is_file():
        shutil.copy2(ROOT / MERMAID, clone / MERMAID)
    else:
        (clone / MERMAID).write_text("/* stand-in */\n")
    return clone


def test_the_docs_script_sets_up_only_the_docs_and_builds_the_site(docs_clone: Path) -> None:
    done = _run(["bash", "scripts/docs.sh", "--build-only"], docs_clone)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Setting up the docs site in .venv: about "), lines[0]
    steps = _steps(done.stdout)
    assert list(steps) == ["Python environment .venv", "mkdocs and Material for MkDocs",
                           "Mermaid, for the docs' diagrams (docs/javascripts/)"], lines
    assert re.fullmatch(r"done in \d+ s", steps["Python environment .venv"])
    assert re.fullmatch(r"done in \d+ s", steps["mkdocs and Material for MkDocs"])
    assert "Ready for the docs: .venv has mkdocs and Material for MkDocs." in lines
    assert lines[-2:] == ["Building the site into site/ (mkdocs build --strict, about 5 s)",
                          "Built: open site/index.html, or serve it with scripts/docs.sh"], lines
    _assert_quiet(done)
    assert (docs_clone / "site" / "index.html").is_file()
    assert (docs_clone / "site" / "development" / "index.html").is_file()
    # light: the docs' packages only, not waggle with pyspark and the rest
    python = str(docs_clone / ".venv" / "bin" / "python")
    assert _run([python, "-c", "import mkdocs, material"], docs_clone).returncode == 0
    for heavy in ("pyspark", "waggle"):
        installed = _run([python, "-c", "import importlib.metadata as m, sys; m.distribution(sys.argv[1])", heavy],
                         docs_clone)
        assert installed.returncode != 0, f"the docs venv has {heavy}"
    # pip's own output was kept, in the log
    assert "== mkdocs and Material for MkDocs" in (docs_clone / ".venv" / "setup.log").read_text()


def test_a_failing_step_names_the_log_and_shows_its_end(docs_clone: Path) -> None:
    """After the build above (the clone's .venv exists): a docs extra that cannot be installed stops the set-up."""
    pyproject = docs_clone / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"mkdocs>=1.6"', '"mkdocs>=999"'))
    done = _run(["bash", "scripts/setup.sh", "--docs"], docs_clone)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.fullmatch(r"  mkdocs and Material for MkDocs \(first time about [^)]+\) \.\.\. failed",
                        done.stdout.splitlines()[-1]), done.stdout
    assert "error: mkdocs and Material for MkDocs failed (exit 1). The end of .venv/setup.log:" in done.stderr
    assert re.search(r"^  \| .*mkdocs>=999", done.stderr, re.M), done.stderr
    assert done.stderr.rstrip().endswith("The whole output is in .venv/setup.log.")


def test_an_editable_install_prints_no_setuptools_warning(tmp_path: Path) -> None:
    """setuptools warns (a box) when it has to install an import hook for a flat layout; package-dir avoids it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
                 "-e", str(ROOT)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for box in ("Please be careful", "BuildBackendWarning", "*****"):
        assert box not in done.stdout + done.stderr, done.stdout + done.stderr
    site = next((venv / "lib").glob("python3*/site-packages"))
    pth = (site / "__editable__.waggle-0.1.0.pth").read_text().split()
    assert pth == [str(ROOT)], pth  # the plain .pth, not the import hook's


def test_the_docs_extra_is_the_test_extras_and_the_readme_names_each_commands_set_up() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {re.split(r"[<>=\[]", r)[0] for r in extras["docs"]} == {"mkdocs", "mkdocs-material"}
    assert any(r.startswith("waggle[") and "docs" in r for r in extras["test"]), extras["test"]
    assert not any(r.startswith("mkdocs") for r in extras["test"]), "the test extra repeats the docs' pins"
    readme = README.read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    demo, test = quick.split("./scripts/test.sh", 1)
    assert "Debian" not in demo, "the demo's set-up installs no Debian packages"
    assert "Debian packages" in test and "sets up" in test
    assert "./scripts/docs.sh" in readme.split("## Quick start", 1)[0]
    section = DEVELOPMENT.read_text().split("## The docs", 1)[1]
    assert "./scripts/docs.sh" in section and "pip install -e '.[docs]'" in section
    assert os.access(ROOT / "scripts" / "docs.sh", os.X_OK)


def test_the_demos_environment_has_the_python_client_the_docs_use() -> None:
    """The README and the clients page show hmsclient: the demo's set-up installs it (the clients extra)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [re.split(r"[<>=\[]", r)[0] for r in extras["clients"]] == ["hmsclient"]
    assert any(r.startswith("waggle[") and "clients" in r for r in extras["test"]), extras["test"]
    demo_install = [line for line in (ROOT / "scripts" / "setup.sh").read_text().splitlines()
                    if "pip install" in line and "-e" in line and "[test]" not in line and "docs" not in line]
    assert demo_install and all("clients" in line for line in demo_install), demo_install
    assert "HMSClient(" in README.read_text()
