"""docs/getting-started/tutorial.md, run as printed, in a home directory of its own.

The page is read as a reader follows it, block by block, in order:

- a ``yaml`` or ``python`` block titled with a path (``~/tutorial/x.py``) is saved there;
- a ``console`` block titled ``terminal N, keeps running`` starts its command in a terminal of its own (a pty,
  so its log lines are the ones a person sees), and the lines under it must appear there;
- a ``text`` block titled ``terminal N`` is more of what that terminal prints: waited for;
- an untitled ``console`` block runs each ``$`` command in turn; each must succeed and print the lines under it;
- "Ctrl-C in terminals 3, 2 and 1" stops them, with SIGINT, in that order: each must exit 0.

Shown lines must appear in that order (other lines may come between them); ``…`` stands for anything within a line,
and a line of ``…`` alone for any lines.
"""

from __future__ import annotations

import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import fixed_ports
from tests.support.env import ROOT, java_available, require
from tests.support.waits import wait_for
from waggle.local.jvm import cache_dir, port_taken

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PAGE = ROOT / "docs" / "getting-started" / "tutorial.md"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
FENCE = re.compile(r'^```(\w+)(?: title="([^"]*)")?\n(.*?)^```$', re.M | re.S)
CTRL_C = re.compile(r"^Ctrl-C in terminals ([\d, and]+?) stops", re.M)


@dataclass(frozen=True)
class Command:
    text: str
    shown: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    kind: str  # "file", "run", "keeps_running", "prints" or "ctrl_c"
    terminal: str = ""
    path: str = ""
    body: str = ""
    commands: tuple[Command, ...] = ()


def _commands(body: str) -> tuple[Command, ...]:
    """``$ command`` lines (a line ending in a backslash goes on) and the lines shown under each."""
    found: list[tuple[str, list[str]]] = []
    going_on = False
    for line in body.splitlines():
        if going_on:
            found[-1] = (found[-1][0][:-1] + line.strip(), found[-1][1])
        elif line.startswith("$ "):
            found.append((line[2:], []))
        else:
            assert found, f"output before a command: {line!r}"
            found[-1][1].append(line)
        going_on = found[-1][0].endswith("\\") if found else False
    return tuple(Command(text, tuple(shown)) for text, shown in found)


def blocks(page: str) -> list[Block]:
    """The page's blocks that the test acts on, in order (others, such as the activate line, are prose)."""
    found: list[tuple[int, Block]] = []
    for stop in CTRL_C.finditer(page):
        names = tuple(f"terminal {n}" for n in re.findall(r"\d", stop.group(1)))
        found.append((stop.start(), Block("ctrl_c", commands=tuple(Command(n, ()) for n in names))))
    for fence in FENCE.finditer(page):
        lang, title, body = fence.group(1), fence.group(2) or "", fence.group(3)
        at = fence.start()
        if lang in ("yaml", "python") and title.startswith("~/"):
            found.append((at, Block("file", path=title, body=body)))
        elif lang == "console" and not title:
            found.append((at, Block("run", commands=_commands(body))))
        elif lang == "console" and (keeps := re.fullmatch(r"(terminal \d), keeps running", title)):
            commands = _commands(body)
            assert len(commands) == 1, f"a terminal that keeps running has one command: {title}"
            found.append((at, Block("keeps_running", terminal=keeps.group(1), commands=commands)))
        elif lang == "text" and re.fullmatch(r"terminal \d", title):
            found.append((at, Block("prints", terminal=title, commands=(Command("", tuple(body.splitlines())),))))
    return [block for _, block in sorted(found, key=lambda pair: pair[0])]


def _pattern(shown: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in shown.rstrip().split("…")))


def missing(shown: tuple[str, ...], output: str) -> str | None:
    """The first shown line not found (in order) in ``output``, or None when every one is."""
    lines = [ANSI.sub("", line).rsplit("\r", 1)[-1].rstrip() for line in output.replace("\r\n", "\n").split("\n")]
    at = 0
    for line in shown:
        if line.strip() in ("…", ""):
            continue
        pattern = _pattern(line)
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        if at == len(lines):
            return line
        at += 1
    return None


