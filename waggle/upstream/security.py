"""How waggle proves itself to a metastore: TLS, Kerberos as waggle, or Kerberos acting for the caller.

* **TLS**: the metastore's certificate is checked against ``tls.ca-file`` (or the system's CAs) and against
  the host of its URI. Through an SSH tunnel this is still the metastore's host, never the tunnel's end.
* **Kerberos** (``hive.metastore.sasl.enabled``): GSSAPI as waggle's principal, to the metastore's principal
  with ``_HOST`` expanded to the same host.
* **Impersonation** (``impersonation-enabled``): for a client's identity, waggle asks the metastore for that
  user's delegation token, as a proxy user. It keeps the token in :class:`DelegationTokens`, which is
  bounded and renews what it keeps. It then connects with DIGEST-MD5, so the metastore sees the caller.

It also holds :class:`MetastoreTokenStore`, the primary's token store, where waggle's own tokens keep their
renewals and cancellations (see :mod:`waggle.security.token_service`).
"""

from __future__ import annotations

import base64
import functools
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from waggle.common.logging import get_logger
from waggle.config.model import MetastoreConfig, TlsClient
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.security.digest import DigestClient, DigestError
from waggle.security.gss import GssapiClient, KerberosLogin
from waggle.security.principals import expand_host
from waggle.security.sasl import SaslError, SaslSocket, initiate
from waggle.security.tokens import TokenError, decode_token

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.upstream")
#: seconds a kept impersonation token is used before waggle renews it
TOKEN_REFRESH_SECONDS = 3600.0
#: impersonation tokens kept per metastore (the least recently used is dropped)
MAX_TOKENS = 1000


class SecurityFailed(Exception):
    """The metastore refused waggle's TLS or SASL handshake; ``str()`` says why (never a key or token)."""


class UpstreamCredentials:
    """waggle's own Kerberos identity towards metastores (None without a principal and keytab)."""

    def __init__(self, login: KerberosLogin | None) -> None:
        self.login = login


@functools.lru_cache(maxsize=64)
def client_context(tls: TlsClient) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=tls.ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = tls.check_hostname
    if not tls.check_hostname:
        context.verify_mode = ssl.CERT_REQUIRED  # the chain is still checked
    if tls.certificate_file and tls.key_file:
        context.load_cert_chain(tls.certificate_file, tls.key_file)
    return context


def _tls_files(tls: TlsClient) -> str:
    named = [("tls.ca-file", tls.ca_file), ("tls.certificate-file", tls.certificate_file),
             ("tls.key-file", tls.key_file)]
    return ", ".join(f"{key} '{path}'" for key, path in named if path) or "the system's CAs"


#: OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH
_NAME_MISMATCH = (62, 64)


def tls_failure(exc: ssl.SSLError) -> str:
    """Why a TLS handshake failed, with the certificate check's own words when the certificate was refused."""
    reason = getattr(exc, "reason", None) or str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        hint = "tls.check-hostname" if exc.verify_code in _NAME_MISMATCH else "tls.ca-file"
        return f"{reason}: the metastore's certificate was refused: {exc.verify_message} (see {hint})"
    return str(reason)


class _DigestClientMechanism:
    """DIGEST-MD5 with a Hive delegation token, as a SASL client mechanism."""

    name = "DIGEST-MD5"
    wraps = False

    def __init__(self, token: str) -> None:
        try:
            decoded = decode_token(token)
        except TokenError as exc:
            raise SaslError(f"the metastore's delegation token is unusable: {exc}") from None
        self._client = DigestClient(base64.b64encode(decoded.identifier).decode("ascii"),
                                    base64.b64encode(decoded.password))
        self._stage = 0
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def initial(self) -> bytes:
        return b""

    def step(self, data: bytes) -> bytes:
        try:
            if self._stage == 0:
                self._stage = 1
                return self._client.respond(data)
            self._client.verify(data)
        except DigestError as exc:
            raise SaslError(f"DIGEST-MD5 login failed: {exc}") from None
        self._complete = True
        return b""

    def wrap(self, data: bytes) -> bytes:  # pragma: no cover - auth only
        return data

    def unwrap(self, data: bytes) -> bytes:  # pragma: no cover
        return data


