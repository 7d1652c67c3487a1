"""waggle's own security at run time, in one place: its Kerberos login (it accepts clients with it and connects
to Kerberized metastores as it), the credentials upstream connections use, its delegation tokens (behind a
Kerberos front door), the front door itself (TLS and SASL on client connections), and the watch on ticket
renewal and certificate expiry (for /healthz and /metrics)."""

from __future__ import annotations

from waggle.config.model import WaggleConfig
from waggle.security import token_service
from waggle.security.frontdoor import FrontDoor
from waggle.security.gss import KerberosLogin
from waggle.security.status import SecurityWatch
from waggle.security.token_service import TokenService
from waggle.upstream.handshake import UpstreamCredentials
from waggle.upstream.token_store import MetastoreTokenStore


class Guard:
    def __init__(self, config: WaggleConfig, records: MetastoreTokenStore, token_key: bytes | None = None) -> None:
        """``records``: waggle's records in the primary (token renewals); ``token_key``: the random key of
        waggle's delegation tokens when no signing-key file is set (one for all of a supervisor's workers)."""
        security = config.server.security
        kerberos = security.kerberos
        #: waggle's Kerberos identity
        self.login = KerberosLogin(kerberos.principal, kerberos.keytab) if kerberos is not None else None
        self.credentials = UpstreamCredentials(self.login)
        #: waggle's own delegation tokens (a Kerberos front door only)
        self.tokens: TokenService | None = token_service.build(
            kerberos, config.server.configuration_properties, records, token_key) \
            if security.answers_tokens and kerberos else None
        #: TLS and SASL on client connections (None: clients connect in plain Thrift)
        self.front_door = FrontDoor(security, config.server.limits, self.login, self.tokens) \
            if security.tls is not None or security.answers_tokens else None
        #: waggle's ticket renewal and certificate expiry
        self.watch = SecurityWatch(self.login, config)

    def start(self, config: WaggleConfig) -> None:
        if self.login is not None and config.server.security.answers_tokens:
            self.login.acceptor()  # a keytab that cannot accept clients stops waggle here, naming the file
        self.watch.start()

    def reload(self, config: WaggleConfig) -> None:
        self.watch.config = config

    def close(self) -> None:
        self.watch.close()
