"""Everything ``waggle check`` finds in a loaded configuration's files, from every room that knows a kind of file.

Loading (:func:`waggle.config.loader.load`) checks every key; these check the files the keys name, without
connecting anywhere: each SSH tunnel's key and known_hosts files (:mod:`waggle.tunnel.keys`), the keytabs and
the token-signing key (:mod:`waggle.security.check`), the TLS certificates and keys and the admin token
(:mod:`waggle.config.check`). It sits above those rooms so that none of them imports another for it.

The tunnel checks need paramiko, which the proxy process never imports, so a running server vetting a reload asks
a ``waggle check`` process (:func:`check_in_subprocess`).
"""

from __future__ import annotations

import subprocess
import sys

from waggle.config.check import admin_token, rest_secrets, tls_findings
from waggle.config.loader import ConfigError
from waggle.config.model import WaggleConfig
from waggle.config.timing import CHECK_SUBPROCESS_SECONDS


def tunnel_problems(config: WaggleConfig) -> list[str]:
    """The key and known-hosts files of every tunnel: present, readable and usable (nothing is connected)."""
    from waggle.tunnel.keys import check_files
    from waggle.tunnel.spec import spec_for

    return [f"{config.federation_file}: {p}" for m in config.federation.members if m.tunnel is not None
            for p in check_files(spec_for(m))]


def file_problems(config: WaggleConfig) -> list[str]:
    """What loading does not check: the files the configuration names (tunnel keys, the admin token, the REST
    clients' secrets, keytabs and the token-signing key, the TLS certificates and keys)."""
    from waggle.security.check import kerberos_problems

    problems = tunnel_problems(config) + kerberos_problems(config)
    problems.extend(tls_findings(config)[0])
    for read in (admin_token, rest_secrets):
        try:
            read(config)
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