def secure(sock: Any, config: MetastoreConfig, host: str, credentials: UpstreamCredentials | None,
           token: str | None, max_frame: int) -> Any:
    """``sock`` with the metastore's TLS and SASL done; :class:`SecurityFailed` if either fails."""
    security = config.security
    conn = sock
    if security.tls is not None:
        try:
            context = client_context(security.tls)
        except OSError as exc:  # ssl.SSLError included
            raise SecurityFailed(f"cannot use its TLS files ({_tls_files(security.tls)}): "
                                 f"{getattr(exc, 'reason', None) or exc.strerror or exc}") from None
        try:
            conn = context.wrap_socket(sock, server_hostname=host)
        except ssl.SSLError as exc:
            raise SecurityFailed(f"TLS handshake with {host} failed: {tls_failure(exc)}") from None
    if not security.kerberos:
        return conn
    assert security.principal is not None
    try:
        if token is not None:
            mech: Any = _DigestClientMechanism(token)
        else:
            login = credentials.login if credentials is not None else None
            if login is None:
                raise SaslError("waggle has no Kerberos principal and keytab of its own")
            mech = GssapiClient(login.initiator(), expand_host(security.principal, host), security.qops)
        initiate(conn, mech)
    except SaslError as exc:
        raise SecurityFailed(f"refused waggle's SASL login ({'DIGEST-MD5' if token else 'GSSAPI'}): {exc}") \
            from None
    return SaslSocket(conn, mech, max_frame)


class DelegationTokens:
    """Callers' delegation tokens from one metastore: at most :data:`MAX_TOKENS`, renewed after an hour."""

    def __init__(self, member: str, max_tokens: int = MAX_TOKENS, refresh_seconds: float = TOKEN_REFRESH_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.member = member
        self._tokens: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._max = max_tokens
        self._refresh = refresh_seconds
        self._clock = clock

    def __len__(self) -> int:
        return len(self._tokens)

    def get(self, user: str, fetch: Callable[[str], str], renew: Callable[[str], object]) -> str:
        """``user``'s token: kept, renewed when it is older than the refresh interval, or fetched."""
        now = self._clock()
        kept = self._tokens.get(user)
        if kept is not None:
            token, since = kept
            if now - since < self._refresh:
                self._tokens.move_to_end(user)
                return token
            try:
                renew(token)
                self._keep(user, token, now)
                return token
            except Exception as exc:  # a token that cannot be renewed is replaced
                log.info("impersonation.renew_failed", metastore=self.member, user=user, error=str(exc))
        token = fetch(user)
        self._keep(user, token, now)
        return token

    def drop(self, user: str) -> None:
        self._tokens.pop(user, None)

    def _keep(self, user: str, token: str, now: float) -> None:
        self._tokens[user] = (token, now)
        self._tokens.move_to_end(user)
        while len(self._tokens) > self._max:
            self._tokens.popitem(last=False)


class MetastoreTokenStore:
    """The primary metastore's token store (``add_token``/``get_token``/``remove_token``), a key-value store
    that waggle keeps its own records in: its delegation tokens' renewals, and Hive 4 data connectors."""

    def __init__(self, primary: Callable[[], UpstreamPool]) -> None:
        self._primary = primary

    def put(self, key: str, value: str) -> None:
        """Add or replace the record (the metastore's ``add_token`` never overwrites: a renewal removes first)."""
        pool = self._primary()
        added = pool.invoke(None, "add_token", T.add_token_args(token_identifier=key, delegation_token=value),
                            T.add_token_result)
        if not added.success:
            pool.invoke(None, "remove_token", T.remove_token_args(token_identifier=key), T.remove_token_result)
            pool.invoke(None, "add_token", T.add_token_args(token_identifier=key, delegation_token=value),
                        T.add_token_result)

    def get(self, key: str) -> str | None:
        result = self._primary().exchange(None, "get_token", T.get_token_args(token_identifier=key),
                                          T.get_token_result)
        value = getattr(result, "success", None)
        return value if isinstance(value, str) and value else None

    def remove(self, key: str) -> bool:
        result = self._primary().invoke(None, "remove_token", T.remove_token_args(token_identifier=key),
                                        T.remove_token_result)
        return bool(result.success)

    def identifiers(self, prefix: str) -> list[str]:
        """The keys of the store that start with ``prefix``."""
        result = self._primary().invoke(None, "get_all_token_identifiers", T.get_all_token_identifiers_args(),
                                        T.get_all_token_identifiers_result)
        return [str(k) for k in result.success or () if str(k).startswith(prefix)]
