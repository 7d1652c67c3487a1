"""waggle's container images, built by ``scripts/build-images.sh`` and run from their own files.

:func:`build` runs the script as the Kubernetes page prints it (podman, on a Python base made from Debian's packages:
no registry is reached but PyPI and Debian's mirror) and raises :class:`BuildFailed` with the build's last lines.

:class:`ImageRoot` runs a command as the image would, where no container runtime can start one (here crun's
``setrlimit`` of ``RLIMIT_NPROC`` is refused): ``podman create`` and ``podman mount`` give the image's files; in a
mount namespace of its own (``unshare -m``) they are mounted read-only at a new root with a fresh tmpfs ``/tmp``,
the host's ``/dev``, ``/proc``, ``/sys``, ``/etc/hosts`` and ``/etc/resolv.conf`` (as a runtime gives a container
on the host's network) and the test's own files; then ``chroot --userspec`` as the image's user, with the image's
environment, working directory, entrypoint and command. Needs root, podman, debootstrap, ``unshare`` and
``chroot``: skipped locally without them, failed in CI.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.support.env import ROOT, require

#: the command the Kubernetes page prints for a machine without Docker Hub, which the tests run as printed
BUILD_COMMAND = ("scripts/build-images.sh", "--debian-base")
PROXY_IMAGE, SYNC_IMAGE = "localhost/waggle:dev", "localhost/waggle-sync:dev"
#: the longest a build may take: a first one took 5 minutes on two idle cores, 6 beside the other worker's tests (the
#: base, then pip compiling gssapi; the sync image adds a Java runtime)
BUILD_SECONDS = 1800


class BuildFailed(AssertionError):
    """A build that failed: its message holds the build's last lines."""


def require_image_tools() -> None:
    missing = [tool for tool in ("podman", "debootstrap", "unshare", "chroot") if shutil.which(tool) is None]
    require(not missing, f"the image tests need {', '.join(missing)} (scripts/setup.sh --test installs them)")
    require(os.geteuid() == 0, "the image tests run the images' files under chroot, which needs root")


def build(*args: str, timeout: float = BUILD_SECONDS) -> str:
    """``scripts/build-images.sh`` with ``args`` (default: as the docs print it): its output."""
    command = [str(ROOT / BUILD_COMMAND[0]), *(args or BUILD_COMMAND[1:])]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        raise BuildFailed(f"{shlex.join(command)} did not finish in {timeout:.0f} s") from exc
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).splitlines()[-40:])
        raise BuildFailed(f"{shlex.join(command)} failed (exit {run.returncode}):\n{tail}")
    return run.stdout


@dataclass(frozen=True)
class Bind:
    """A host file or directory seen at ``inside`` in the image's root."""

    host: Path
    inside: str
    writable: bool = False


@dataclass
class ImageConfig:
    """What an image says about running it (``podman image inspect``'s Config)."""

    env: dict[str, str]
    entrypoint: list[str]
    cmd: list[str]
    user: str
    workdir: str = "/"


