"""Test-side SASL clients for a Kerberized Hive metastore, independent of waggle's own code.

Both yield hmsclient's generated ``ThriftHiveMetastore.Client`` over ``thrift_sasl.TSaslClientTransport``
(Hive's SASL framing: a status byte, a 4-byte length and a payload while negotiating, then 4-byte length
frames). Only the ``auth`` quality of protection is supported, which is what a metastore offers by default
(``hadoop.rpc.protection=authentication``).

- :func:`gssapi_client`: Kerberos (SASL GSSAPI, RFC 4752) from a ticket cache, through python-gssapi; the
  metastore's service principal is ``SERVICE/HOST@REALM`` (``hive/localhost`` here).
- :func:`digest_client`: SASL DIGEST-MD5 with a Hive delegation token (the string ``get_delegation_token``
  returns), through pure-sasl's DIGEST-MD5 mechanism.

Facts found by experiment against Hive 2.3.10's metastore (Java 17's DIGEST-MD5 server):

- The token string is Hadoop's ``Token.encodeToUrlString()``: URL-safe base64 (no padding) of a Writable made of
  a vint-length identifier, a vint-length password, and two Texts (kind ``HIVE_DELEGATION_TOKEN``, service).
- The SASL username is the *standard* base64 of the identifier bytes, the password the standard base64 of the
  password bytes; the server's challenge names realm ``default``.
- The digest-uri must be ``null/default``: Hive registers its DIGEST-MD5 server with protocol ``null`` and
  server name ``default``, and Java's server refuses any other URI ("Mismatched URI"). Java's own client sends
  exactly that (``Sasl.createSaslClient(..., null, "default", ...)``), so pure-sasl must be given
  ``service="null"`` and ``host="default"``, not the metastore's host name.
- A client that does not speak SASL gets its connection closed: the server reads the first bytes of a Thrift
  call as a SASL header and gives up.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

#: what a Kerberized Hive metastore's DIGEST-MD5 server accepts as digest-uri: "null/default"
DIGEST_SERVICE = "null"
DIGEST_HOST = "default"


# -- Hadoop delegation tokens ---------------------------------------------------------------------------
def _read_vlong(data: bytes, pos: int) -> tuple[int, int]:
    """Hadoop's ``WritableUtils.readVLong``: (value, next position)."""
    first = struct.unpack_from(">b", data, pos)[0]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    size = (-119 - first) if negative else (-111 - first)
    value = int.from_bytes(data[pos + 1:pos + size], "big")
    return (~value if negative else value), pos + size


def _read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    length, pos = _read_vlong(data, pos)
    return data[pos:pos + length], pos + length


@dataclass(frozen=True)
class HadoopToken:
    identifier: bytes
    password: bytes
    kind: str
    service: str

    @classmethod
    def decode(cls, url_string: str) -> HadoopToken:
        """Parse ``Token.encodeToUrlString()`` output (URL-safe base64, padding optional)."""
        raw = base64.urlsafe_b64decode(url_string + "=" * (-len(url_string) % 4))
        identifier, pos = _read_bytes(raw, 0)
        password, pos = _read_bytes(raw, pos)
        kind, pos = _read_bytes(raw, pos)
        service, pos = _read_bytes(raw, pos)
        return cls(identifier, password, kind.decode(), service.decode())

    @property
    def sasl_username(self) -> str:
        return base64.b64encode(self.identifier).decode("ascii")

    @property
    def sasl_password(self) -> str:
        return base64.b64encode(self.password).decode("ascii")

    def owner(self) -> str:
        """The identifier's owner (``AbstractDelegationTokenIdentifier``: version byte, then Text owner, ...)."""
        name, _ = _read_bytes(self.identifier, 1)
        return name.decode()


# -- adapters with the interface thrift_sasl calls ------------------------------------------------------
class _AuthOnly:
    """encode/decode for the ``auth`` quality of protection: frames pass unchanged."""

    error: str | None = None

    def encode(self, data: bytes) -> tuple[bool, bytes]:
        return True, data

    def decode(self, data: bytes) -> tuple[bool, bytes]:
        return True, data

    def getError(self) -> str | None:  # thrift_sasl calls it so
        return self.error


