"""TLS with real parts: waggle's front door to Python Thrift clients over ``ssl``, and waggle to real Hive 2.3
metastores serving TLS (``hive.metastore.use.SSL`` with a PKCS#12 keystore).

Certificates come from :mod:`tls_certs`: one CA signs a server certificate (localhost, 127.0.0.1), a client
certificate and a server certificate for another name; a second CA signs nothing waggle is shown.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore, ttypes
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TTransportException

from tests.support.clients import encode_call, hive2_client
from tests.support.env import java_available, require
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess
from tests.support.tls_certs import Certs, make_certs
from tests.support.waits import wait_for
from waggle.local.metastore import LocalMetastore, TlsSetup

pytestmark = pytest.mark.integration

#: a database only the TLS metastores hold
TLS_DB = "tls_only"


@contextmanager
def tls_client(port: int, ca: Path | None, cert: Any = None, host: str = "localhost", timeout: float = 15.0
               ) -> Iterator[Any]:
    """A Hive 2 Thrift client over TLS (unframed binary), trusting ``ca`` (the system's CAs when None)."""
    context = ssl.create_default_context(cafile=str(ca) if ca else None)
    if cert is not None:
        context.load_cert_chain(cert.cert, cert.key)
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        conn = context.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise
    sock = TSocket("127.0.0.1", port)
    sock.setHandle(conn)
    transport = TBufferedTransport(sock)
    try:
        yield ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(transport))
    finally:
        transport.close()


def refused(port: int, ca: Path | None, cert: Any = None) -> str:
    """How a TLS client is turned away: the handshake fails, or (TLS 1.3, where the server checks the client's
    certificate after the client is done) the first call does. Fails the test if the client is served."""
    try:
        with tls_client(port, ca, cert) as c:
            c.get_all_databases()
    except (ssl.SSLError, OSError, TTransportException) as exc:
        return repr(exc)
    pytest.fail("the TLS client was served")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_metastores(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalMetastore]]:
    """Two real Hive 2.3 metastores serving TLS, started in parallel: ``secure`` with a certificate for
    localhost and 127.0.0.1, ``elsewhere`` with one for metastore.elsewhere.test. Each holds ``tls_only``."""
    require(java_available(), "Java 17 is needed to run the local Hive metastores")
    from tests.support.tls_certs import pkcs12

    root = tmp_path_factory.mktemp("tls-metastores")
    elsewhere_keystore = pkcs12(certs.elsewhere, root / "elsewhere.p12", ca=certs.ca)
    stores = {
        "secure": LocalMetastore(root / "secure", tls=TlsSetup(certs.keystore, certs.password, certs.ca)),
        "elsewhere": LocalMetastore(root / "elsewhere", tls=TlsSetup(elsewhere_keystore, certs.password, certs.ca)),
    }
    try:
        for store in stores.values():
            store.start()
        for store in stores.values():
            store.wait_ready(180)
        for name, store in stores.items():
            host = "localhost" if name == "secure" else "metastore.elsewhere.test"
            with tls_client(store.port, certs.ca, host=host) as c:
                if TLS_DB not in c.get_all_databases():
                    c.create_database(ttypes.Database(name=TLS_DB, description=f"on {name}",
                                                      locationUri=f"file://{store.warehouse}/{TLS_DB}.db",
                                                      parameters={}))
        yield stores
    finally:
        for store in stores.values():
            store.stop()


def tls_server_yaml(certs: Certs, client_ca: bool = False, hive_key: bool = False) -> str:
    text = ("database-resolution: PREFIXED\n"
            f"tls:\n  certificate-file: {certs.server.cert}\n  key-file: {certs.server.key}\n")
    if client_ca:
        text += f"  client-ca-file: {certs.ca}\n"
    if hive_key:
        text += "configuration-properties:\n  hive.metastore.use.SSL: true\n"
    return text


# -- the front door -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tls_waggle(primary: Any, certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle-tls"), federation_yaml(primary.uri),
                         tls_server_yaml(certs)).start()
    yield proc
    proc.stop()


