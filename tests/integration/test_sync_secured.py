"""``waggle sync`` and ``waggle check --connect`` in a secured estate, with real parts: a real MIT KDC, two
Kerberized Hive 2.3 metastores (the member ``far``, reached through a real sshd hop, and the primary ``home``), and
a Hive 2.3 metastore serving TLS (the member ``tlsm``).

The sync connects as the proxy does (waggle.upstream.handshake under waggle.upstream.blocking), as the person who
runs it: from their ticket cache (``KRB5CCNAME``), or from ``--principal``/``--keytab``.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import ROOT, java_available, require
from tests.support.sshd import Sshd, keygen, sshd_available, write_known_hosts
from tests.support.tls_certs import Certs, make_certs
from waggle.config.loader import load
from waggle.local.jvm import free_port
from waggle.local.metastore import KerberosSetup, LocalMetastore, TlsSetup
from waggle.local.seed import ensure_database, ensure_partitioned_table, ensure_table
from waggle.upstream.blocking import client, kerberos_identity

pytestmark = [pytest.mark.integration, pytest.mark.kerberos]

SRC = "krbsrc"
TLS_SRC = "tlssrc"
PARTITIONS = 12


@dataclass
class Estate:
    work: Path
    kdc: Any
    primary: LocalMetastore
    far: Any  # the session's Kerberized metastore
    tls: LocalMetastore
    hop: Sshd
    certs: Certs
    federation: Path
    alice_cache: Path  # a ticket cache holding alice's ticket (kinit from her keytab)

    @property
    def alice(self) -> str:
        return str(self.kdc.principal("alice"))

    def env(self, cache: Path | str | None = None) -> dict[str, str]:
        """This process's environment (it has the KDC's KRB5_CONFIG) with ``KRB5CCNAME`` set to ``cache``
        (alice's by default)."""
        return dict(os.environ, KRB5CCNAME=f"FILE:{cache or self.alice_cache}")

    def waggle(self, *args: str, cache: Path | str | None = None, timeout: float = 600
               ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "waggle", *args], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, env=self.env(cache))

    def sync(self, *args: str, federation: Path | None = None, cache: Path | str | None = None
             ) -> tuple[int, dict[str, Any], str]:
        """``waggle sync`` (its exit code, its JSON report, its output)."""
        report = self.work / f"report-{uuid.uuid4().hex[:6]}.json"
        done = self.waggle("sync", "--federation-config", str(federation or self.federation), "--report",
                           str(report), "--no-progress", *args, cache=cache)
        data = json.loads(report.read_text()) if report.exists() else {}
        return done.returncode, data, done.stdout + done.stderr

    def member(self, name: str, federation: Path | None = None) -> Any:
        config = load(None, str(federation or self.federation), serving=False)
        return next(m for m in config.federation.members if m.name == name)

    def as_alice(self) -> Any:
        """alice's credentials from her keytab (the tests' own view of the metastores)."""
        return kerberos_identity(self.alice, str(self.kdc.keytab_path("alice")))


def federation_yaml(kdc: Any, primary: LocalMetastore, far: Any, tls: LocalMetastore, hop: Sshd,
                    key: Path, known: Path, ca: Path) -> str:
    sasl = ("  configuration-properties:\n"
            "    hive.metastore.sasl.enabled: true\n"
            f"    hive.metastore.kerberos.principal: hive/_HOST@{kdc.realm}\n")
    return (
        "primary-meta-store:\n"
        "  name: home\n"
        f"  remote-meta-store-uris: thrift://localhost:{primary.port}\n"
        "  access-control-type: READ_AND_WRITE_AND_CREATE\n"
        f"{sasl}"
        "federated-meta-stores:\n"
        "- name: far\n"
        f"  remote-meta-store-uris: thrift://localhost:{far.port}\n"
        "  database-prefix: far_\n"
        f"{sasl}"
        "  metastore-tunnel:\n"
        f"    route: {getpass.getuser()}@{hop.address}\n"
        f"    private-keys: {key}\n"
        f"    known-hosts: {known}\n"
        f"    port: {hop.port}\n"
        "    strict-host-key-checking: yes\n"
        "- name: tlsm\n"
        f"  remote-meta-store-uris: thrift://localhost:{tls.port}\n"
        "  database-prefix: tlsm_\n"
        "  tls:\n"
        "    enabled: true\n"
        f"    ca-file: {ca}\n"
    )


