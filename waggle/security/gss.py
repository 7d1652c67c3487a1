"""Kerberos: waggle's login from its keytab, and the SASL GSSAPI mechanism on both sides (RFC 4752).

:class:`KerberosLogin` holds waggle's credentials. It accepts clients with the service keys in the keytab, and
initiates to Kerberized metastores with a ticket it gets from the same keytab. No ``kinit`` is needed, and
the ticket is renewed before it expires. Talking to the KDC blocks, so a login runs on gevent's thread pool
when gevent is running.

:class:`GssapiServer` and :class:`GssapiClient` are the two sides of the mechanism. They exchange context
tokens until the Kerberos context is established. Then come two wrapped messages: the server offers its
protection levels and its largest buffer, and the client picks one and names itself. After that the
connection is protected at the chosen level: ``auth``, ``auth-int`` or ``auth-conf``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import gssapi
from gssapi.raw.misc import GSSError

from waggle.config.hive_values import QOP_BITS
from waggle.security.sasl import SaslError

MAX_BUFFER = 0xFFFFFF
#: renew waggle's ticket when less than this is left (seconds), or when this fraction of it has passed
RENEW_MARGIN_SECONDS = 600
_KRB5 = gssapi.MechType.kerberos
T = TypeVar("T")


def _blocking(fn: Callable[[], T]) -> T:
    """Run ``fn`` (which may wait on the KDC) off the gevent hub when gevent is running."""
    try:
        import gevent.monkey

        if gevent.monkey.is_module_patched("socket"):
            import gevent

            result: T = gevent.get_hub().threadpool.apply(fn)
            return result
    except ImportError:  # pragma: no cover - gevent is a dependency
        pass
    return fn()


def gss_message(exc: BaseException) -> str:
    """A GSSAPI error in one line (its major and minor messages)."""
    if isinstance(exc, GSSError):
        return exc.gen_message().replace("\n", " ").strip()
    return str(exc)


@dataclass
class LoginStatus:
    principal: str
    keytab: str
    #: when the current ticket expires (epoch seconds), 0 before the first login
    expires_at: float = 0.0
    last_login: float = 0.0
    error: str | None = None


class KerberosLogin:
    """waggle's Kerberos identity: a principal and its keytab. Thread-safe; one per configuration."""

    def __init__(self, principal: str, keytab: str) -> None:
        self.principal = principal
        self.keytab = keytab
        self.status = LoginStatus(principal, keytab)
        self._lock = threading.Lock()
        self._name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        self._ccache = f"MEMORY:waggle-{id(self):x}"
        self._initiate: gssapi.Credentials | None = None
        self._accept: gssapi.Credentials | None = None

    def acceptor(self) -> gssapi.Credentials:
        """Credentials that accept clients: the service keys of the keytab (no KDC round trip)."""
        if self._accept is None:
            try:
                self._accept = gssapi.Credentials(name=self._name, usage="accept", mechs=[_KRB5],
                                                  store={"keytab": self.keytab})  # type: ignore[dict-item]
            except GSSError as exc:
                raise SaslError(f"cannot accept Kerberos clients as {self.principal} with keytab {self.keytab}: "
                                f"{gss_message(exc)}") from None
        return self._accept

    def initiator(self) -> gssapi.Credentials:
        """Credentials to connect to Kerberized metastores, logging in again when the ticket is near expiry."""
        creds = self._initiate
        if creds is not None and not self._due(time.time()):
            return creds
        return _blocking(self.login)

    def _due(self, now: float) -> bool:
        left = self.status.expires_at - now
        lived = now - self.status.last_login
        return left < RENEW_MARGIN_SECONDS or (left > 0 and lived > 2 * left)

    def login(self) -> gssapi.Credentials:
        """Get a fresh ticket from the keytab (blocking: it talks to the KDC)."""
        with self._lock:
            now = time.time()
            if self._initiate is not None and not self._due(now):
                return self._initiate
            try:
                store: dict[bytes | str, bytes | str] = {"client_keytab": self.keytab, "ccache": self._ccache}
                creds = gssapi.Credentials(name=self._name, usage="initiate", mechs=[_KRB5], store=store)
                # Without a ticket in the cache yet, the library asks the KDC on first use; ask now, so that a
                # bad keytab or an unreachable KDC shows here and the ticket's lifetime is known.
                target = gssapi.Name(f"krbtgt/{self.realm}@{self.realm}", gssapi.NameType.kerberos_principal)
                gssapi.SecurityContext(name=target, creds=creds, usage="initiate", mech=_KRB5).step()
            except GSSError as exc:
                self.status.error = f"Kerberos login as {self.principal} from {self.keytab} failed: " \
                                    f"{gss_message(exc)}"
                raise SaslError(self.status.error) from None
            lifetime = creds.lifetime or 0
            self._initiate = creds
            self.status.last_login = now
            self.status.expires_at = now + lifetime
            self.status.error = None
            return creds

    @property
    def realm(self) -> str:
        return self.principal.rpartition("@")[2]


