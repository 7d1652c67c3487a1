"""The Iceberg REST port of one serving process: gevent's WSGI server, TLS when configured, and the app.

With several workers each worker serves the port beside the others (``SO_REUSEPORT``, as the Thrift port), so the
kernel spreads requests; tokens signed with the shared keys are good on any of them. The port's number, address
and TLS are read at start (a change needs a restart, as the Thrift port's); its clients, token lifetime and purge
policy follow reloads.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gevent.pywsgi import WSGIServer

from waggle.common.listeners import listener
from waggle.common.logging import get_logger
from waggle.config.check import rest_secrets
from waggle.config.loader import ConfigError
from waggle.config.timing import ENDPOINT_STOP_SECONDS
from waggle.rest.app import RestApp
from waggle.rest.tokens import Tokens
from waggle.security.tokens import TokenError, secrets_from_file

if TYPE_CHECKING:
    from waggle.config.model import WaggleConfig
    from waggle.server.context import ServerContext

log = get_logger("waggle.rest")

#: added to the slowest member's read timeout: how long the door waits for one call through waggle
CALL_MARGIN_SECONDS = 10.0


def needs_token(config: WaggleConfig) -> bool:
    """Every request needs a token once REST clients or Kerberos are configured; else the port is open, as the
    Thrift port is."""
    server = config.server
    return bool(server.iceberg_rest.clients) or server.security.kerberos is not None


class RestDoor:
    """The port, started and stopped with the process's Thrift port."""

    def __init__(self, context: ServerContext, token_key: bytes | None = None, shared: bool = False) -> None:
        """``token_key``: the supervisor's random signing key when no key file is set (one for all workers);
        ``shared``: whether other processes serve the port too (workers)."""
        self.context = context
        config = context.config
        rest = config.server.iceberg_rest
        assert rest.port is not None
        self._random_key = token_key or os.urandom(32)
        #: the settings the token authority was built from (held, so their identity stays theirs) and it
        self._tokens_for: tuple[object, str | None, Tokens | None] | None = None
        self.app = RestApp(context, self._tokens, lambda: needs_token(self.context.config), self._call_timeout)
        address = (config.server.bind_address, rest.port)
        tls = {} if rest.tls is None else {"certfile": rest.tls.certificate_file, "keyfile": rest.tls.key_file}
        self._server = WSGIServer(listener(*address, shared=shared, nodelay=True), self.app, log=None,
                                  error_log=None, **tls)
        self.tls = rest.tls is not None

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def start(self) -> None:
        self._server.start()
        config = self.context.config
        if not needs_token(config):
            log.warning("rest.open", port=self.port,
                        detail="the Iceberg REST port is open to anyone who reaches it, as the Thrift port is: no "
                               "Kerberos and no iceberg-rest.clients are configured")
        log.info("rest.listening", port=self.port, tls=self.tls, clients=len(config.server.iceberg_rest.clients))

    def stop(self) -> None:
        self._server.stop(timeout=ENDPOINT_STOP_SECONDS)

    def _call_timeout(self) -> float:
        members = self.context.config.federation.members
        return max(m.read_timeout_ms for m in members) / 1000.0 + CALL_MARGIN_SECONDS

    def _tokens(self) -> Tokens | None:
        """The token authority of the configuration served now (rebuilt when a reload changes it)."""
        server = self.context.config.server
        rest = server.iceberg_rest
        key_file = server.security.kerberos.token_key_file if server.security.kerberos is not None else None
        key_file = key_file or rest.signing_key_file
        cached = self._tokens_for  # a reload makes new settings: the secret files are read again
        if cached is not None and cached[0] is rest and cached[1] == key_file:
            return cached[2]
        tokens = None
        if rest.clients:
            try:  # read at start and checked by every reload before it applies; this read is the door's own
                secrets = rest_secrets(self.context.config)
                keys = secrets_from_file(key_file) if key_file else {1: self._random_key}
            except (ConfigError, TokenError) as exc:
                log.error("rest.secrets_unreadable", problem=str(exc))
                return cached[2] if cached is not None else None
            tokens = Tokens(keys, rest.clients, rest.token_lifetime_seconds, secrets)
        self._tokens_for = (rest, key_file, tokens)
        return tokens
