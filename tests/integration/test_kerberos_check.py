"""``waggle check`` names what is wrong with a Kerberos setup (file, key, value), against real keytabs from a
real KDC, and a running waggle shows its ticket in /healthz and /metrics."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import ROOT
from tests.support.proxy import WaggleProcess
from waggle.security.check import KeytabError, keytab_principals

pytestmark = [pytest.mark.integration, pytest.mark.kerberos]


def server_yaml(kdc: Any, keytab: Path | str, principal: str = "waggle/localhost", extra: str = "") -> str:
    return ("configuration-properties:\n"
            "  hive.metastore.sasl.enabled: true\n"
            f"  hive.metastore.kerberos.principal: {principal}@{kdc.realm}\n"
            f"  hive.metastore.kerberos.keytab.file: {keytab}\n{extra}")


def check(tmp_path: Path, server: str, federation: str = "") -> subprocess.CompletedProcess[str]:
    (tmp_path / "server.yml").write_text(server)
    (tmp_path / "federation.yml").write_text(federation or (
        "primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://localhost:9083\n"))
    return subprocess.run([sys.executable, "-m", "waggle", "check", "--server-config", str(tmp_path / "server.yml"),
                           "--federation-config", str(tmp_path / "federation.yml")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_keytabs_are_read_for_their_principals(kdc, tmp_path):
    assert keytab_principals(str(kdc.keytab_path("alice"))) == [f"alice@{kdc.realm}"]
    (tmp_path / "junk").write_bytes(b"\x00" * 10)
    with pytest.raises(KeytabError, match="not a Kerberos keytab"):
        keytab_principals(str(tmp_path / "junk"))
    with pytest.raises(KeytabError, match="cannot read it"):
        keytab_principals(str(tmp_path / "missing"))


def test_a_good_setup_passes(kdc, tmp_path):
    done = check(tmp_path, server_yaml(kdc, kdc.keytab_path("waggle/localhost")))
    assert done.returncode == 0, done.stderr


def test_a_wrong_keytab_is_named_with_its_key_and_what_it_holds(kdc, tmp_path):
    wrong = kdc.keytab_path("alice")
    done = check(tmp_path, server_yaml(kdc, wrong))
    assert done.returncode != 0
    assert (f"key 'configuration-properties.hive.metastore.kerberos.keytab.file': invalid value '{wrong}': it holds "
            f"no key for waggle/localhost@{kdc.realm} (it holds alice@{kdc.realm})") in done.stderr


def test_waggle_dances_keys_name_themselves_and_bad_files_are_named(kdc, tmp_path):
    junk = tmp_path / "junk.keytab"
    junk.write_text("not a keytab")
    server = ("configuration-properties:\n  hive.metastore.sasl.enabled: true\n"
              f"  hive.server2.authentication.kerberos.principal: waggle/localhost@{kdc.realm}\n"
              f"  hive.server2.authentication.kerberos.keytab: {junk}\n"
              f"delegation-tokens:\n  signing-key-file: {tmp_path / 'no-such-key'}\n")
    done = check(tmp_path, server)
    assert done.returncode != 0
    assert (f"key 'configuration-properties.hive.server2.authentication.kerberos.keytab': invalid value '{junk}': "
            "not a Kerberos keytab") in done.stderr
    assert f"key 'delegation-tokens.signing-key-file': invalid value '{tmp_path / 'no-such-key'}'" in done.stderr


def test_principals_of_the_wrong_form_are_refused_when_loading(kdc, tmp_path):
    done = check(tmp_path, server_yaml(kdc, kdc.keytab_path("waggle/localhost")).replace(f"@{kdc.realm}", ""))
    assert done.returncode != 0
    assert "key 'configuration-properties.hive.metastore.kerberos.principal': invalid value 'waggle/localhost': " \
           "expected a principal with a realm" in done.stderr
    federation = ("primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://localhost:9083\n"
                  "  configuration-properties:\n    hive.metastore.sasl.enabled: true\n")
    done = check(tmp_path, "", federation)
    assert "key 'primary-meta-store.configuration-properties.hive.metastore.kerberos.principal' is required" \
        in done.stderr
    done = check(tmp_path, "", federation + "    hive.metastore.kerberos.principal: hive/_HOST@WAGGLE.TEST\n")
    assert "metastore 'p' uses Kerberos (hive.metastore.sasl.enabled), so the server file needs waggle's own " \
           "principal and keytab" in done.stderr


def test_waggle_shows_its_ticket_in_healthz_and_metrics(kdc, primary, tmp_path):
    key = tmp_path / "keys"
    key.write_text(base64.b64encode(b"s" * 32).decode() + "\n")
    federation = ("primary-meta-store:\n  name: primary\n"
                  f"  remote-meta-store-uris: {primary.uri}\n")
    proc = WaggleProcess(tmp_path / "w", federation, server_yaml(
        kdc, kdc.keytab_path("waggle/localhost"), extra=f"delegation-tokens:\n  signing-key-file: {key}\n"))
    proc.start()
    try:
        import json

        health = json.loads(proc.http("/healthz"))["security"]["kerberos"]
        assert health["principal"] == f"waggle/localhost@{kdc.realm}" and health["ok"] and health["error"] is None
        assert (proc.metric("waggle_kerberos_login_ok") or 0) == 1.0
        assert (proc.metric("waggle_kerberos_ticket_expiry_timestamp_seconds") or 0) > 0
        assert str(key) not in proc.log() or "s" * 32 not in proc.log()
    finally:
        proc.stop()


def test_a_keytab_that_cannot_accept_stops_waggle_with_its_name(kdc, primary, tmp_path):
    federation = f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary.uri}\n"
    proc = WaggleProcess(tmp_path / "w", federation, server_yaml(kdc, kdc.keytab_path("alice")))
    with pytest.raises(RuntimeError, match=r"cannot accept Kerberos clients as waggle/localhost@WAGGLE.TEST with "
                                           rf"keytab {kdc.keytab_path('alice')}"):
        proc.start()
    proc.stop()