class Initiator(Protocol):
    """A Kerberos identity that connects to metastores: waggle's keytab login, or a person's ticket cache."""

    @property
    def principal(self) -> str: ...

    def initiator(self) -> gssapi.Credentials: ...


class TicketCacheLogin:
    """The Kerberos identity of the person running a command (``waggle sync``, ``waggle check``): the ticket
    cache that ``kinit`` filled, named by ``KRB5CCNAME`` (or the Kerberos library's default cache).

    The cache is read again for each connection, so a ticket renewed by ``kinit -R`` during a long run is used
    from then on; waggle never renews it itself (a run longer than a ticket's life wants a keytab)."""

    def __init__(self, ccache: str | None = None) -> None:
        self.ccache = ccache or os.environ.get("KRB5CCNAME") or None

    @property
    def where(self) -> str:
        return f"KRB5CCNAME={self.ccache}" if self.ccache else "the default ticket cache"

    @property
    def principal(self) -> str:
        return str(self.initiator().name)

    def initiator(self) -> gssapi.Credentials:
        try:
            store: dict[bytes | str, bytes | str] | None = {"ccache": self.ccache} if self.ccache else None
            creds = gssapi.Credentials(usage="initiate", mechs=[_KRB5], store=store)
            if not creds.lifetime:
                raise SaslError(f"the Kerberos ticket in {self.where} has expired (run kinit, or give "
                                f"--principal and --keytab)")
        except GSSError as exc:
            raise SaslError(f"no usable Kerberos ticket in {self.where}: {gss_message(exc)} (run kinit, or give "
                            f"--principal and --keytab)") from None
        return creds