def test_front_door_serves_a_client_that_trusts_its_ca(tls_waggle: WaggleProcess, certs: Certs) -> None:
    with tls_client(tls_waggle.port, certs.ca) as c:
        assert "default" in c.get_all_databases()
        assert c.get_database("default").name == "default"
    with tls_client(tls_waggle.port, certs.ca, host="127.0.0.1") as c:  # the IP address is named as well
        assert "default" in c.get_all_databases()


def test_front_door_refuses_a_client_that_trusts_another_ca(tls_waggle: WaggleProcess, certs: Certs) -> None:
    since = len(tls_waggle.log())
    failures = tls_waggle.metric("waggle_client_auth_failures_total", kind="tls") or 0.0
    why = refused(tls_waggle.port, certs.other_ca)
    assert "CERTIFICATE_VERIFY_FAILED" in why
    events = wait_for(lambda: [e for e in tls_waggle.events("client.unauthenticated", since)
                               if "UNKNOWN_CA" in e["reason"]], 10.0, lambda: tls_waggle.log()[since:])
    assert events, tls_waggle.log()[since:]
    assert events[0]["reason"].startswith("TLS handshake failed"), events[0]
    assert (tls_waggle.metric("waggle_client_auth_failures_total", kind="tls") or 0.0) >= failures + 1
    with tls_client(tls_waggle.port, certs.ca) as c:  # the good client is still served
        assert "default" in c.get_all_databases()


def test_front_door_gives_a_plain_client_nothing(tls_waggle: WaggleProcess) -> None:
    from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T

    since = len(tls_waggle.log())
    with socket.create_connection(("127.0.0.1", tls_waggle.port), timeout=10) as sock:
        sock.sendall(encode_call("get_all_databases", T.get_all_databases_args()))
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
    # no Thrift reply: at most a TLS alert record (content type 21), never a message
    assert not received or received[0] == 21, received[:40]
    with pytest.raises((TTransportException, OSError)), hive2_client(tls_waggle.port, timeout=10) as c:
        c.get_all_databases()
    events = wait_for(lambda: tls_waggle.events("client.unauthenticated", since), 10.0)
    assert events and all(e["reason"].startswith("TLS handshake failed") for e in events), events


def test_mutual_tls_needs_a_client_certificate(primary: Any, certs: Certs, tmp_path: Path) -> None:
    proc = WaggleProcess(tmp_path, federation_yaml(primary.uri), tls_server_yaml(certs, client_ca=True)).start()
    try:
        since = len(proc.log())
        refused(proc.port, certs.ca)
        events = wait_for(lambda: [e for e in proc.events("client.unauthenticated", since)
                                   if "CERTIFICATE" in e["reason"]], 10.0, lambda: proc.log()[since:])
        assert events, proc.log()[since:]
        with tls_client(proc.port, certs.ca, cert=certs.client) as c:
            assert "default" in c.get_all_databases()
        # a certificate from another CA is refused too
        from tests.support.tls_certs import issue, make_ca

        _, _, other_cert, other_key = make_ca(tmp_path, "stranger-ca")
        stranger = issue(tmp_path, "stranger", other_cert, other_key, "mallory", client=True)
        refused(proc.port, certs.ca, cert=stranger)
    finally:
        proc.stop()


# -- waggle to TLS metastores -----------------------------------------------------------------------------------
def member(name: str, uri: str, tls: str) -> str:
    return f"- name: {name}\n  remote-meta-store-uris: {uri}\n  database-prefix: {name}_\n{tls}"


