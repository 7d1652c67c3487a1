"""A real OpenLDAP directory (``slapd``) on loopback, once per test session, for the LDAP groups tests.

:class:`Slapd` runs Debian's ``slapd`` in the foreground from a ``slapd.conf`` of its own (mdb backend, suffix
:data:`SUFFIX`, root :data:`ROOT_DN`) in a temporary directory, on ``ldap://127.0.0.1:PORT`` with a port of this
pytest worker's range (:func:`waggle.local.jvm.free_port`). It holds ``ou=people`` (``posixAccount`` users),
``ou=groups`` (``posixGroup`` with ``memberUid``, or ``groupOfNames`` with ``member``) and ``ou=private``, which
only a bound user may read (anonymous searches find nothing there). :data:`READER_DN` is such a user, with its
password in :attr:`Slapd.reader_password_file`. The helpers change entries with ldap3 as the root DN.

The fixture :func:`ldap_server` (session scope): a test module imports it (``from tests.support.ldap import
ldap_server`` and ``__all__ = ["ldap_server"]``, one slapd for each module that does), or the root conftest
registers this module once (``pytest_plugins = ("tests.support.ldap",)``, one slapd for the session). Tests share
the directory, so each names its entries with :func:`unique_name`. Without slapd the test is skipped locally and
failed in CI.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import ldap3
import pytest

from tests.support.env import require

SLAPD = "/usr/sbin/slapd"
SCHEMA_DIR = Path("/etc/ldap/schema")
MODULE_DIR = Path("/usr/lib/ldap")
SUFFIX = "dc=waggle,dc=test"
ROOT_DN = f"cn=admin,{SUFFIX}"
ROOT_PASSWORD = "root-secret"
PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"
PRIVATE = f"ou=private,{SUFFIX}"
READER_DN = f"cn=reader,{SUFFIX}"
READER_PASSWORD = "reader-secret"

_CONF = """\
include {schema}/core.schema
include {schema}/cosine.schema
include {schema}/nis.schema
include {schema}/inetorgperson.schema
pidfile {work}/slapd.pid
argsfile {work}/slapd.args
modulepath {modules}
moduleload back_mdb
database mdb
maxsize 16777216
suffix "{suffix}"
rootdn "{root_dn}"
rootpw {root_password}
directory {work}/data
access to attrs=userPassword by anonymous auth by * none
access to dn.subtree="{private}" by users read by * none
access to * by * read
"""


def slapd_available() -> bool:
    """Whether OpenLDAP's server, its mdb backend and the schema files it loads are installed."""
    return (os.access(SLAPD, os.X_OK) and (SCHEMA_DIR / "nis.schema").exists()
            and any(MODULE_DIR.glob("back_mdb*")))