class GssapiServer:
    """The server side of SASL GSSAPI for one connection."""

    name = "GSSAPI"

    def __init__(self, creds: gssapi.Credentials, qops: Iterable[str],
                 authorize: Callable[[str], None] | None = None) -> None:
        self._ctx = gssapi.SecurityContext(creds=creds, usage="accept")
        #: called with the client's principal once it is known; raises :class:`SaslError` to refuse it
        self._authorize = authorize
        self._offer = 0
        for qop in qops:
            self._offer |= QOP_BITS[qop]
        self._stage = 0
        self._complete = False
        self._wraps = False
        self._encrypt = False
        self.qop = "auth"
        #: the client's principal, once the context is established
        self.principal = ""

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def wraps(self) -> bool:
        return self._wraps

    def step(self, data: bytes) -> bytes:
        ctx = self._ctx
        try:
            if self._stage == 0:
                token = ctx.step(data)
                if ctx.complete:
                    self.principal = str(ctx.initiator_name)
                    if self._authorize is not None:
                        self._authorize(self.principal)
                    self._stage = 1
                return token or b""
            if self._stage == 1:
                # The client answers our last context token with nothing; offer the protection levels.
                self._stage = 2
                offer = bytes((self._offer,)) + MAX_BUFFER.to_bytes(3, "big")
                return bytes(ctx.wrap(offer, False).message)
            reply = bytes(ctx.unwrap(data).message)
        except GSSError as exc:
            raise SaslError(f"Kerberos authentication failed: {gss_message(exc)}") from None
        if len(reply) < 4:
            raise SaslError("the client's GSSAPI security-layer answer is too short")
        chosen = reply[0]
        if chosen not in (1, 2, 4) or not chosen & self._offer:
            raise SaslError(f"the client chose protection {chosen:#x}; this server offers "
                            f"{', '.join(q for q, b in QOP_BITS.items() if b & self._offer)}")
        authzid = reply[4:].decode("utf-8", "replace")
        if authzid and authzid != self.principal:
            raise SaslError(f"{self.principal} may not act as {authzid[:200]}")
        self.qop = next(q for q, b in QOP_BITS.items() if b == chosen)
        self._wraps = chosen != 1
        self._encrypt = chosen == 4
        self._complete = True
        return b""

    def wrap(self, data: bytes) -> bytes:
        return bytes(self._ctx.wrap(data, self._encrypt).message)

    def unwrap(self, data: bytes) -> bytes:
        try:
            return bytes(self._ctx.unwrap(data).message)
        except GSSError as exc:
            raise ConnectionError(f"a SASL frame failed its integrity check: {gss_message(exc)}") from None


class GssapiClient:
    """The client side of SASL GSSAPI, to a Kerberized metastore (``service/host@REALM``)."""

    name = "GSSAPI"

    def __init__(self, creds: gssapi.Credentials, service_principal: str, qops: Iterable[str] = ("auth",)) -> None:
        target = gssapi.Name(service_principal, gssapi.NameType.kerberos_principal)
        flags = (gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity
                 | gssapi.RequirementFlag.confidentiality)
        self._ctx = gssapi.SecurityContext(name=target, creds=creds, usage="initiate", mech=_KRB5, flags=flags)
        self._prefer = tuple(qops)
        self._complete = False
        self._wraps = False
        self._encrypt = False
        self.qop = "auth"
        self.service_principal = service_principal

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def wraps(self) -> bool:
        return self._wraps

    def initial(self) -> bytes:
        try:
            return bytes(_blocking(self._ctx.step) or b"")
        except GSSError as exc:
            raise SaslError(f"cannot get a Kerberos ticket for {self.service_principal}: {gss_message(exc)}") \
                from None

    def step(self, data: bytes) -> bytes:
        ctx = self._ctx
        try:
            if not ctx.complete:
                return bytes(ctx.step(data) or b"")
            offer = bytes(ctx.unwrap(data).message)
        except GSSError as exc:
            raise SaslError(f"Kerberos authentication to {self.service_principal} failed: {gss_message(exc)}") \
                from None
        if len(offer) < 4:
            raise SaslError(f"{self.service_principal} sent a short GSSAPI security-layer offer")
        mask = offer[0]
        chosen = next((q for q in self._prefer if QOP_BITS[q] & mask), None)
        if chosen is None:
            offered = ", ".join(q for q, b in QOP_BITS.items() if b & mask)
            raise SaslError(f"{self.service_principal} offers protection {offered}; waggle is configured for "
                            f"{', '.join(self._prefer)}")
        bit = QOP_BITS[chosen]
        self.qop = chosen
        self._wraps = bit != 1
        self._encrypt = bit == 4
        self._complete = True
        return bytes(ctx.wrap(bytes((bit,)) + MAX_BUFFER.to_bytes(3, "big"), False).message)

    def wrap(self, data: bytes) -> bytes:
        return bytes(self._ctx.wrap(data, self._encrypt).message)

    def unwrap(self, data: bytes) -> bytes:
        try:
            return bytes(self._ctx.unwrap(data).message)
        except GSSError as exc:
            raise ConnectionError(f"a SASL frame failed its integrity check: {gss_message(exc)}") from None
