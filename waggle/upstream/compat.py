"""Version bridging per upstream: the calls that stand in for what a metastore lacks, and the probes that
learn what it has.

What each metastore lacks is its pool's :class:`~waggle.upstream.capabilities.Capabilities` (below the pool);
this module sits above the pool and uses it:

* a bridged method the metastore answers with ``UNKNOWN_METHOD`` is remembered as missing, and its later calls
  go straight to the bridge (:mod:`waggle.hms.bridges`);
* whether it understands catalog-qualified names (``@hive#db``) is asked once, with ``get_catalogs``, the first
  time a client sends one (:func:`probe_catalogs`).

Nothing is probed per call.
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING, Any

from thrift.Thrift import TApplicationException, TMessageType, TType

from waggle.common.logging import get_logger
from waggle.config.timing import PROBE_RETRY_SECONDS
from waggle.hms import bridges
from waggle.hms.bridges import BRIDGES, HIVE_3, MethodMissing, Wrap, is_unknown_method
from waggle.hms.decode import decode_message
from waggle.hms.layouts import Layout
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header
from waggle.upstream.capabilities import Capabilities
from waggle.upstream.client import Identity, Reply, UpstreamError

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.compat")


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
        # a method whose exceptions releases declare at different fields is read as the metastore declares it
        layout = layout_of(self.pool, self.identity) if io.misread else None
        result_class = io.result if layout is None else io.result_class(layout)
        result = self.pool.exchange(self.identity, method, args, result_class, self.seqid)
        if result_class is not io.result and not isinstance(result, TApplicationException):
            result = io.as_ours(result)
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
    reply = pool.forward(identity, Header(older, TMessageType.CALL, header.seqid), args=older_args, raw=None,
                         protocol=pool.config.wire.protocol)
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


def layout_of(pool: UpstreamPool, identity: Identity | None) -> Layout | None:
    """Where the metastore puts its declared exceptions: Hive 2.3's fields, or those of Hive 3.1+ (its
    ``hive-version``, else whether it has catalogs, asked once); None while that cannot be known."""
    caps: Capabilities = pool.caps
    if caps.version is not None:
        return Layout.HIVE_2 if caps.version < HIVE_3 else Layout.CURRENT
    catalogs = probe_catalogs(pool, identity)
    return None if catalogs is None else (Layout.CURRENT if catalogs else Layout.HIVE_2)


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