@pytest.fixture(scope="module")
def estate(kdc: Any, kerberized_metastore: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Estate]:
    require(java_available(), "Java 17 is needed to run the local Hive metastores")
    require(sshd_available(), "OpenSSH sshd is needed (scripts/setup.sh --test installs it)")
    work = tmp_path_factory.mktemp("sync-secured")
    certs = make_certs(work / "certs")
    setup = KerberosSetup(principal=kdc.principal("hive/localhost"), keytab=kdc.keytab_path("hive/localhost"),
                          krb5_conf=kdc.krb5_conf)
    primary = LocalMetastore(work / "home", kerberos=setup)
    tls = LocalMetastore(work / "tlsm", tls=TlsSetup(certs.keystore, certs.password, certs.ca))
    key = keygen(work / "id_waggle")
    port = free_port("127.0.0.2")
    hop = Sshd(work / "hop", "127.0.0.2", port, [key]).start()
    try:
        primary.start()
        tls.start()
        primary.wait_ready(180)
        tls.wait_ready(180)
        known = write_known_hosts(work / "known_hosts", hop)
        federation = work / "federation.yml"
        federation.write_text(federation_yaml(kdc, primary, kerberized_metastore, tls, hop, key, known,
                                              certs.ca))
        cache = kdc.kinit("alice", kdc.keytab_path("alice"), work / "alice.ccache")
        estate = Estate(work, kdc, primary, kerberized_metastore, tls, hop, certs, federation, cache)
        # the sources' tables, written as alice over the same client the sync uses
        with client(estate.member("far"), estate.as_alice(), 120) as c:
            wh = f"file://{kerberized_metastore.warehouse}/{SRC}.db"
            ensure_database(c, SRC, wh)
            ensure_partitioned_table(c, SRC, "events", f"{wh}/events", PARTITIONS, data=True)
            ensure_table(c, SRC, "people", f"{wh}/people", [("id", "int"), ("name", "string")],
                         rows=["1,ann", "2,bob"])
        with client(estate.member("tlsm"), None, 120) as c:
            wh = f"file://{tls.warehouse}/{TLS_SRC}.db"
            ensure_database(c, TLS_SRC, wh)
            ensure_table(c, TLS_SRC, "people", f"{wh}/people", [("id", "int"), ("name", "string")],
                         rows=["1,ann", "2,bob"])
        yield estate
    finally:
        hop.stop()
        tls.stop()
        primary.stop()


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {t["target"]: t["status"] for t in report.get("tables", [])}


def home_databases(estate: Estate) -> list[str]:
    with client(estate.member("home"), estate.as_alice(), 60) as c:
        return list(c.get_all_databases())


def home_partitions(estate: Estate, db: str, table: str) -> list[Any]:
    with client(estate.member("home"), estate.as_alice(), 60) as c:
        return list(c.get_partitions(db, table, -1))


# -- Kerberos through an SSH hop, into a Kerberized primary ----------------------------------------------------------
def test_mirror_and_copy_from_a_kerberized_member_through_a_hop_logged_in_from_the_ticket_cache(estate: Estate
                                                                                                 ) -> None:
    forwards_before = len(estate.hop.forwards())
    code, report, out = estate.sync("--source", "far", "--tables", f"{SRC}.events,{SRC}.people",
                                    "--target-database", "krb_mirror")
    assert code == 0, out
    assert statuses(report) == {"krb_mirror.events": "ok", "krb_mirror.people": "ok"}, report
    mirrored = home_partitions(estate, "krb_mirror", "events")
    assert len(mirrored) == PARTITIONS
    assert all(str(estate.far.warehouse) in p.sd.location for p in mirrored)  # a mirror points at the source's data
    assert len(estate.hop.forwards()) > forwards_before  # the source was read through the hop

    code, report, out = estate.sync("--source", "far", "--tables", f"{SRC}.events", "--mode", "copy",
                                    "--target-database", "krb_copy", "--master", "local[1]")
    assert code == 0, out
    assert statuses(report) == {"krb_copy.events": "ok"}, report
    copied = home_partitions(estate, "krb_copy", "events")
    assert len(copied) == PARTITIONS
    assert not any(str(estate.far.warehouse) in p.sd.location for p in copied)  # the copy's own files
    one = next(p for p in copied if p.values == ["p000003"])
    files = list(Path(one.sd.location.removeprefix("file:").removeprefix("//")).iterdir())
    assert files and any("3,name3" in f.read_text() for f in files if f.is_file())

    # a rerun is a no-op, logged in the same way
    code, report, out = estate.sync("--source", "far", "--tables", f"{SRC}.events", "--target-database",
                                    "krb_mirror")
    assert code == 0, out
    assert report["tables"][0]["created"] == 0 and report["tables"][0]["updated"] == 0, report


