"""``iceberg-rest.*`` of the server file: the Iceberg REST port, its TLS and its OAuth2 clients, read into
:class:`~waggle.config.model.IcebergRest`. Every problem names the file, the key (``iceberg-rest.clients[0].id``)
and the value. A client's secret file is read by :func:`waggle.config.check.rest_secrets`, as the admin token's
is: by ``waggle check``, at start and at each reload."""

from __future__ import annotations

from collections.abc import Callable

from waggle.config.model import IcebergRest, RestClientConfig, TlsServer
from waggle.config.reader import Reader
from waggle.config.settings import RestClient
from waggle.config.settings import Server as S


def parse_iceberg_rest(r: Reader, unknown: Callable[[Reader], None], warnings: list[str],
                       kerberos: bool) -> IcebergRest:
    """The REST port's settings in ``r``'s mapping; problems go to ``r.problems``, and what a reader should know
    (an open port; tokens that only the issuing process can check) to ``warnings``. ``kerberos``: whether the
    Thrift port asks for Kerberos (then every REST request needs a token too)."""
    tls = None
    cert, key = r.get(S.REST_TLS_CERTIFICATE), r.get(S.REST_TLS_KEY)
    if cert or key:
        if not cert:
            r.require(S.REST_TLS_CERTIFICATE.key, " with iceberg-rest.tls.key-file")
        elif not key:
            r.require(S.REST_TLS_KEY.key, " with iceberg-rest.tls.certificate-file")
        else:
            tls = TlsServer(cert, key, None)
    rest = r.build(IcebergRest, tls=tls, clients=_clients(r, unknown),
                   signing_key_file=r.get(S.TOKEN_SIGNING_KEY_FILE))
    if rest.port is not None:
        where = f"{r.file}: key '{r.path(S.REST_PORT.key)}'"
        if not rest.clients and not kerberos:
            warnings.append(f"{where}: the Iceberg REST port is open to anyone who reaches it, as the Thrift port "
                            f"is (no {S.REST_CLIENTS.key} and no Kerberos)")
        if rest.clients and not rest.signing_key_file:
            warnings.append(f"{where}: without {S.TOKEN_SIGNING_KEY_FILE.key}, a REST token is good only on the "
                            "waggle that issued it, until it restarts (give every replica the same key file)")
    return rest


def _clients(r: Reader, unknown: Callable[[Reader], None]) -> tuple[RestClientConfig, ...]:
    out: list[RestClientConfig] = []
    seen: set[str] = set()
    for er in r.entries(S.REST_CLIENTS.key, "a client: a map with id, secret-file and optionally user",
                        "clients ({id, secret-file, user})"):
        unknown(er)
        client = _client(er, seen)
        if client is not None:
            out.append(client)
    return tuple(out)


def _client(er: Reader, seen: set[str]) -> RestClientConfig | None:
    before = len(er.problems)
    for required in (RestClient.ID, RestClient.SECRET_FILE):
        if not er.given(required.key):
            er.require(required.key)
    ident = er.get(RestClient.ID)
    if ident and ident in seen:
        er.fail(RestClient.ID.key, ident, "another client has this id")
    seen.add(ident)
    path = er.get(RestClient.SECRET_FILE) or ""
    user = er.get(RestClient.USER) or ident
    if len(er.problems) != before:
        return None
    return RestClientConfig(id=ident, user=user, secret_file=path)
