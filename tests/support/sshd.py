"""Real OpenSSH ``sshd`` instances on loopback, one per SSH hop, for the tunnel tests.

Each :class:`Sshd` listens on its own loopback address (127.0.0.2, 127.0.0.3, ...) with its own host key and
an ``authorized_keys`` file for the current OS user. It runs in the foreground (``-D -e``) at ``LogLevel
DEBUG1``, so its log records every ``direct-tcpip`` request, which lets a test prove that traffic crossed it.
:meth:`Sshd.kill` takes down the listener *and* every per-connection child, so established tunnels break the
way they do when a bastion host dies. Standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")

# sshd 9.2 at DEBUG1 logs one of these per direct-tcpip channel, e.g.
#   server_request_direct_tcpip: originator 127.0.0.1 port 40000, target 127.0.0.3 port 2222
_FORWARD = re.compile(r"server_request_direct_tcpip: originator ")


def sshd_available() -> bool:
    """True if sshd and ssh-keygen are installed and sshd can run here (as root it needs its privsep user and
    the /run/sshd chroot directory; unprivileged sshd skips privilege separation's chroot)."""
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh-keygen") is None:
        return False
    if os.geteuid() != 0:
        return True
    try:
        pwd.getpwnam("sshd")
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    except (KeyError, OSError):
        return False
    return True


@functools.cache
def _sshd_version() -> tuple[int, int]:
    out = subprocess.run([SSHD, "-V"], capture_output=True, text=True, check=False)
    m = re.search(r"OpenSSH_(\d+)\.(\d+)", out.stderr + out.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def keygen(path: Path, kind: str = "ed25519") -> Path:
    """Create a passphrase-less key pair at ``path`` (overwriting any); the public key is ``path`` + ``.pub``."""
    path = Path(path)
    pub = Path(f"{path}.pub")
    path.unlink(missing_ok=True)
    pub.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-N", "", "-t", kind, "-C", path.name, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    return path


def _public(key: Path) -> Path:
    """The public half of ``key``, which may name either half."""
    return Path(key) if str(key).endswith(".pub") else Path(f"{key}.pub")


def _children() -> dict[int, list[int]]:
    """ppid -> [pid] for every process visible in /proc."""
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile
        tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def _descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        kids = tree.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, sig)


class Sshd:
    """One sshd on ``address:port`` with its own host key, accepting the given public keys for the current user."""

    def __init__(self, workdir: Path, address: str, port: int, authorized_keys: list[Path]) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.address = address
        self.port = port
        self.log_path = self.workdir / "sshd.log"
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._atexit = False
        host_key = self.workdir / "ssh_host_ed25519_key"
        self.host_key_pub = Path(f"{host_key}.pub")
        if not (host_key.exists() and self.host_key_pub.exists()):
            keygen(host_key)
        auth = self.workdir / "authorized_keys"
        auth.write_text("".join(_public(k).read_text() for k in authorized_keys))
        auth.chmod(0o600)
        options = {
            "ListenAddress": f"{address}:{port}",
            "HostKey": str(host_key),
            "AuthorizedKeysFile": str(auth),
            "PidFile": str(self.workdir / "sshd.pid"),
            "StrictModes": "no",
            "UsePAM": "no",
            "PubkeyAuthentication": "yes",
            "PasswordAuthentication": "no",
            "KbdInteractiveAuthentication": "no",
            "HostbasedAuthentication": "no",
            "PermitRootLogin": "prohibit-password",
            "AllowTcpForwarding": "yes",
            "PermitOpen": "any",
            "GatewayPorts": "no",
            "X11Forwarding": "no",
            "AllowAgentForwarding": "no",
            "PermitTunnel": "no",
            "PrintMotd": "no",
            "PrintLastLog": "no",
            "UseDNS": "no",
            "MaxStartups": "100:30:200",
            "MaxSessions": "200",
            "MaxAuthTries": "10",
            "LoginGraceTime": "30",
            "ClientAliveInterval": "0",
            "LogLevel": "DEBUG1",
        }
        if _sshd_version() >= (9, 8):
            options["PerSourcePenalties"] = "no"  # our banner probes and killed sessions must not get us banned
        self.config = self.workdir / "sshd_config"
        self.config.write_text("".join(f"{k} {v}\n" for k, v in options.items()))  # no Subsystem lines: none

    def __repr__(self) -> str:
        return f"Sshd({self.address}:{self.port}, pid={self.pid})"

    def start(self, timeout: float = 10.0) -> Sshd:
        """Start sshd and wait until it answers with an SSH-2.0 banner; RuntimeError with the log tail if not."""
        if self._proc is not None and self._proc.poll() is None:
            raise RuntimeError(f"{self!r} already running")
        if os.geteuid() == 0:
            PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            offset = log.tell()
            log.write(f"--- waggle tests: starting sshd on {self.address}:{self.port} ---\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        self.pid = self._proc.pid
        if not self._atexit:
            atexit.register(self.stop)  # don't leak sshds if a test run dies before its teardown
            self._atexit = True
        listening = f"Server listening on {self.address} port {self.port}.".encode()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._proc.poll() is None:
            # The log line proves it is *our* sshd that holds the port, the banner that it is serving.
            if listening in self.log_path.read_bytes()[offset:] and self._banner():
                return self
            time.sleep(0.02)
        code = self._proc.poll()
        self.stop()
        why = f"exited with status {code}" if code is not None else f"did not come up in {timeout}s"
        raise RuntimeError(f"sshd on {self.address}:{self.port} {why}; log tail:\n{self._tail()}")

    def _banner(self) -> bool:
        try:
            with socket.create_connection((self.address, self.port), timeout=1.0) as s:
                data = b""
                while b"\n" not in data and len(data) < 256:
                    chunk = s.recv(256)
                    if not chunk:
                        break
                    data += chunk
                return data.startswith(b"SSH-2.0")
        except OSError:
            return False

    def _refuses(self) -> bool:
        try:
            with socket.create_connection((self.address, self.port), timeout=0.5):
                return False
        except OSError:
            return True

    def kill(self, timeout: float = 5.0) -> None:
        """SIGKILL the listener and every descendant (per-connection children may have called setsid), then wait
        until the port refuses connections. Raises RuntimeError if sshd is not running."""
        if self._proc is None or self._proc.poll() is not None:
            raise RuntimeError(f"{self!r} is not running")
        # Freeze the whole tree first, so nothing forks or gets reparented while we collect it.
        pids = [self._proc.pid]
        _signal(pids, signal.SIGSTOP)
        while True:
            found = [self._proc.pid, *_descendants(self._proc.pid)]
            new = [p for p in found if p not in pids]
            if not new:
                break
            _signal(new, signal.SIGSTOP)
            pids += new
        _signal(pids, signal.SIGKILL)
        self._proc.wait(timeout)
        self._proc = None
        self.pid = None
        deadline = time.monotonic() + timeout
        while not self._refuses():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.address}:{self.port} still accepts connections after kill")
            time.sleep(0.02)

    def stop(self) -> None:
        """Like :meth:`kill`, but a no-op when sshd is not running (for teardown)."""
        if self._proc is not None and self._proc.poll() is None:
            self.kill()
        self._proc = None
        self.pid = None

    def log(self) -> str:
        """Everything sshd has logged so far (across restarts; each start appends a marker line)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def known_hosts_line(self) -> str:
        """This server's known_hosts entry, e.g. ``[127.0.0.2]:2222 ssh-ed25519 AAAA...``."""
        kind, blob = self.host_key_pub.read_text().split()[:2]
        host = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
        return f"{host} {kind} {blob}"

    def forwards(self) -> list[str]:
        """The log lines recording direct-tcpip requests, e.g.
        ``debug1: server_request_direct_tcpip: originator 127.0.0.1 port 40000, target 127.0.0.3 port 2222``."""
        return [line for line in self.log().splitlines() if _FORWARD.search(line)]


def write_known_hosts(path: Path, *servers: Sshd) -> Path:
    """Write a known_hosts file listing ``servers``; returns ``path``."""
    path = Path(path)
    path.write_text("".join(s.known_hosts_line() + "\n" for s in servers))
    return path
