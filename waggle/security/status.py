"""What operators need to see about security: waggle's Kerberos ticket, and when its certificates expire.

:class:`SecurityWatch` runs in the background. It logs in again from the keytab before the ticket expires, and
it reads the expiry date of every certificate file the configuration names. Both show in ``/healthz`` (see
:meth:`SecurityWatch.view`) and in ``/metrics``. The log says when a login fails and when a certificate comes
within :data:`EXPIRY_WARNING_DAYS` of expiring. Only file names and dates are ever logged or shown.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import gevent

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.model import WaggleConfig
from waggle.security.gss import KerberosLogin
from waggle.security.sasl import SaslError

log = get_logger("waggle.security")
#: how often the ticket and the certificates are looked at (seconds)
CHECK_SECONDS = 60.0
#: a certificate this close to expiry is logged as a warning (and flagged in /healthz)
EXPIRY_WARNING_DAYS = 30


def certificate_files(config: WaggleConfig) -> dict[str, str]:
    """Every certificate file of the configuration, by the key that names it."""
    out: dict[str, str] = {}
    tls = config.server.security.tls
    if tls is not None:
        out["tls.certificate-file"] = tls.certificate_file
        if tls.client_ca_file:
            out["tls.client-ca-file"] = tls.client_ca_file
    for member in config.federation.members:
        client = member.security.tls
        if client is None:
            continue
        if client.ca_file:
            out[f"{member.name}.tls.ca-file"] = client.ca_file
        if client.certificate_file:
            out[f"{member.name}.tls.certificate-file"] = client.certificate_file
    return out


def certificate_expiry(path: str) -> float:
    """When the first certificate of a PEM file to expire does so (epoch seconds). Raises ``ValueError`` if the
    file holds no certificate, ``OSError`` if it cannot be read."""
    from cryptography import x509

    with open(path, "rb") as f:
        data = f.read()
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise ValueError(f"{path} holds no PEM certificate: {exc}") from None
    return min(c.not_valid_after_utc.timestamp() for c in certs)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


class SecurityWatch:
    def __init__(self, login: KerberosLogin | None, config: WaggleConfig) -> None:
        self.login = login
        self.config = config
        self.certificates: dict[str, dict[str, Any]] = {}
        self._warned: set[str] = set()
        self._task: gevent.Greenlet | None = None

    def check(self) -> None:
        """Renew the ticket if it is due, and read every certificate's expiry."""
        login = self.login
        if login is not None:
            try:
                login.initiator()
                metrics.KERBEROS_LOGIN_OK.set(1)
            except SaslError as exc:
                metrics.KERBEROS_LOGIN_OK.set(0)
                log.error("kerberos.login_failed", principal=login.principal, error=str(exc))
            metrics.KERBEROS_TICKET_EXPIRY.set(login.status.expires_at)
        now = time.time()
        seen: dict[str, dict[str, Any]] = {}
        for key, path in certificate_files(self.config).items():
            try:
                expires = certificate_expiry(path)
            except (OSError, ValueError) as exc:
                seen[key] = {"file": path, "error": str(exc)}
                continue
            days = (expires - now) / 86400
            seen[key] = {"file": path, "expires": _iso(expires), "days_left": round(days, 1)}
            metrics.CERTIFICATE_EXPIRY.labels(path).set(expires)
            if days < EXPIRY_WARNING_DAYS and path not in self._warned:
                self._warned.add(path)
                log.warning("tls.certificate_expiring" if days > 0 else "tls.certificate_expired", key=key,
                            file=path, expires=_iso(expires), days_left=round(days, 1))
        self.certificates = seen

    def view(self) -> dict[str, Any]:
        """The ``security`` part of ``/healthz``."""
        out: dict[str, Any] = {}
        if self.login is not None:
            status = self.login.status
            out["kerberos"] = {
                "principal": status.principal,
                "ticket_expires": _iso(status.expires_at) if status.expires_at else None,
                "last_login": _iso(status.last_login) if status.last_login else None,
                "ok": status.error is None and status.expires_at > time.time(),
                "error": status.error,
            }
        if self.certificates:
            out["certificates"] = self.certificates
        return out

    def start(self) -> None:
        self.check()
        self._task = gevent.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            gevent.sleep(CHECK_SECONDS)
            try:
                self.check()
            except Exception as exc:  # never let the loop die
                log.error("security.check_failed", error=repr(exc))

    def close(self) -> None:
        if self._task is not None:
            self._task.kill(block=False)