class GssapiSasl(_AuthOnly):
    """SASL GSSAPI (RFC 4752) with python-gssapi: the context exchange, then the security-layer message."""

    QOP_AUTH = 1

    def __init__(self, service: str, host: str, ccache: str | None = None, authorization_id: str = "",
                 realm: str | None = None) -> None:
        import gssapi

        store = {"ccache": ccache} if ccache else None
        creds = gssapi.Credentials(usage="initiate", store=store) if store else None
        if realm:  # an explicit principal, for a service in another realm than the client's default one
            target = gssapi.Name(f"{service}/{host}@{realm}", gssapi.NameType.kerberos_principal)
        else:
            target = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
        flags = [gssapi.RequirementFlag.mutual_authentication, gssapi.RequirementFlag.out_of_sequence_detection]
        self.context = gssapi.SecurityContext(name=target, creds=creds, usage="initiate", flags=flags)
        self.authorization_id = authorization_id

    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        try:
            return True, "GSSAPI", self.context.step() or b""
        except Exception as exc:
            self.error = str(exc)
            return False, "GSSAPI", b""

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        try:
            if not self.context.complete:
                return True, self.context.step(challenge) or b""
            # the server's security layers (a bit mask) and its largest buffer, wrapped
            layer = self.context.unwrap(challenge).message
            if len(layer) != 4 or not layer[0] & self.QOP_AUTH:
                self.error = f"the server offers no 'auth' security layer ({layer!r})"
                return False, b""
            reply = struct.pack(">I", (self.QOP_AUTH << 24) | 0xFFFFFF) + self.authorization_id.encode()
            return True, self.context.wrap(reply, encrypt=False).message
        except Exception as exc:
            self.error = str(exc)
            return False, b""


class DigestSasl(_AuthOnly):
    """pure-sasl's DIGEST-MD5 client, with a delegation token's username and password."""

    def __init__(self, username: str, password: str, service: str = DIGEST_SERVICE, host: str = DIGEST_HOST) -> None:
        from puresasl.client import SASLClient

        self.client = SASLClient(host, service, mechanism="DIGEST-MD5", username=username, password=password,
                                 qops=["auth"])

    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        return True, "DIGEST-MD5", b""  # the server speaks first

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        try:
            return True, self.client.process(challenge) or b""
        except Exception as exc:
            self.error = str(exc)
            return False, b""


# -- clients ----------------------------------------------------------------------------------------------
@contextmanager
def _sasl_client(host: str, port: int, mechanism: str, factory: Any, timeout: float) -> Iterator[Any]:
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore
    from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
    from thrift.transport.TSocket import TSocket
    from thrift_sasl import TSaslClientTransport

    sock = TSocket(host, port)
    sock.setTimeout(timeout * 1000)
    transport = TSaslClientTransport(factory, mechanism, sock)
    transport.open()
    try:
        yield ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(transport))
    finally:
        transport.close()


@contextmanager
def gssapi_client(host: str, port: int, service: str = "hive", ccache: str | None = None,
                  server_host: str = "localhost", server_realm: str | None = None, timeout: float = 30.0
                  ) -> Iterator[Any]:
    """A metastore client authenticated by Kerberos from ``ccache`` (a path or ``FILE:...``; by default
    ``KRB5CCNAME``) to the service principal ``service/server_host`` (in ``server_realm``, or the default one of
    ``KRB5_CONFIG``)."""
    cache = f"FILE:{ccache}" if ccache and ":" not in ccache else ccache
    with _sasl_client(host, port, "GSSAPI", lambda: GssapiSasl(service, server_host, cache, realm=server_realm),
                      timeout) as client:
        yield client


@contextmanager
def digest_client(host: str, port: int, token_str: str, service: str = DIGEST_SERVICE,
                  server_host: str = DIGEST_HOST, timeout: float = 30.0) -> Iterator[Any]:
    """A metastore client authenticated by a Hive delegation token (SASL DIGEST-MD5)."""
    token = HadoopToken.decode(token_str)
    with _sasl_client(host, port, "DIGEST-MD5",
                      lambda: DigestSasl(token.sasl_username, token.sasl_password, service, server_host),
                      timeout) as client:
        yield client
