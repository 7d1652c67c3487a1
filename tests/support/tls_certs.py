"""Test certificates: a self-signed CA, certificates it signs, and a second, unrelated CA.

:func:`make_certs` writes PEM files (unencrypted keys) into a directory, plus a PKCS#12 keystore of the
server's key and certificate for a Java server (made with ``openssl pkcs12 -export``: Java 17's default
keystore type is PKCS12, and its JKS loader reads PKCS12 files too).
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEYSTORE_PASSWORD = "waggle-test"


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA that signs everything below
    other_ca: Path  # an unrelated CA: trusting it, nothing below verifies
    server: Pair  # localhost, 127.0.0.1 and ::1
    client: Pair  # a client certificate (CN=alice)
    elsewhere: Pair  # a server certificate for metastore.elsewhere.test only
    keystore: Path  # PKCS#12 of ``server`` (password :data:`KEYSTORE_PASSWORD`)
    password: str = KEYSTORE_PASSWORD


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "waggle tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return path


def _write_cert(cert: x509.Certificate, path: Path) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def make_ca(directory: Path, name: str) -> tuple[Path, Path, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return (_write_cert(cert, directory / f"{name}.pem"), _write_key(key, directory / f"{name}-key.pem"), cert,
            key)


def issue(directory: Path, stem: str, ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey,
          cn: str, dns: tuple[str, ...] = (), ips: tuple[str, ...] = (), client: bool = False,
          not_before: datetime.datetime | None = None, not_after: datetime.datetime | None = None,
          key: ec.EllipticCurvePrivateKey | None = None) -> Pair:
    """A certificate signed by the CA (for a server unless ``client``), written as ``<stem>.pem``/``-key.pem``."""
    key = key or _key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_before or now - datetime.timedelta(days=1))
               .not_valid_after(not_after or now + datetime.timedelta(days=365))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                                     else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False))
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return Pair(_write_cert(cert, directory / f"{stem}.pem"), _write_key(key, directory / f"{stem}-key.pem"))


def pkcs12(pair: Pair, path: Path, password: str = KEYSTORE_PASSWORD, ca: Path | None = None) -> Path:
    """A PKCS#12 keystore of ``pair`` (and its CA), as a Java server loads it."""
    cmd = ["openssl", "pkcs12", "-export", "-in", str(pair.cert), "-inkey", str(pair.key), "-name", "server",
           "-out", str(path), "-passout", f"pass:{password}"]
    if ca is not None:
        cmd += ["-certfile", str(ca)]
    subprocess.run(cmd, check=True, capture_output=True)
    return path


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca, _, ca_cert, ca_key = make_ca(directory, "ca")
    other_ca, *_ = make_ca(directory, "other-ca")
    server = issue(directory, "server", ca_cert, ca_key, "localhost", dns=("localhost",), ips=("127.0.0.1", "::1"))
    client = issue(directory, "client", ca_cert, ca_key, "alice", client=True)
    elsewhere = issue(directory, "elsewhere", ca_cert, ca_key, "metastore.elsewhere.test",
                      dns=("metastore.elsewhere.test",))
    keystore = pkcs12(server, directory / "server.p12", ca=ca)
    return Certs(ca, other_ca, server, client, elsewhere, keystore)