def test_mirror_and_copy_logged_in_from_a_keytab(estate: Estate) -> None:
    nowhere = estate.work / "no-such-cache"  # the ticket cache is empty: only the keytab can log in
    args = ("--principal", estate.alice, "--keytab", str(estate.kdc.keytab_path("alice")))
    code, report, out = estate.sync("--source", "far", "--tables", f"{SRC}.people", "--target-database",
                                    "krb_keytab", *args, cache=nowhere)
    assert code == 0, out
    assert statuses(report) == {"krb_keytab.people": "ok"}, report
    code, report, out = estate.sync("--source", "far", "--tables", f"{SRC}.events", "--mode", "copy",
                                    "--target-database", "krb_keytab_copy", "--master", "local[1]", *args,
                                    cache=nowhere)
    assert code == 0, out
    assert len(home_partitions(estate, "krb_keytab_copy", "events")) == PARTITIONS
    # --principal without --keytab is refused before anything is reached
    done = estate.waggle("sync", "--federation-config", str(estate.federation), "--source", "far", "--tables",
                         f"{SRC}.people", "--principal", estate.alice)
    assert done.returncode == 1 and "--principal and --keytab go together" in done.stderr


def test_mirror_from_a_tls_member(estate: Estate) -> None:
    code, report, out = estate.sync("--source", "tlsm", "--tables", f"{TLS_SRC}.people", "--target-database",
                                    "tls_mirror")
    assert code == 0, out
    assert statuses(report) == {"tls_mirror.people": "ok"}, report
    with client(estate.member("home"), estate.as_alice(), 60) as c:
        assert str(estate.tls.warehouse) in c.get_table("tls_mirror", "people").sd.location


def test_a_wrong_ticket_or_ca_fails_the_table_naming_the_metastore_and_writes_nothing(estate: Estate) -> None:
    # no ticket: the member cannot be logged in to
    empty = estate.work / "empty.ccache"
    code, report, out = estate.sync("--source", "far", "--tables", f"{SRC}.people", "--target-database",
                                    "krb_never", cache=empty)
    assert code == 2, out
    [table] = report["tables"]
    assert table["status"] == "failed"
    assert table["error"].startswith("metastore 'far' cannot log in with Kerberos: no usable Kerberos ticket in "
                                     f"KRB5CCNAME=FILE:{empty}"), table
    # a CA that did not sign the member's certificate
    wrong_ca = estate.work / "federation-wrong-ca.yml"
    wrong_ca.write_text(estate.federation.read_text().replace(f"ca-file: {estate.certs.ca}",
                                                              f"ca-file: {estate.certs.other_ca}"))
    code, report, out = estate.sync("--source", "tlsm", "--tables", f"{TLS_SRC}.people", "--target-database",
                                    "tls_never", federation=wrong_ca)
    assert code == 2, out
    [table] = report["tables"]
    assert table["status"] == "failed"
    assert table["error"].startswith("metastore 'tlsm' TLS handshake with localhost failed"), table
    assert "certificate was refused" in table["error"] and "tls.ca-file" in table["error"], table
    databases = home_databases(estate)
    assert "krb_never" not in databases and "tls_never" not in databases
    assert "Traceback" not in out