class Slapd:
    """One slapd in ``work`` (see the module); :meth:`start` it, then :meth:`stop` and :meth:`start` it again at
    will (the same data, port and URL)."""

    def __init__(self, work: Path, port: int) -> None:
        self.work = work
        self.port = port
        self.url = f"ldap://127.0.0.1:{port}"
        self.reader_password_file = work / "reader-password"
        self._proc: subprocess.Popen[bytes] | None = None
        self._ids = itertools.count(20000)
        (work / "data").mkdir(parents=True, exist_ok=True)
        (work / "slapd.conf").write_text(_CONF.format(
            schema=SCHEMA_DIR, work=work, modules=MODULE_DIR, suffix=SUFFIX, root_dn=ROOT_DN,
            root_password=ROOT_PASSWORD, private=PRIVATE))
        self.reader_password_file.write_text(READER_PASSWORD + "\n")
        atexit.register(self.stop)  # a test run that dies leaves no slapd behind

    # -- the process -------------------------------------------------------------------------------------------
    def start(self, timeout: float = 20.0) -> Slapd:
        """Start slapd and wait until it answers; the first start also adds the base entries."""
        first = not any((self.work / "data").glob("*.mdb"))
        log = (self.work / "slapd.log").open("ab")
        self._proc = subprocess.Popen(
            [SLAPD, "-d", "0", "-f", str(self.work / "slapd.conf"), "-h", f"{self.url}/"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while not self.answering():
            if self._proc.poll() is not None:
                raise RuntimeError(f"slapd exited ({self._proc.returncode}): {self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"slapd did not answer on {self.url} in {timeout:g} s: {self.log_tail()}")
            time.sleep(0.05)
        if first:
            self._add_base()
        return self

    def stop(self) -> None:
        """Stop slapd (its data stays) and wait until nothing listens on its port."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """slapd stopped for the block, started again after it (even when the block fails)."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def answering(self) -> bool:
        """Whether something accepts connections on the port."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def log_tail(self, lines: int = 20) -> str:
        """The end of slapd's log, for error messages."""
        path = self.work / "slapd.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    # -- entries ---------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def admin(self) -> Iterator[ldap3.Connection]:
        """A connection bound as the root DN."""
        conn = ldap3.Connection(ldap3.Server(self.url, get_info=ldap3.NONE, connect_timeout=5), ROOT_DN,
                                ROOT_PASSWORD, auto_bind=ldap3.AUTO_BIND_NO_TLS, raise_exceptions=True,
                                receive_timeout=10)
        try:
            yield conn
        finally:
            conn.unbind()

    def _add_base(self) -> None:
        """The suffix, its three organizational units and the reader."""
        with self.admin() as conn:
            conn.add(SUFFIX, ["dcObject", "organization"], {"dc": "waggle", "o": "waggle tests"})
            for ou in (PEOPLE, GROUPS, PRIVATE):
                conn.add(ou, ["organizationalUnit"], {"ou": ou.split(",")[0][3:]})
            conn.add(READER_DN, ["organizationalRole", "simpleSecurityObject"],
                     {"cn": "reader", "userPassword": READER_PASSWORD})

    def user_dn(self, uid: str) -> str:
        """The DN :meth:`add_user` gives ``uid``."""
        return f"uid={uid},{PEOPLE}"

    def add_user(self, uid: str) -> str:
        """A ``posixAccount`` (and ``inetOrgPerson``) ``uid`` under ``ou=people``; its DN."""
        number = next(self._ids)
        dn = self.user_dn(uid)
        with self.admin() as conn:
            conn.add(dn, ["inetOrgPerson", "posixAccount"],
                     {"uid": uid, "cn": uid, "sn": uid, "uidNumber": number, "gidNumber": number,
                      "homeDirectory": f"/home/{uid}"})
        return dn

    def add_group(self, name: str, members: tuple[str, ...] = (), *, names: bool = False,
                  under: str = GROUPS) -> str:
        """A group under ``under`` (``ou=groups`` unless said): a ``posixGroup`` whose ``memberUid`` are
        ``members``, or with ``names`` a ``groupOfNames`` whose ``member`` are the DNs of ``members``. Its DN."""
        dn = f"cn={name},{under}"
        with self.admin() as conn:
            if names:
                conn.add(dn, ["groupOfNames"], {"cn": name, "member": [self.user_dn(m) for m in members]})
            else:
                attributes: dict[str, object] = {"cn": name, "gidNumber": next(self._ids)}
                if members:
                    attributes["memberUid"] = list(members)
                conn.add(dn, ["posixGroup"], attributes)
        return dn

    def add_member(self, group_dn: str, uid: str) -> None:
        """``uid`` into a posixGroup (``memberUid``)."""
        with self.admin() as conn:
            conn.modify(group_dn, {"memberUid": [(ldap3.MODIFY_ADD, [uid])]})

    def remove_member(self, group_dn: str, uid: str) -> None:
        """``uid`` out of a posixGroup (``memberUid``)."""
        with self.admin() as conn:
            conn.modify(group_dn, {"memberUid": [(ldap3.MODIFY_DELETE, [uid])]})

    def move_user(self, uid: str, from_group: str, to_group: str) -> None:
        """``uid`` out of the posixGroup ``from_group`` and into ``to_group`` (both DNs)."""
        self.remove_member(from_group, uid)
        self.add_member(to_group, uid)


_counter = itertools.count(1)


def unique_name(stem: str) -> str:
    """A name no other test of the session uses (the directory is shared)."""
    return f"{stem}{os.getpid()}x{next(_counter)}"


@pytest.fixture(scope="session")
def ldap_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slapd]:
    """One real slapd per session (see the module): ``ldap_server.url``, ``add_user``, ``add_group``,
    ``move_user``, ``down()``, ``reader_password_file``."""
    require(slapd_available(), "OpenLDAP's slapd is needed: apt-get install slapd ldap-utils (scripts/setup.sh --test)")
    from waggle.local.jvm import free_port

    server = Slapd(tmp_path_factory.mktemp("slapd"), free_port()).start()
    try:
        yield server
    finally:
        server.stop()
