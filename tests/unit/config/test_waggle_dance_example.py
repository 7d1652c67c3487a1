"""Waggle Dance's README examples pass `waggle check` as written, but for the SSH key and known_hosts files the
example names, which do not exist here; the warnings name exactly the keys waggle ignores."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from waggle.config.member_settings import METASTORE_SETTINGS
from waggle.config.registry import Setting
from waggle.config.settings import SERVER_SETTINGS

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "conf" / "examples"
SERVER = EXAMPLES / "waggle-dance-server.yml"
FEDERATION = EXAMPLES / "waggle-dance-federation.yml"

# Keys of the examples that Waggle Dance has and waggle does not implement.
UNIMPLEMENTED_IN_EXAMPLES = {
    (SERVER.name, "verbose"),
    (SERVER.name, "disconnect-connection-delay"),
    (SERVER.name, "disconnect-time-unit"),
    (SERVER.name, "yaml-storage.overwrite-config-on-shutdown"),
    (SERVER.name, "graphite"),
    (SERVER.name, "management"),
    (SERVER.name, "logging.config"),
    (FEDERATION.name, "hive-metastore-filter-hook"),
}

WARNING = re.compile(r"^warning: (?P<file>\S+): key '(?P<key>[^']+)' is not implemented by waggle and is ignored")
METASTORE_PREFIX = re.compile(r"^(primary-meta-store|federated-meta-stores\[\d+\])\.")


def _covers(warned: str, key: str) -> bool:
    """A warning about 'logging' covers 'logging.config', and one about 'graphite.host' covers 'graphite'."""
    return warned == key or key.startswith(f"{warned}.") or warned.startswith(f"{key}.")


def _unimplemented(settings: tuple[Setting, ...], warned: str) -> bool:
    return any(not s.implemented and _covers(warned, s.key) for s in settings)


def test_waggle_dance_readme_examples_pass_check() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "waggle", "check", "--server-config", str(SERVER), "--federation-config",
         str(FEDERATION)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    missing_files = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and missing_files, done.stderr
    for line in missing_files:
        assert "metastore 'secondary': metastore-tunnel." in line and "'/home/user/.ssh/" in line, line
    assert len(missing_files) == 3  # two keys, and known_hosts with strict checking

    warned: set[tuple[str, str]] = set()
    for line in done.stderr.splitlines():
        if line in missing_files:
            continue
        match = WARNING.match(line)
        assert match, f"not a warning about a key waggle does not implement: {line}"
        file, key = Path(match["file"]).name, match["key"]
        if file == FEDERATION.name:
            key = METASTORE_PREFIX.sub("", key)
            assert _unimplemented(METASTORE_SETTINGS, key), line
        else:
            assert _unimplemented(SERVER_SETTINGS, key), line
        warned.add((file, key))
    missing = {(f, k) for f, k in UNIMPLEMENTED_IN_EXAMPLES if not any(f == wf and _covers(wk, k) for wf, wk in warned)}
    assert missing == set(), "unimplemented keys that check did not warn about"
