"""A real MIT Kerberos KDC on a loopback port, for tests and local runs of Kerberized metastores.

Each instance owns a directory holding its ``krb5.conf``, ``kdc.conf``, database, stash, keytabs and log. It
needs Debian's ``krb5-kdc`` and ``krb5-admin-server`` (``krb5kdc``, ``kdb5_util``, ``kadmin.local``) and
``krb5-user`` (``kinit``). Every tool reads its configuration from :meth:`LocalKdc.env`, never from ``/etc``.

Only AES with SHA-1 is enabled: Java's Kerberos (the metastore's) and MIT agree on it everywhere.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ENCTYPES = "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96"
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
_PACKAGES = {"krb5kdc": "krb5-kdc", "kdb5_util": "krb5-kdc", "kadmin.local": "krb5-admin-server",
             "kinit": "krb5-user", "klist": "krb5-user"}


class LocalKdcError(RuntimeError):
    """A local KDC could not be set up, started or used."""


def kerberos_tool(name: str) -> str:
    """The path of one MIT Kerberos program (the admin ones live in sbin, often off a user's PATH)."""
    found = shutil.which(name) or next((str(Path(d, name)) for d in _SBIN if os.access(Path(d, name), os.X_OK)), None)
    if found is None:
        package = _PACKAGES.get(name, "krb5-kdc krb5-admin-server krb5-user")
        raise LocalKdcError(f"{name} not found: install MIT Kerberos (apt-get install {package})")
    return found


def kdc_available() -> bool:
    """Whether the programs a :class:`LocalKdc` runs are installed."""
    try:
        for name in ("krb5kdc", "kdb5_util", "kadmin.local", "kinit"):
            kerberos_tool(name)
    except LocalKdcError:
        return False
    return True


def _free_tcp_and_udp_port(host: str = "127.0.0.1") -> int:
    """A port free for both TCP and UDP (the KDC listens on both)."""
    for _ in range(50):
        with socket.socket() as tcp:
            tcp.bind((host, 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind((host, port))
                except OSError:
                    continue
                return port
    raise LocalKdcError("no free loopback port for the KDC")


@dataclass
class TrustedRealm:
    """Another realm whose KDC this one's clients can reach (cross-realm trust, both directions)."""

    realm: str
    port: int


@dataclass
class LocalKdc:
    """One MIT KDC for ``realm`` on a free loopback port, running ``krb5kdc -n`` in the foreground."""

    workdir: Path
    realm: str = "WAGGLE.TEST"
    port: int = 0
    ticket_lifetime: str = "10h"
    renew_lifetime: str = "7d"
    process: subprocess.Popen[bytes] | None = None
    trusted: list[TrustedRealm] = field(default_factory=list)
    _master_password: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir).resolve()
        if not self.port:
            self.port = _free_tcp_and_udp_port()

    # -- paths and configuration --------------------------------------------------------------------------
    @property
    def krb5_conf(self) -> Path:
        return self.workdir / "krb5.conf"

    @property
    def kdc_conf(self) -> Path:
        return self.workdir / "kdc.conf"

    @property
    def log_path(self) -> Path:
        return self.workdir / "kdc.log"

    def env(self) -> dict[str, str]:
        """What every Kerberos program (and python-gssapi, and ``KRB5CCNAME``-less Java) needs to use this KDC."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def principal(self, name: str) -> str:
        """``name`` qualified with this realm, unless it already names one."""
        return name if "@" in name else f"{name}@{self.realm}"

    def _write_krb5_conf(self) -> None:
        realms = [TrustedRealm(self.realm, self.port), *self.trusted]
        realm_blocks = "".join(f"  {r.realm} = {{\n    kdc = 127.0.0.1:{r.port}\n  }}\n" for r in realms)
        # a client in one realm reaches a service in another straight through the shared cross-realm key
        capaths = "".join(
            f"  {a.realm} = {{\n    {b.realm} = .\n  }}\n" for a in realms for b in realms if a.realm != b.realm
        )
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {self.realm}\n"
            "  dns_lookup_kdc = false\n"
            "  dns_lookup_realm = false\n"
            "  dns_canonicalize_hostname = false\n"
            "  rdns = false\n"
            "  udp_preference_limit = 1\n"
            f"  ticket_lifetime = {self.ticket_lifetime}\n"
            f"  renew_lifetime = {self.renew_lifetime}\n"
            "  forwardable = true\n"
            f"  default_tkt_enctypes = {ENCTYPES}\n"
            f"  default_tgs_enctypes = {ENCTYPES}\n"
            f"  permitted_enctypes = {ENCTYPES}\n"
            "\n[realms]\n"
            f"{realm_blocks}"
            + (f"\n[capaths]\n{capaths}" if capaths else "")
        )

    def _write_kdc_conf(self) -> None:
        supported = " ".join(f"{e}:normal" for e in ENCTYPES.split())
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_ports = {self.port}\n"
            f"  kdc_tcp_listen = {self.port}\n"
            f"  kdc_tcp_ports = {self.port}\n"
            "\n[realms]\n"
            f"  {self.realm} = {{\n"
            f"    database_name = {self.workdir / 'principal'}\n"
            f"    key_stash_file = {self.workdir / 'stash'}\n"
            f"    acl_file = {self.workdir / 'kadm5.acl'}\n"
            f"    max_life = {self.ticket_lifetime}\n"
            f"    max_renewable_life = {self.renew_lifetime}\n"
            f"    master_key_type = {ENCTYPES.split()[0]}\n"
            f"    supported_enctypes = {supported}\n"
            "  }\n"
            "\n[logging]\n"
            f"  kdc = FILE:{self.log_path}\n"
            f"  admin_server = FILE:{self.workdir / 'kadmin.log'}\n"
            f"  default = FILE:{self.log_path}\n"
        )

    # -- running the tools ----------------------------------------------------------------------------------
    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [kerberos_tool(tool), *args], capture_output=True, text=True, env={**os.environ, **self.env()},
            stdin=subprocess.DEVNULL, timeout=60, cwd=self.workdir,
        )
        if check and done.returncode != 0:
            raise LocalKdcError(f"{tool} {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return done

    def _kadmin(self, query: str) -> str:
        done = self._run("kadmin.local", "-r", self.realm, "-q", query)
        # kadmin.local exits 0 even when the query fails; it reports on stderr
        if re.search(r"^(add_principal|ktadd|kadmin|delete_principal|change_password): .*(error|while)",
                     done.stderr, re.MULTILINE | re.IGNORECASE):
            raise LocalKdcError(f"kadmin.local -q {query!r} failed:\n{done.stderr}")
        return done.stdout

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> LocalKdc:
        """Create the database (once) and run the KDC until it accepts TCP connections."""
        kdc = kerberos_tool("krb5kdc")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_krb5_conf()
        self._write_kdc_conf()
        (self.workdir / "kadm5.acl").write_text(f"*/admin@{self.realm} *\n")
        if not (self.workdir / "principal").exists():
            self._run("kdb5_util", "create", "-s", "-r", self.realm, "-P", self._master_password)
        log = open(self.workdir / "krb5kdc.out", "ab")
        self.process = subprocess.Popen(
            [kdc, "-n", "-r", self.realm], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env()}, cwd=self.workdir, start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LocalKdcError(f"krb5kdc exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise LocalKdcError(f"krb5kdc not listening on 127.0.0.1:{self.port} after {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def __enter__(self) -> LocalKdc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for path in (self.workdir / "krb5kdc.out", self.log_path):
            try:
                text += path.read_text(errors="replace")
            except OSError:
                pass
        return "\n".join(text.splitlines()[-lines:]) or "(no log)"

    # -- principals and tickets -----------------------------------------------------------------------------
    def keytab_path(self, name: str) -> Path:
        short = self.principal(name).split("@", 1)[0]
        return self.workdir / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', short)}.keytab"

    def add_principal(self, name: str) -> Path:
        """Create ``name`` (``alice``, ``hive/localhost``) with a random key and return its own keytab."""
        principal = self.principal(name)
        keytab = self.keytab_path(name)
        if principal not in self._kadmin(f"getprinc {principal}"):
            self._kadmin(f"addprinc -randkey {principal}")
        keytab.unlink(missing_ok=True)
        self._kadmin(f"ktadd -k {keytab} {principal}")
        if not keytab.exists():
            raise LocalKdcError(f"kadmin.local wrote no keytab for {principal} at {keytab}")
        return keytab

    def kinit(self, principal: str, keytab: Path, ccache_path: Path) -> Path:
        """Fill a ticket cache file for ``principal`` from its keytab; returns the cache's path."""
        self._run("kinit", "-k", "-t", str(keytab), "-c", f"FILE:{ccache_path}", self.principal(principal))
        return Path(ccache_path)

    # -- cross-realm trust -----------------------------------------------------------------------------------
    def add_trusted_realm(self, other: LocalKdc) -> None:
        """Trust ``other``'s realm both ways: the same ``krbtgt`` keys in both KDCs, both realms in both
        ``krb5.conf`` files. Call it after both KDCs started; the running KDCs read the new files at once."""
        password = secrets.token_hex(16)
        for kdc in (self, other):
            for a, b in ((self.realm, other.realm), (other.realm, self.realm)):
                name = f"krbtgt/{a}@{b}"
                # a realm trusted before (by an earlier KDC of that name) gets new keys, at key version 1 on both
                # sides as the new KDC's are
                if name in kdc._kadmin("listprincs").split():
                    kdc._kadmin(f"delprinc -force {name}")
                kdc._kadmin(f"addprinc -pw {password} {name}")
        self.trusted = [t for t in self.trusted if t.realm != other.realm] + [TrustedRealm(other.realm, other.port)]
        other.trusted = [t for t in other.trusted if t.realm != self.realm] + [TrustedRealm(self.realm, self.port)]
        self._write_krb5_conf()
        other._write_krb5_conf()
