"""Version bridging per upstream: what each metastore lacks, learned once per connection pool, and the calls
that stand in for what it lacks.

A pool's :class:`Capabilities` start from the member's ``hive-version`` hint (nothing is assumed without one)
and learn from the metastore itself:

* a bridged method the metastore answers with ``UNKNOWN_METHOD`` is remembered as missing, and its later calls
  go straight to the bridge (:mod:`waggle.hms.bridges`);
* whether it understands catalog-qualified names (``@hive#db``) is asked once, with ``get_catalogs``, the first
  time a client sends one.

Nothing is probed per call. A metastore that is upgraded underneath waggle is relearned when waggle restarts
(or, once hot reload exists, when its pool is rebuilt).
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING, Any

from gevent.lock import Semaphore
from thrift.Thrift import TApplicationException, TMessageType, TType

from waggle.common.logging import get_logger
from waggle.config.model import MetastoreConfig
from waggle.config.timing import PROBE_RETRY_SECONDS
from waggle.hms import bridges
from waggle.hms.bridges import BRIDGES, MethodMissing, Version, Wrap, is_unknown_method
from waggle.hms.service import METHOD_IO
from waggle.upstream.client import Identity, Reply, UpstreamError
from waggle.wire import Header, decode_message

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.compat")


class Capabilities:
    """What one metastore has, as far as waggle knows. Shared by every call through its pool."""

    __slots__ = ("catalogs", "member", "missing", "probe_failed_at", "probing", "version")

    def __init__(self, member: MetastoreConfig) -> None:
        self.member = member.name
        self.version: Version | None = bridges.parse_version(member.hive_version)
        #: methods this metastore does not have (bridged ones from the hint, then any it answered UNKNOWN_METHOD)
        self.missing: set[str] = set(bridges.missing_in(self.version))
        #: understands ``@cat#db``: True (Hive 3+), False (Hive 2), None (not known yet)
        self.catalogs: bool | None = None if self.version is None else self.version >= bridges.HIVE_3
        self.probing = Semaphore()  # one catalog probe at a time; the others wait for its answer
        self.probe_failed_at = -PROBE_RETRY_SECONDS

    def learn_missing(self, method: str) -> None:
        if method not in self.missing:
            self.missing.add(method)
            bridge = BRIDGES.get(method)
            log.info("compat.learned", member=self.member, missing=method, bridge=bridge.via if bridge else None)

    def learn_catalogs(self, understood: bool) -> None:
        if self.catalogs is None:
            self.catalogs = understood
            log.info("compat.learned", member=self.member, catalogs=understood)

    def bridges(self, method: str, args: Any) -> bool:
        """Whether this call goes to the bridge rather than to the metastore as it is."""
        return bridges.bridges_call(method, args, self.missing, self.version)


class ApplicationError(UpstreamError):
    """The metastore answered a call with a ``TApplicationException``: it is up, the call failed."""


class Bridged:
    """The :class:`waggle.hms.bridges.Upstream` of one call: decoded calls on one pool, as one identity."""

    def __init__(self, pool: UpstreamPool, identity: Identity | None, seqid: int) -> None:
        self.pool = pool
        self.caps: Capabilities = pool.caps
        self.identity = identity
        self.seqid = seqid
        self._active: set[str] = set()  # bridges running in this call: a bridge never re-enters itself

    @property
    def catalogs(self) -> bool | None:
        return probe_catalogs(self.pool, self.identity)

    def run(self, method: str, args: Any) -> Any:
        """``method``'s result, through its bridge."""
        self._active.add(method)
        try:
            return BRIDGES[method].answer(args, self)
        finally:
            self._active.discard(method)

    def call(self, method: str, args: Any) -> Any:
        caps = self.caps
        bridgeable = method not in self._active and bridges.applies_to(method, args)
        if bridgeable and caps.bridges(method, args):
            return self.run(method, args)
        if method in caps.missing:
            raise MethodMissing(method)
        io = METHOD_IO[method]
        assert io.result is not None
        result = self.pool.exchange(self.identity, method, args, io.result, self.seqid)
        if isinstance(result, TApplicationException):
            if is_unknown_method(result):
                caps.learn_missing(method)
                if bridgeable:
                    return self.run(method, args)
                raise MethodMissing(method)
            raise ApplicationError(self.pool.name, f"answered {method} with an application error: {result.message}")
        return result


