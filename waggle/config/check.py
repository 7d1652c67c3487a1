"""The checks of a loaded configuration that read only the files it names, shared by ``waggle check`` and by a
running server's reload.

Loading (:func:`waggle.config.loader.load`) checks every key. On top of that, the TLS files (``tls.*``) must be
readable PEM, each key must match its certificate, and no certificate may have expired (:func:`tls_findings`;
one expiring within :data:`EXPIRY_WARNING_DAYS` days is a warning), and the admin token file must hold a token
(:func:`admin_token`). The checks that need other rooms (SSH tunnel keys, keytabs) are gathered with these by
:mod:`waggle.checks`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from waggle.config.loader import ConfigError
from waggle.config.model import WaggleConfig

if TYPE_CHECKING:
    from cryptography.x509 import Certificate

#: a certificate that expires sooner than this is a warning of ``waggle check``
EXPIRY_WARNING_DAYS = 30


def admin_token(config: WaggleConfig) -> str | None:
    """The admin bearer token from ``admin.token-file`` (None: state-changing admin calls are off)."""
    path = config.server.admin_token_file
    if path is None:
        return None
    where = f"{config.server_file or '(server defaults)'}: key 'admin.token-file': invalid value {path!r}"
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as exc:
        raise ConfigError([f"{where}: cannot read it: {exc.strerror or exc}"]) from exc
    if len(token) < 16:
        raise ConfigError([f"{where}: the token must be at least 16 characters long"])
    return token


#: the shortest REST client secret accepted: a guessable secret opens the catalog
MIN_SECRET_CHARS = 16


def rest_secrets(config: WaggleConfig) -> dict[str, bytes]:
    """Each Iceberg REST client's secret (client id -> secret), read from its ``secret-file``."""
    secrets: dict[str, bytes] = {}
    problems: list[str] = []
    for i, client in enumerate(config.server.iceberg_rest.clients):
        where = (f"{config.server_file or '(server defaults)'}: key 'iceberg-rest.clients[{i}].secret-file': "
                 f"invalid value {client.secret_file!r}")
        try:
            with open(client.secret_file, "rb") as f:
                secret = f.read().strip()
        except OSError as exc:
            problems.append(f"{where}: cannot read it: {exc.strerror or exc}")
            continue
        if len(secret) < MIN_SECRET_CHARS:
            problems.append(f"{where}: the secret in it is shorter than {MIN_SECRET_CHARS} characters")
        secrets[client.id] = secret
    if problems:
        raise ConfigError(problems)
    return secrets


class _TlsFiles:
    """Checks the PEM files of one TLS setting; ``where(key, path)`` starts each finding."""

    def __init__(self, where: Callable[[str, str], str], now: datetime.datetime) -> None:
        self.where = where
        self.now = now
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def _read(self, key: str, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as exc:
            self.problems.append(f"{self.where(key, path)}: cannot read it: {exc.strerror or exc}")
            return None

    def certificates(self, key: str, path: str) -> list[Certificate]:
        """The certificates of a PEM file (a chain or a CA bundle), checked for expiry."""
        from cryptography import x509

        data = self._read(key, path)
        if data is None:
            return []
        try:
            certs = x509.load_pem_x509_certificates(data)
        except ValueError as exc:
            self.problems.append(f"{self.where(key, path)}: not a PEM certificate file ({exc})")
            return []
        for cert in certs:
            subject = cert.subject.rfc4514_string() or "(no subject)"
            expires = cert.not_valid_after_utc
            if expires <= self.now:
                self.problems.append(f"{self.where(key, path)}: the certificate {subject} expired on "
                                     f"{expires:%Y-%m-%d %H:%M} UTC")
            elif expires - self.now < datetime.timedelta(days=EXPIRY_WARNING_DAYS):
                self.warnings.append(f"{self.where(key, path)}: the certificate {subject} expires on "
                                     f"{expires:%Y-%m-%d %H:%M} UTC, in {(expires - self.now).days} day(s)")
            elif cert.not_valid_before_utc > self.now:
                self.problems.append(f"{self.where(key, path)}: the certificate {subject} is not valid before "
                                     f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC")
        return certs

    def pair(self, cert_key: str, cert_path: str, key_key: str, key_path: str) -> None:
        """A certificate chain and its private key: both readable PEM, and the key the certificate's."""
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization

        certs = self.certificates(cert_key, cert_path)
        data = self._read(key_key, key_path)
        if data is None:
            return
        try:
            key: Any = serialization.load_pem_private_key(data, password=None)
        except TypeError:
            self.problems.append(f"{self.where(key_key, key_path)}: the key is encrypted; waggle needs it "
                                 "unencrypted (openssl pkey -in KEY -out PLAIN)")
            return
        except (ValueError, UnsupportedAlgorithm) as exc:
            self.problems.append(f"{self.where(key_key, key_path)}: not a PEM private key ({exc})")
            return
        if certs:
            spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
            if certs[0].public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
                self.problems.append(f"{self.where(key_key, key_path)}: the key does not match the certificate "
                                     f"in {cert_key} '{cert_path}' (the first one in that file must be its own)")


def tls_findings(config: WaggleConfig, now: datetime.datetime | None = None) -> tuple[list[str], list[str]]:
    """The TLS files of the server (its Thrift and Iceberg REST ports) and of every metastore: (problems,
    warnings)."""
    files = []
    now = now or datetime.datetime.now(datetime.UTC)
    tls = config.server.security.tls
    if tls is not None:
        server_file = config.server_file or "(server defaults)"
        check = _TlsFiles(lambda key, path: f"{server_file}: key '{key}': invalid value {path!r}", now)
        check.pair("tls.certificate-file", tls.certificate_file, "tls.key-file", tls.key_file)
        if tls.client_ca_file:
            check.certificates("tls.client-ca-file", tls.client_ca_file)
        files.append(check)
    rest = config.server.iceberg_rest.tls
    if rest is not None:
        server_file = config.server_file or "(server defaults)"
        check = _TlsFiles(lambda key, path: f"{server_file}: key '{key}': invalid value {path!r}", now)
        check.pair("iceberg-rest.tls.certificate-file", rest.certificate_file, "iceberg-rest.tls.key-file",
                   rest.key_file)
        files.append(check)
    for i, member in enumerate(config.federation.members):
        client = member.security.tls
        if client is None:
            continue
        section = "primary-meta-store" if i == 0 else f"federated-meta-stores[{i - 1}]"

        def where(key: str, path: str, section: str = section) -> str:
            return f"{config.federation_file}: key '{section}.{key}': invalid value {path!r}"

        check = _TlsFiles(where, now)
        if client.ca_file:
            check.certificates("tls.ca-file", client.ca_file)
        if client.certificate_file and client.key_file:
            check.pair("tls.certificate-file", client.certificate_file, "tls.key-file", client.key_file)
        files.append(check)
    return [p for c in files for p in c.problems], [w for c in files for w in c.warnings]
