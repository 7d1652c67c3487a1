"""waggle as a subprocess through its real CLI, its JSON log and metrics; which worker serves a connection."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.clients import hive2_client
from tests.support.env import ROOT


class WaggleProcess:
    def __init__(self, workdir: Path, federation_yaml: str, server_yaml: str = "", args: tuple[str, ...] = ()) -> None:
        """``args``: more ``waggle serve`` arguments (``--workers 2``)."""
        from waggle.local.jvm import free_port

        self.args = args
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.port = free_port()
        self.http_port = free_port()
        while self.http_port == self.port:  # two asks for a free port may be answered with the same one
            self.http_port = free_port()
        self.server_file = workdir / "server.yml"
        self.federation_file = workdir / "federation.yml"
        self.server_file.write_text(f"port: {self.port}\nbind-address: 127.0.0.1\nendpoint:\n  port: {self.http_port}\n"
                                    f"{server_yaml}")
        self.federation_file.write_text(federation_yaml)
        self.log_path = workdir / "waggle.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def write_federation(self, text: str) -> None:
        """Replace the federation file at once, as an editor's save or a ConfigMap swap does: a watcher never reads
        it half written (a half-written file is refused, and the reload after it would be a second one)."""
        staged = self.federation_file.with_name(f".{self.federation_file.name}.new")
        staged.write_text(text)
        os.replace(staged, self.federation_file)

    def start(self, wait: bool = True) -> WaggleProcess:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "waggle", "serve", "--server-config", str(self.server_file),
             "--federation-config", str(self.federation_file), *self.args],
            stdout=subprocess.DEVNULL, stderr=open(self.log_path, "ab"), env=env, cwd=ROOT,
        )
        if wait:
            self.wait_listening()
        return self

    def wait_listening(self, timeout: float = 30.0) -> None:
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"waggle exited with {self.proc.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"waggle not listening after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def events(self, event: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        """The JSON log entries (of ``event``, if given) written after character ``since`` of the log."""
        import json

        found = []
        for line in self.log()[since:].splitlines():
            if line.startswith("{") and (event is None or f'"{event}"' in line):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                if event is None or entry.get("event") == event:
                    found.append(entry)
        return found

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of the ``/metrics`` sample ``name`` with exactly these labels, or None when absent."""
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(self.http("/metrics")):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        return None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def client(self, timeout: float = 30.0) -> Any:
        return hive2_client(self.port, timeout)

    def request(self, path: str, method: str = "GET", token: str | None = None) -> tuple[int, Any]:
        """A call of waggle's HTTP endpoint (with the admin token, if given): its status and JSON body."""
        import json
        import urllib.error
        import urllib.request

        req = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", method=method)
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def http(self, path: str) -> str:
        """GET a path of waggle's HTTP endpoint (``/healthz``, ``/metrics``)."""
        from urllib.request import urlopen

        with urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=10) as response:
            return str(response.read().decode())


# -- which worker of `waggle serve --workers` serves a connection ---------------------------------------
def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def owner(proxy: WaggleProcess, client: Any, pids: list[int]) -> int:
    """The pid of the worker that accepted this client connection (from /proc/net/tcp and each pid's fds)."""
    if isinstance(client, socket.socket):
        sock = client
    else:  # hmsclient: a TBufferedTransport over a TSocket
        trans = client._iprot.trans
        sock = getattr(trans, "_TBufferedTransport__trans", trans).handle
    local = sock.getsockname()[1]
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    inode = next(r[9] for r in rows
                 if int(r[1].split(":")[1], 16) == proxy.port and int(r[2].split(":")[1], 16) == local)
    return next(pid for pid in pids if inode in _socket_inodes(pid))


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on ``port`` of 127.0.0.1 now."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
