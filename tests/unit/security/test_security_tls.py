"""TLS without a metastore: ``waggle check`` on the TLS files, and the front door's and upstream contexts
shaking hands in-process."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.tls_certs import Certs, Pair, issue, make_ca, make_certs
from waggle.cli import main
from waggle.config.check import tls_findings
from waggle.config.loader import load
from waggle.config.model import HostPort, MetastoreConfig, MetastoreSecurity, TlsClient, TlsServer
from waggle.security.frontdoor import server_context
from waggle.upstream.handshake import SecurityFailed, client_context, secure

NOW = datetime.datetime.now(datetime.UTC)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def write_config(tmp_path: Path, server_tls: str = "", member_tls: str = "") -> tuple[Path, Path]:
    server = tmp_path / "server.yml"
    server.write_text(f"port: 9083\n{server_tls}")
    fed = tmp_path / "federation.yml"
    fed.write_text("primary-meta-store:\n  name: primary\n  remote-meta-store-uris: thrift://localhost:9083\n"
                   "federated-meta-stores:\n- name: secure\n  remote-meta-store-uris: thrift://localhost:9084\n"
                   f"  tls:\n    enabled: true\n{member_tls}")
    return server, fed


def server_tls(cert: Path, key: Path, client_ca: Path | None = None) -> str:
    text = f"tls:\n  certificate-file: {cert}\n  key-file: {key}\n"
    return text + (f"  client-ca-file: {client_ca}\n" if client_ca else "")


def run_check(capsys: pytest.CaptureFixture[str], server: Path, fed: Path) -> tuple[int, str]:
    code = main(["check", "--server-config", str(server), "--federation-config", str(fed)])
    return code, capsys.readouterr().err


# -- waggle check ---------------------------------------------------------------------------------------------
def test_check_passes_good_tls_files(certs: Certs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server, fed = write_config(tmp_path, server_tls(certs.server.cert, certs.server.key, certs.ca),
                               f"    ca-file: {certs.ca}\n    certificate-file: {certs.client.cert}\n"
                               f"    key-file: {certs.client.key}\n")
    code, err = run_check(capsys, server, fed)
    assert code == 0 and err == "", err


def test_check_names_an_unreadable_file(certs: Certs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.pem"
    server, fed = write_config(tmp_path, server_tls(missing, certs.server.key), f"    ca-file: {missing}\n")
    code, err = run_check(capsys, server, fed)
    assert code == 2
    assert f"{server}: key 'tls.certificate-file': invalid value '{missing}': cannot read it: No such file" in err
    assert f"{fed}: key 'federated-meta-stores[0].tls.ca-file': invalid value '{missing}': cannot read it" in err


def test_check_wants_pem(certs: Certs, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    server, fed = write_config(tmp_path, server_tls(certs.server.cert, garbage, client_ca=garbage))
    problems, _ = tls_findings(load(str(server), str(fed)))
    assert any("key 'tls.key-file'" in p and "not a PEM private key" in p for p in problems), problems
    assert any("key 'tls.client-ca-file'" in p and "not a PEM certificate file" in p for p in problems), problems


def test_check_key_must_match_the_certificate(certs: Certs, tmp_path: Path) -> None:
    server, fed = write_config(tmp_path, server_tls(certs.server.cert, certs.client.key),
                               f"    certificate-file: {certs.client.cert}\n    key-file: {certs.server.key}\n")
    problems, _ = tls_findings(load(str(server), str(fed)))
    assert len(problems) == 2, problems
    assert f"key 'tls.key-file': invalid value '{certs.client.key}': the key does not match the certificate in " \
           f"tls.certificate-file '{certs.server.cert}'" in problems[0]
    assert "key 'federated-meta-stores[0].tls.key-file'" in problems[1]


def test_check_refuses_an_encrypted_key(certs: Certs, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(certs.server.key.read_bytes(), password=None)
    encrypted = tmp_path / "encrypted-key.pem"
    encrypted.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.BestAvailableEncryption(b"secret")))
    server, fed = write_config(tmp_path, server_tls(certs.server.cert, encrypted))
    problems, _ = tls_findings(load(str(server), str(fed)))
    assert len(problems) == 1 and "the key is encrypted" in problems[0], problems


def _ca(tmp_path: Path) -> tuple[Any, Any]:
    _, _, cert, key = make_ca(tmp_path, "dated-ca")
    return cert, key


def test_check_expired_is_an_error_and_soon_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ca_cert, ca_key = _ca(tmp_path)
    day = datetime.timedelta(days=1)
    expired = issue(tmp_path, "expired", ca_cert, ca_key, "old", dns=("localhost",),
                    not_before=NOW - 400 * day, not_after=NOW - day)
    soon = issue(tmp_path, "soon", ca_cert, ca_key, "soon", dns=("localhost",), not_after=NOW + 10 * day)
    server, fed = write_config(tmp_path, server_tls(soon.cert, soon.key), f"    ca-file: {expired.cert}\n")
    code, err = run_check(capsys, server, fed)
    assert code == 2
    assert (f"error: {fed}: key 'federated-meta-stores[0].tls.ca-file': invalid value '{expired.cert}': "
            "the certificate CN=old,O=waggle tests expired on") in err
    assert (f"warning: {server}: key 'tls.certificate-file': invalid value '{soon.cert}': "
            "the certificate CN=soon,O=waggle tests expires on") in err
    assert "in 9 day(s)" in err or "in 10 day(s)" in err
    # the warning alone does not fail the check
    server, fed = write_config(tmp_path, server_tls(soon.cert, soon.key))
    code, err = run_check(capsys, server, fed)
    assert code == 0 and "warning:" in err and "error:" not in err


# -- the contexts --------------------------------------------------------------------------------------------
def handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> str:
    """Shake hands over a socket pair: '' when both sides agree, else the client's error."""
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)
    server_error: list[BaseException] = []

    def serve() -> None:
        try:
            with server.wrap_socket(a, server_side=True) as s:
                s.recv(1)
        except (OSError, ssl.SSLError) as exc:
            server_error.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(b, server_hostname=host) as c:
            c.sendall(b"x")
            c.recv(1)  # TLS 1.3: a refused client certificate shows here
        return ""
    except (OSError, ssl.SSLError) as exc:
        return str(exc)
    finally:
        a.close()
        b.close()
        thread.join(10)