@dataclass
class Terminal:
    """A command running in a pty of its own, as in a terminal window; what it prints is kept."""

    name: str
    proc: subprocess.Popen[bytes]
    master: int
    printed: bytearray = field(default_factory=bytearray)

    @classmethod
    def start(cls, name: str, command: str, env: dict[str, str], cwd: Path) -> Terminal:
        master, slave = pty.openpty()
        proc = subprocess.Popen(["bash", "-c", command], stdin=slave, stdout=slave, stderr=slave, env=env,
                                cwd=cwd, start_new_session=True)
        os.close(slave)
        terminal = cls(name, proc, master)
        threading.Thread(target=terminal._read, daemon=True).start()
        return terminal

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the last process holding the pty is gone
                return
            if not chunk:
                return
            self.printed += chunk

    def text(self) -> str:
        return bytes(self.printed).decode(errors="replace")

    def tail(self) -> str:
        return f"--- {self.name} printed ---\n{ANSI.sub('', self.text())[-6000:]}"

    def until_shown(self, shown: tuple[str, ...], timeout: float, others: list[Terminal]) -> None:
        def shown_yet() -> bool:
            assert self.proc.poll() is None, f"{self.name} ended ({self.proc.returncode})\n" + self.tail()
            return missing(shown, self.text()) is None

        wait_for(shown_yet, timeout, lambda: f"{self.name} did not print {missing(shown, self.text())!r}\n"
                 + "\n".join(t.tail() for t in others))

    def interrupt(self, timeout: float = 60.0) -> int | None:
        """Ctrl-C: SIGINT to the terminal's processes; their exit code, or None if they outlive ``timeout``."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        os.close(self.master)


def _run(command: Command, env: dict[str, str], home: Path, terminals: list[Terminal]) -> None:
    done = subprocess.run(["bash", "-c", command.text], env=env, cwd=home, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=300)
    output = done.stdout.decode(errors="replace")
    context = f"$ {command.text}\n{output[-4000:]}\n" + "\n".join(t.tail() for t in terminals)
    assert done.returncode == 0, context
    lost = missing(command.shown, output)
    assert lost is None, f"did not print {lost!r}\n{context}"


def test_the_pages_blocks_are_read_as_the_test_means_them() -> None:
    found = blocks(PAGE.read_text())
    kinds = [b.kind for b in found]
    assert kinds.count("keeps_running") == 3 and kinds.count("file") == 4, kinds
    assert {b.terminal for b in found if b.kind == "prints"} == {"terminal 2", "terminal 3"}
    assert all(c.text for b in found for c in b.commands if b.kind != "prints")
    stops = [b for b in found if b.kind == "ctrl_c"]
    assert [c.text for b in stops for c in b.commands] == ["terminal 3", "terminal 2", "terminal 1"]
    assert found[-2:] == [stops[0], found[-1]] and found[-1].commands[0].text.startswith("rm -rf"), found[-2:]
    long = next(b for b in found if b.kind == "keeps_running" and "sync --follow" in b.commands[0].text)
    assert "\\" not in long.commands[0].text
    assert missing(("a … c", "…", "e"), "x\na b c\nd\ne\n") is None
    assert missing(("e", "a b c"), "a b c\ne\n") == "a b c"  # in order


def test_the_kernels_list_of_reserved_ports_is_read_and_written_as_it_means() -> None:
    assert fixed_ports.parse("") == set() and fixed_ports.parse("\n") == set()
    assert fixed_ports.parse("48869-48870,50000\n") == {48869, 48870, 50000}
    assert fixed_ports.listing({50000, 48870, 48869, 18000}) == "18000,48869-48870,50000"
    assert fixed_ports.parse(fixed_ports.listing({1, 2, 3, 7})) == {1, 2, 3, 7}


def test_the_run_keeps_the_tutorials_ports_from_the_kernels_choice() -> None:
    """The run's first process reserved them (``tests/conftest.py``): a Spark driver or a client of the other
    worker's files is never handed 48870 by the kernel while the tutorial waits to bind it."""
    require(os.access(fixed_ports.RESERVED, os.W_OK), f"{fixed_ports.RESERVED} is writable (the suite runs as root)")
    wanted = {p for p in fixed_ports.page_ports(PAGE.read_text()) if p >= 32768}
    assert wanted and wanted <= fixed_ports.reserved(), (wanted, fixed_ports.RESERVED.read_text())


def test_the_tutorial_runs_as_printed_against_the_demo(tmp_path: Path) -> None:
    require(java_available(), "Java 17 is needed for the demo's metastores and the follower's Spark")
    page = PAGE.read_text()
    ports = fixed_ports.page_ports(page)
    assert sorted(ports) == [18000, 18001, 18002, 48869, 48870], ports
    taken = {p: f"{why}: {fixed_ports.holders(p)}" for p in ports if (why := port_taken(p))}
    require(not taken, f"the tutorial's ports must be free: {taken}")
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = Path(sys.executable).parent  # what `source .venv/bin/activate` puts first on the PATH
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "VIRTUAL_ENV": str(bin_dir.parent), "WAGGLE_CACHE_DIR": str(cache_dir()), "TERM": "xterm"}
    terminals: dict[str, Terminal] = {}
    try:
        for block in blocks(page):
            running = list(terminals.values())
            if block.kind == "file":
                target = home / block.path.removeprefix("~/")
                assert target.parent.is_dir(), f"{block.path}: the page saves it before making its directory"
                target.write_text(block.body)
            elif block.kind == "run":
                for command in block.commands:
                    _run(command, env, home, running)
            elif block.kind == "keeps_running":
                command = block.commands[0]
                terminal = Terminal.start(block.terminal, command.text, env, home)
                terminals[block.terminal] = terminal
                terminal.until_shown(command.shown, 300, [*running, terminal])
            elif block.kind == "prints":
                terminals[block.terminal].until_shown(block.commands[0].shown, 180, running)
            else:
                for name in (c.text for c in block.commands):
                    code = terminals[name].interrupt()
                    assert code == 0, f"{name} exited {code} on Ctrl-C\n" + terminals[name].tail()
        assert not (home / "waggle-demo").exists() and not (home / "tutorial").exists()
    finally:
        subprocess.run(["pkill", "-CONT", "-f", str(home)], check=False)
        for terminal in terminals.values():
            terminal.kill()
        subprocess.run(["pkill", "-KILL", "-f", str(home)], check=False)
        shutil.rmtree(home, ignore_errors=True)


def test_connect_your_own_metastores_runs_beside_the_demo() -> None:
    """The page's server file takes neither of the demo's ports, and it says where a user finds metastores."""
    import inspect

    import yaml

    from waggle.local.demo import run_demo

    page = (ROOT / "docs" / "getting-started" / "your-own-metastores.md").read_text()
    block = re.search(r'^```yaml title="waggle-server.yml"\n(.*?)^```$', page, re.M | re.S)
    assert block, "the page shows a server file"
    server = yaml.safe_load(block[1])
    demo = inspect.signature(run_demo).parameters
    assert {server["port"], server["endpoint"]["port"]}.isdisjoint({demo["port"].default,
                                                                   demo["http_port"].default}), server
    assert "waggle metastore --port" in page and "~/waggle-demo/waggle-federation.yml" in page