def test_check_connect_reaches_every_member_and_reports_its_login(estate: Estate) -> None:
    realm = estate.kdc.realm
    server = estate.work / "server.yml"  # a Kerberized federation is served with waggle's own keytab
    server.write_text(textwrap.dedent(f"""\
        configuration-properties:
          hive.metastore.sasl.enabled: true
          hive.metastore.kerberos.principal: waggle/localhost@{realm}
          hive.metastore.kerberos.keytab.file: {estate.kdc.keytab_path('waggle/localhost')}
        """))
    check = ("check", "--server-config", str(server), "--federation-config", str(estate.federation), "--connect")
    done = estate.waggle(*check, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    far = next(line for line in lines if line.startswith("ok: metastore 'far': "))
    assert far.startswith(f"ok: metastore 'far': thrift://localhost:{estate.far.port} through its SSH tunnel, "
                          f"Kerberos GSSAPI as waggle/localhost@{realm} to hive/localhost@{realm} (qop auth); "), far
    tls = next(line for line in lines if line.startswith("ok: metastore 'tlsm': "))
    assert tls.startswith(f"ok: metastore 'tlsm': thrift://localhost:{estate.tls.port}, TLS, no Kerberos; "), tls
    home = next(line for line in lines if line.startswith("ok: metastore 'home': "))
    assert f"Kerberos GSSAPI as waggle/localhost@{realm}" in home
    assert lines[-1].startswith("ok: 3 metastore(s), primary 'home'")

    # --principal and --keytab, as spark-submit takes them, win over the server file's keytab
    done = estate.waggle(*check, "--principal", estate.alice, "--keytab", str(estate.kdc.keytab_path("alice")),
                         timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Kerberos GSSAPI as alice@{realm} to hive/localhost@{realm}" in done.stdout

    # a keytab that does not hold the principal: each Kerberized member is an error naming it, the TLS one is
    # still reached
    done = estate.waggle(*check, "--principal", estate.alice, "--keytab", str(estate.kdc.keytab_path("bob")),
                         timeout=120)
    assert done.returncode == 2
    assert "error: metastore 'far' cannot log in with Kerberos" in done.stderr, done.stderr
    assert "error: metastore 'home' cannot log in with Kerberos" in done.stderr
    assert "ok: metastore 'tlsm'" in done.stdout
    assert "Traceback" not in done.stderr


# -- following ------------------------------------------------------------------------------------------------------
def test_the_follower_follows_a_kerberized_member_through_a_hop_and_a_tls_member(estate: Estate) -> None:
    """``waggle sync --follow`` reads both sources' notification logs through the one secured client: Kerberos
    from a keytab through the SSH hop, and TLS; a partition added at each source reaches the Kerberized primary."""
    from tests.support.follower import FollowerProcess, sync_file
    from waggle.hms.gen.hive_metastore import ttypes
    from waggle.local.seed import text_sd

    with client(estate.member("tlsm"), None, 120) as c:
        ensure_partitioned_table(c, TLS_SRC, "events", f"file://{estate.tls.warehouse}/{TLS_SRC}.db/events", 3)
    config = sync_file(estate.work / "follow.yml", estate.federation, [
        {"name": "far-events", "source": "far", "tables": f"{SRC}.events", "target-database": "krb_follow",
         "follow": True},
        {"name": "tls-events", "source": "tlsm", "tables": f"{TLS_SRC}.events", "target-database": "tls_follow",
         "follow": True}], **{"http-port": free_port(), "lease-seconds": 3})
    follower = FollowerProcess(config, estate.work / "follow.log", "--principal", estate.alice, "--keytab",
                               str(estate.kdc.keytab_path("alice"))).start()

    def names(db: str) -> set[str]:
        try:
            return {p.values[0] for p in home_partitions(estate, db, "events")}
        except Exception:
            return set()

    try:
        follower.until(lambda: len(names("krb_follow")) == PARTITIONS and len(names("tls_follow")) == 3, 180,
                       "the bootstraps")
        forwards = len(estate.hop.forwards())
        for member, db, location in (("far", SRC, estate.far.warehouse), ("tlsm", TLS_SRC, estate.tls.warehouse)):
            with client(estate.member(member), estate.as_alice() if member == "far" else None, 60) as c:
                c.add_partition(ttypes.Partition(
                    values=["followed"], dbName=db, tableName="events", parameters={},
                    sd=text_sd(f"file://{location}/{db}.db/events/part=followed", [("id", "int"), ("name", "string")])))
        follower.until(lambda: "followed" in names("krb_follow") and "followed" in names("tls_follow"), 60,
                       "the new partitions at the target")
        assert len(estate.hop.forwards()) >= forwards  # still through the hop
    finally:
        assert follower.stop() == 0, follower.output()[-3000:]