def test_front_door_and_upstream_contexts_agree(certs: Certs) -> None:
    server = server_context(TlsServer(str(certs.server.cert), str(certs.server.key)))
    assert handshake(server, client_context(TlsClient(str(certs.ca))), "localhost") == ""
    assert handshake(server, client_context(TlsClient(str(certs.ca))), "127.0.0.1") == ""
    assert "CERTIFICATE_VERIFY_FAILED" in handshake(server, client_context(TlsClient(str(certs.other_ca))),
                                                    "localhost")
    assert "Hostname mismatch" in handshake(server, client_context(TlsClient(str(certs.ca))), "elsewhere.test")
    assert handshake(server, client_context(TlsClient(str(certs.ca), check_hostname=False)), "elsewhere.test") == ""
    assert "CERTIFICATE_VERIFY_FAILED" in handshake(
        server, client_context(TlsClient(str(certs.other_ca), check_hostname=False)), "localhost")


def test_mutual_tls_contexts(certs: Certs) -> None:
    server = server_context(TlsServer(str(certs.server.cert), str(certs.server.key), str(certs.ca)))
    assert handshake(server, client_context(TlsClient(str(certs.ca))), "localhost") != ""
    with_cert = TlsClient(str(certs.ca), str(certs.client.cert), str(certs.client.key))
    assert handshake(server, client_context(with_cert), "localhost") == ""


def test_server_context_names_its_files(certs: Certs, tmp_path: Path) -> None:
    with pytest.raises(OSError, match=r"cannot use tls\.certificate-file '.*nope\.pem' with tls\.key-file"):
        server_context(TlsServer(str(tmp_path / "nope.pem"), str(certs.server.key)))
    with pytest.raises(OSError, match="KEY_VALUES_MISMATCH"):
        server_context(TlsServer(str(certs.server.cert), str(certs.client.key)))
    with pytest.raises(OSError, match=r"cannot use tls\.client-ca-file"):
        server_context(TlsServer(str(certs.server.cert), str(certs.server.key), str(tmp_path / "nope.pem")))


def _member(tls: TlsClient) -> MetastoreConfig:
    return MetastoreConfig(name="secure", uris=(HostPort("localhost", 9083),), primary=False, database_prefix="",
                           security=MetastoreSecurity(tls=tls))


def test_upstream_failures_say_what_to_look_at(certs: Certs, tmp_path: Path) -> None:
    server = server_context(TlsServer(str(certs.server.cert), str(certs.server.key)))

    def refusal(tls: TlsClient, host: str) -> str:
        a, b = socket.socketpair()
        a.settimeout(10)
        b.settimeout(10)
        thread = threading.Thread(target=lambda: handshake_server(server, a))
        thread.start()
        try:
            with pytest.raises(SecurityFailed) as info:
                secure(b, _member(tls), host, None, None, 1 << 20)
            return str(info.value)
        finally:
            a.close()
            b.close()
            thread.join(10)

    wrong_ca = refusal(TlsClient(str(certs.other_ca)), "localhost")
    assert wrong_ca.startswith("TLS handshake with localhost failed: CERTIFICATE_VERIFY_FAILED: the metastore's "
                               "certificate was refused:") and "(see tls.ca-file)" in wrong_ca, wrong_ca
    wrong_name = refusal(TlsClient(str(certs.ca)), "127.0.0.2")
    assert "IP address mismatch" in wrong_name and "(see tls.check-hostname)" in wrong_name, wrong_name
    a, b = socket.socketpair()
    with a, b, pytest.raises(SecurityFailed, match=r"cannot use its TLS files \(tls\.ca-file '.*nope\.pem'\)"):
        secure(b, _member(TlsClient(str(tmp_path / "nope.pem"))), "localhost", None, None, 1 << 20)


def handshake_server(server: ssl.SSLContext, sock: socket.socket) -> None:
    try:
        with server.wrap_socket(sock, server_side=True) as s:
            s.recv(1)
    except (OSError, ssl.SSLError):
        pass


def test_helper_certificates_are_what_they_say(certs: Certs) -> None:
    from cryptography import x509

    server = x509.load_pem_x509_certificate(certs.server.cert.read_bytes())
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "::1"]
    assert certs.keystore.stat().st_size > 0 and isinstance(certs.client, Pair)
