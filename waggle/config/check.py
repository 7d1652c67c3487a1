"""Everything ``waggle check`` validates, shared by the command and by a running server's reload.

Loading (:func:`waggle.config.loader.load`) checks every key. On top of that, each SSH tunnel's key and
known_hosts files must be present, readable and usable; that needs paramiko, which the proxy process never
imports, so a running server asks a ``waggle check`` process (:func:`check_in_subprocess`).
"""

from __future__ import annotations

import subprocess
import sys

from waggle.config.loader import ConfigError
from waggle.config.model import WaggleConfig
from waggle.config.timing import CHECK_SUBPROCESS_SECONDS


def tunnel_problems(config: WaggleConfig) -> list[str]:
    """The key and known-hosts files of every tunnel: present, readable and usable (nothing is connected)."""
    from waggle.tunnel.spec import check_files, spec_for

    return [f"{config.federation_file}: {p}" for m in config.federation.members if m.tunnel is not None
            for p in check_files(spec_for(m))]


def admin_token(config: WaggleConfig) -> str | None:
    """The admin bearer token from ``admin.token-file`` (None: state-changing admin calls are off)."""
    path = config.server.admin_token_file
    if path is None:
        return None
    where = f"{config.server_file or '(server defaults)'}: key 'admin.token-file': invalid value {path!r}"
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as exc:
        raise ConfigError([f"{where}: cannot read it: {exc.strerror or exc}"]) from exc
    if len(token) < 16:
        raise ConfigError([f"{where}: the token must be at least 16 characters long"])
    return token


def file_problems(config: WaggleConfig) -> list[str]:
    """What loading does not check: the files the configuration names (tunnel keys, the admin token)."""
    from waggle.security.check import kerberos_problems

    problems = tunnel_problems(config) + kerberos_problems(config)
    try:
        admin_token(config)
    except ConfigError as exc:
        problems.extend(exc.problems)
    return problems


def check_in_subprocess(server_file: str | None, federation_file: str,
                        timeout: float = CHECK_SUBPROCESS_SECONDS) -> list[str]:
    """The problems ``waggle check`` finds, run in its own process (empty when it passes)."""
    cmd = [sys.executable, "-m", "waggle.cli", "check", "--federation-config", federation_file]
    if server_file:
        cmd += ["--server-config", server_file]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"waggle check could not run: {exc}"]
    if done.returncode == 0:
        return []
    problems = [line.removeprefix("error: ") for line in done.stderr.splitlines() if line.startswith("error: ")]
    return problems or [f"waggle check exited with {done.returncode}: {done.stderr.strip()[-500:]}"]
