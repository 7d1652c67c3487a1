"""``waggle access``: the command the grants guide prints, run as printed on the guide's own server file."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from waggle.cli import main

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "guides" / "grants.md"
FEDERATION = ("primary-meta-store:\n  name: primary\n  remote-meta-store-uris: thrift://localhost:9083\n"
              "federated-meta-stores:\n- name: analytics\n  remote-meta-store-uris: thrift://localhost:9084\n"
              "  database-prefix: analytics_\n")


def guide_files(tmp_path: Path) -> None:
    text = GUIDE.read_text()
    server = re.search(r'```yaml title="waggle-server.yml"\n(.*?)```', text, re.S)
    assert server is not None
    (tmp_path / "waggle-server.yml").write_text(server.group(1))
    (tmp_path / "waggle-federation.yml").write_text(FEDERATION)


def printed_command() -> list[str]:
    block = re.search(r"```\n\s*(waggle access .*?)```", GUIDE.read_text(), re.S)
    assert block is not None
    return shlex.split(block.group(1).replace("\\\n", " "))


def test_the_guides_command_prints_what_the_guide_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    guide_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(printed_command()[1:]) == 0
    out = capsys.readouterr().out
    assert ("allow: select on table 'analytics_sales.orders': waggle-server.yml: authorization.rules[0] "
            "'analysts read sales'") in out
    assert "user 'alice' (groups: analysts), groups as given" in out


def test_a_deny_exits_1_and_without_a_privilege_every_privilege_is_decided(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    guide_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["access", "--server-config", "waggle-server.yml", "--federation-config", "waggle-federation.yml"]
    assert main([*args, "--user", "alice", "--group", "analysts", "analytics_sales.payroll_2026"]) == 1
    out = capsys.readouterr().out
    assert "hidden: table 'analytics_sales.payroll_2026'" in out and "'no one reads the payroll'" in out
    assert out.count("deny") == 6
    assert main([*args, "--user", "bob", "default", "drop"]) == 1  # the groups file is absent: no groups
    assert "deny: drop on database 'default': authorization.default (deny)" in capsys.readouterr().out


def test_a_server_file_without_grants_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yml").write_text("port: 1\n")
    (tmp_path / "f.yml").write_text(FEDERATION)
    assert main(["access", "--server-config", str(tmp_path / "s.yml"), "--federation-config",
                 str(tmp_path / "f.yml"), "--user", "a", "db"]) == 2
    assert "has no authorization block" in capsys.readouterr().err
