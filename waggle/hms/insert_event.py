"""``fire_listener_event``'s files, kept across Hive releases that number ``InsertEventRequestData`` apart. Pure.

=========  =============================================================================================
Hive 2.3   1 filesAdded (required), 2 filesAddedChecksum
Hive 3     1 replace, 2 filesAdded (required), 3 filesAddedChecksum
Hive 4     as Hive 3, and 4 subDirectoryList, 5 partitionVal (waggle's IDL)
=========  =============================================================================================

Read with the other numbering, the files are lost: a Hive 2.3 list at id 1 is no ``replace`` and is skipped, and
a Hive 3+ list at id 2 is Hive 2.3's checksums. Two rules keep them:

* **arriving** (:func:`arrived`): a call decoded in waggle's IDL whose insert data has no ``replace`` is read
  again in Hive 2.3's numbering; when its id 1 is a list, the call is given in waggle's numbering, its arguments
  and its bytes, so that everything after (a relay, names rewritten, a bridge) sees a call in waggle's IDL;
* **leaving** (:func:`as_hive2`): a metastore without catalogs (Hive 2) is sent the arguments in Hive 2.3's
  numbering, by ``fire_listener_event``'s bridge (:mod:`waggle.hms.bridges`): it runs for every metastore not
  known to be Hive 3 or later, so that none is relayed the bytes of a Hive 3+ client.

Hive 4's ``insertDatas`` (several inserts in one call) has no Hive 2.3 equivalent and is sent as it is.
"""

from __future__ import annotations

from typing import Any

from thrift.protocol import fastbinary
from thrift.Thrift import TType

from waggle.config.model import Limits, ProtocolKind
from waggle.hms import specs
from waggle.hms.decode import decode_message
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.headers import WireError, body_start

__all__ = ["arrived", "as_hive2", "inserts"]

_STRINGS = (TType.STRING, "UTF8", False)
#: a call read a second time was read whole once already, within the client's limits
_READ_AGAIN = Limits(max_message_bytes=1 << 31, max_string_bytes=1 << 31, max_container_items=1 << 31)


def _hive2(name: str, spec: tuple[Any, ...]) -> type:
    """A class that encodes and decodes with ``spec`` (Hive 2.3's ids; attribute names are waggle's)."""
    cls = type(name, (specs.Mirror,), {"__module__": __name__})
    specs.declare(cls, spec)
    return cls


def _struct(fid: int, attr: str, cls: type) -> tuple[Any, ...]:
    return (fid, TType.STRUCT, attr, specs.codec(cls), None)


#: Hive 2.3's InsertEventRequestData, FireEventRequestData, FireEventRequest (ids 1 to 5 of waggle's) and
#: fire_listener_event_args: the same attribute names as waggle's classes, so waggle's values encode with them
_INSERT = _hive2("InsertEventRequestData", (
    None, (1, TType.LIST, "filesAdded", _STRINGS, None), (2, TType.LIST, "filesAddedChecksum", _STRINGS, None)))
_DATA = _hive2("FireEventRequestData", (None, _struct(1, "insertData", _INSERT)))
_REQUEST = _hive2("FireEventRequest", (None, *(
    _struct(2, "data", _DATA) if f.fid == 2 else tuple(f) for f in specs.fields(T.FireEventRequest) if f.fid <= 5)))
_ARGS = _hive2("fire_listener_event_args", (
    None, _struct(1, specs.fields(H.fire_listener_event_args)[0].attr, _REQUEST)))


def _insert(args: Any) -> Any | None:
    """The insert data of decoded ``fire_listener_event`` arguments, if they carry one."""
    data = getattr(getattr(args, "rqst", None), "data", None)
    return getattr(data, "insertData", None)


def inserts(args: Any) -> bool:
    """Whether a ``fire_listener_event`` call carries insert data (the one part numbered apart)."""
    return _insert(args) is not None


def arrived(args: Any, raw: bytes, protocol: ProtocolKind) -> tuple[Any, bytes]:
    """A ``fire_listener_event`` call (``args`` decoded in waggle's IDL from ``raw``, the whole message) in
    waggle's numbering: as it came, unless its insert data is numbered as Hive 2.3 numbers it; then its
    arguments with the files put back (in place) and the message encoded again in ``protocol``."""
    insert = _insert(args)
    if insert is None or insert.replace is not None:
        return args, raw  # nothing numbered apart, or a Hive 3+ field
    try:
        read = _insert(decode_message(raw, protocol, _ARGS, _READ_AGAIN)[1])
    except WireError:
        return args, raw
    files = getattr(read, "filesAdded", None)
    if files is None:
        return args, raw  # id 1 is no list: waggle's numbering
    args.rqst.data.insertData = T.InsertEventRequestData(
        filesAdded=files, filesAddedChecksum=getattr(read, "filesAddedChecksum", None))
    compact = protocol is ProtocolKind.COMPACT
    encode = fastbinary.encode_compact if compact else fastbinary.encode_binary
    return args, raw[:body_start(raw, compact)] + encode(args, specs.codec(type(args)))


def as_hive2(args: Any) -> Any:
    """``fire_listener_event`` arguments that encode in Hive 2.3's numbering (the same values; fields Hive 2.3
    does not have are left out)."""
    return _ARGS(rqst=args.rqst)