def wrapped(pool: UpstreamPool, identity: Identity | None, header: Header, wrap: Wrap, args: Any, bridged: Bridged
            ) -> Reply | Any:
    """A :class:`~waggle.hms.bridges.Wrap` bridge over binary Thrift: the older call's reply re-framed as
    ``header``'s method (a :class:`Reply`, to be relayed, spliced or rewritten like any reply), or, when the
    older call answered with an exception, ``header``'s result struct built from it."""
    older, older_args = wrap.request(args, bridged)
    older_io = METHOD_IO[older]
    assert older_io.result is not None
    reply = pool.forward(identity, Header(older, TMessageType.CALL, header.seqid), older_args, None,
                         pool.config.wire.protocol)
    assert reply is not None
    raw = wrap_reply(reply.raw, older, header.name, wrap.field) \
        if reply.header.mtype == TMessageType.REPLY and reply.first_field == 0 else None
    if raw is not None:
        return Reply(Header(header.name, TMessageType.REPLY, header.seqid), raw, 0, 0)
    _, result = decode_message(reply.raw, pool.config.wire.protocol, older_io.result, pool.limits)
    if isinstance(result, TApplicationException):
        if is_unknown_method(result):
            raise MethodMissing(older)
        raise ApplicationError(pool.name, f"answered {older} with an application error: {result.message}")
    return wrap.result(header.name, result)


def probe_catalogs(pool: UpstreamPool, identity: Identity | None) -> bool | None:
    """Whether the metastore understands catalogs, asked once (Hive 3+ has ``get_catalogs``).

    Concurrent first calls share one probe. When the metastore cannot be reached the answer stays unknown, and
    the probe is not repeated for :data:`PROBE_RETRY_SECONDS`.
    """
    caps: Capabilities = pool.caps
    if caps.catalogs is not None or time.monotonic() - caps.probe_failed_at < PROBE_RETRY_SECONDS:
        return caps.catalogs
    with caps.probing:
        if caps.catalogs is not None:
            return caps.catalogs
        io = METHOD_IO["get_catalogs"]
        assert io.result is not None
        try:
            result = pool.exchange(identity, "get_catalogs", io.args(), io.result)
        except UpstreamError as exc:
            caps.probe_failed_at = time.monotonic()
            log.warning("compat.probe_failed", member=pool.name, error=str(exc))
            return None
        if not isinstance(result, TApplicationException):
            caps.learn_catalogs(True)
        elif is_unknown_method(result):
            caps.learn_catalogs(False)
        else:
            caps.probe_failed_at = time.monotonic()
        return caps.catalogs


# -- replies re-framed without decoding ---------------------------------------------------------------------
_STRICT_VERSION = 0x80010000
_LIST_FIELD_0 = bytes((TType.LIST, 0, 0))


def wrap_reply(raw: bytes, older: str, method: str, field: int) -> bytes | None:
    """An older method's binary reply, re-framed as ``method``'s (see :class:`waggle.hms.bridges.Wrap`): the
    success list becomes field ``field`` of the response struct, byte for byte. None unless ``raw`` is a
    strict-binary reply of ``older`` whose success (field 0, a list) is set."""
    if len(raw) < 16:
        return None
    version_and_type, length = struct.unpack_from("!iI", raw)
    start = 8 + length + 4  # the result struct, after the name and the sequence id
    if version_and_type & ~0xFF != _STRICT_VERSION - (1 << 32) or version_and_type & 0xFF != TMessageType.REPLY \
            or raw[8:8 + length] != older.encode() or raw[start:start + 3] != _LIST_FIELD_0 or raw[-1] != 0:
        return None
    name = method.encode()
    # a result carries exactly one field: here the list, which ends just before the result's STOP byte
    return b"".join((raw[:4], struct.pack("!i", len(name)), name, raw[8 + length:start],
                     bytes((TType.STRUCT, 0, 0, TType.LIST)), struct.pack("!h", field), raw[start + 3:-1],
                     b"\x00\x00"))