@pytest.fixture(scope="module")
def upstream_waggle(primary: Any, analytics: Any, tls_metastores: dict[str, LocalMetastore], certs: Certs,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    """waggle over the plain primary and analytics, and over the TLS metastores with good and bad settings."""
    secure, elsewhere = tls_metastores["secure"].uri, tls_metastores["elsewhere"].uri
    members = [
        member("good", secure, f"  tls:\n    enabled: true\n    ca-file: {certs.ca}\n"),
        member("badca", secure, f"  tls:\n    enabled: true\n    ca-file: {certs.other_ca}\n"),
        member("strict", elsewhere, f"  tls:\n    enabled: true\n    ca-file: {certs.ca}\n"),
        member("loose", elsewhere, f"  tls:\n    enabled: true\n    ca-file: {certs.ca}\n    check-hostname: false\n"),
        member("analytics", analytics.uri, ""),
    ]
    proc = WaggleProcess(tmp_path_factory.mktemp("waggle-upstream-tls"),
                         federation_yaml(primary.uri, "federated-meta-stores:\n" + "".join(members)),
                         "database-resolution: PREFIXED\n").start()
    yield proc
    proc.stop()


def test_upstream_tls_with_the_right_ca(upstream_waggle: WaggleProcess) -> None:
    with upstream_waggle.client() as c:
        assert c.get_database(f"good_{TLS_DB}").description == "on secure"
        assert f"good_{TLS_DB}" in c.get_all_databases()
        for _ in range(3):  # connections are kept and reused
            assert c.get_all_tables(f"good_{TLS_DB}") == []


def test_upstream_tls_with_the_wrong_ca(upstream_waggle: WaggleProcess) -> None:
    with upstream_waggle.client() as c:
        with pytest.raises(ttypes.MetaException) as info:
            c.get_database(f"badca_{TLS_DB}")
        message = info.value.message
        assert "metastore 'badca'" in message and "TLS" in message and "certificate" in message, message
        # the others keep working
        assert c.get_database(f"good_{TLS_DB}").name == f"good_{TLS_DB}"
        assert c.get_database("analytics_default").name == "analytics_default"
        assert "default" in c.get_all_databases()


def test_upstream_tls_checks_the_host_name(upstream_waggle: WaggleProcess) -> None:
    with upstream_waggle.client() as c:
        with pytest.raises(ttypes.MetaException) as info:
            c.get_database(f"strict_{TLS_DB}")
        message = info.value.message
        assert "metastore 'strict'" in message and "127.0.0.1" in message, message
        assert "TLS" in message and "certificate" in message.lower(), message
        assert c.get_database(f"loose_{TLS_DB}").description == "on elsewhere"


def test_hive_use_ssl_key_on_both_sides(primary: Any, tls_metastores: dict[str, LocalMetastore], certs: Certs,
                                        tmp_path: Path) -> None:
    fed = federation_yaml(primary.uri, "federated-meta-stores:\n" + member(
        "hive", tls_metastores["secure"].uri,
        f"  tls:\n    ca-file: {certs.ca}\n  configuration-properties:\n    hive.metastore.use.SSL: true\n"))
    proc = WaggleProcess(tmp_path, fed, tls_server_yaml(certs, hive_key=True)).start()
    try:
        with tls_client(proc.port, certs.ca) as c:
            assert c.get_database(f"hive_{TLS_DB}").description == "on secure"
        with pytest.raises((TTransportException, OSError)), hive2_client(proc.port, timeout=10) as c:
            c.get_all_databases()
    finally:
        proc.stop()


def test_hive_use_ssl_key_without_a_certificate_is_an_error(primary: Any, tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support.env import ROOT

    server = tmp_path / "server.yml"
    server.write_text("port: 0\nconfiguration-properties:\n  hive.metastore.use.SSL: true\n")
    fed = tmp_path / "federation.yml"
    fed.write_text(federation_yaml(primary.uri))
    done = subprocess.run([sys.executable, "-m", "waggle", "check", "--server-config", str(server),
                           "--federation-config", str(fed)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode != 0
    assert "tls.certificate-file" in done.stderr and "tls.key-file" in done.stderr, done.stderr


def test_front_door_closes_a_tls_client_it_gives_up_on(tls_waggle: WaggleProcess, certs: Certs) -> None:
    """A client that sends no Thrift is closed at once, over TLS as over plain TCP (not left hanging)."""
    context = ssl.create_default_context(cafile=str(certs.ca))
    with context.wrap_socket(socket.create_connection(("127.0.0.1", tls_waggle.port), timeout=10),
                             server_hostname="localhost") as conn:
        conn.sendall(b"\xff\xff\xff\xff not a Thrift message" * 4)
        started = time.monotonic()
        assert conn.recv(4096) == b""
        assert time.monotonic() - started < 5