def inspect(image: str) -> ImageConfig:
    out = subprocess.run(["podman", "image", "inspect", image], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    config = json.loads(out)[0]["Config"]
    env = dict(item.split("=", 1) for item in config.get("Env") or [])
    return ImageConfig(env, list(config.get("Entrypoint") or []), list(config.get("Cmd") or []),
                       config.get("User") or "0:0", config.get("WorkingDir") or "/")


class ImageRoot:
    """An image's files, mounted for running commands from them (a context manager)."""

    def __init__(self, image: str) -> None:
        self.image = image
        self.config = inspect(image)
        self.container = ""
        self.root = Path()
        self._new_root = ""

    def __enter__(self) -> ImageRoot:
        self.container = _podman("create", self.image).strip()
        self.root = Path(_podman("mount", self.container).strip())
        self._new_root = tempfile.mkdtemp(prefix="waggle-image-root-")
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        _podman("umount", self.container)
        _podman("rm", "--force", self.container)
        os.rmdir(self._new_root)

    def user(self) -> tuple[int, int]:
        uid, _, gid = self.config.user.partition(":")
        return int(uid), int(gid or uid)

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The image's environment, with HOME from its passwd file where the image sets none (as a runtime
        does), then ``extra``."""
        env = dict(self.config.env)
        if "HOME" not in env:
            uid = str(self.user()[0])
            for line in (self.root / "etc" / "passwd").read_text().splitlines():
                fields = line.split(":")
                if len(fields) > 5 and fields[2] == uid:
                    env["HOME"] = fields[5]
        env.update(extra or {})
        return env

    def command(self, argv: list[str] | None = None, *, binds: tuple[Bind, ...] = (),
                env: dict[str, str] | None = None) -> list[str]:
        """The host command that runs ``argv`` (default: the image's entrypoint and command) as the image would:
        its user, environment and working directory, a read-only root and a writable ``/tmp``."""
        argv = argv if argv is not None else [*self.config.entrypoint, *self.config.cmd]
        new, root = shlex.quote(self._new_root), shlex.quote(str(self.root))
        lines = ["set -eu"]
        host_files = (Bind(Path("/etc/hosts"), "/etc/hosts"), Bind(Path("/etc/resolv.conf"), "/etc/resolv.conf"))
        every = (*host_files, *binds)
        # the mount points: in the container's own writable layer, or under /tmp in the fresh tmpfs
        in_tmp = [b for b in every if b.inside.startswith("/tmp/")]
        lines += [_mount_point(str(self.root), b) for b in every if b not in in_tmp]
        lines += [f"mount --bind {root} {new}", f"mount -o remount,bind,ro {new}",
                  f"mount -t tmpfs -o mode=1777,size=2g tmpfs {new}/tmp",
                  f"mount --rbind /dev {new}/dev", f"mount -t proc proc {new}/proc", f"mount --rbind /sys {new}/sys"]
        lines += [_mount_point(self._new_root, b) for b in in_tmp]
        for b in every:
            target = shlex.quote(self._new_root + b.inside)
            lines.append(f"mount --bind {shlex.quote(str(b.host))} {target}")
            if not b.writable:
                lines.append(f"mount -o remount,bind,ro {target}")
        uid, gid = self.user()
        variables = [f"{k}={v}" for k, v in self.environment(env).items()]
        inner = ["/usr/bin/env", "-i", *variables, "/bin/sh", "-c", 'cd "$0" && exec "$@"', self.config.workdir,
                 *argv]
        lines.append(shlex.join(["exec", "chroot", f"--userspec={uid}:{gid}", self._new_root, *inner]))
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines)]

    def run(self, argv: list[str] | None = None, *, binds: tuple[Bind, ...] = (), env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(argv, binds=binds, env=env), capture_output=True, text=True,
                              timeout=timeout)

    def start(self, argv: list[str] | None = None, *, binds: tuple[Bind, ...] = (),
              env: dict[str, str] | None = None, log: Path) -> subprocess.Popen[bytes]:
        """Start ``argv`` in the background, its output to ``log``; its pid is the command's own (each step
        execs the next)."""
        with log.open("wb") as out:
            return subprocess.Popen(self.command(argv, binds=binds, env=env), stdout=out, stderr=subprocess.STDOUT)


def _mount_point(base: str, b: Bind) -> str:
    target = shlex.quote(base + b.inside)
    return f"mkdir -p {target}" if b.host.is_dir() else f"mkdir -p $(dirname {target}) && touch {target}"


def _podman(*args: str) -> str:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=True, timeout=120).stdout


def rss_kib(pid: int) -> dict[int, int]:
    """The resident memory (KiB) of ``pid`` and every process below it."""
    found: dict[int, int] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            children = [Path(f"/proc/{p}/task/{t}/children").read_text().split()
                        for t in os.listdir(f"/proc/{p}/task")]
        except (FileNotFoundError, ProcessLookupError):
            continue
        rss = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        found[p] = rss
        todo.extend(int(c) for group in children for c in group)
    return found
