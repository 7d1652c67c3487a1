"""A metastore's notification log: whether it is written, and its messages' text.

A Hive metastore writes the log only when a notification listener is configured (Hive's
``org.apache.hive.hcatalog.listener.DbNotificationListener``, or one like it) in one of :data:`LISTENER_KEYS`.
Without one, the log calls still answer, with no events ever: a cache kept true by such a log would never forget.

Messages come in two formats: ``json-0.2`` (Hive 2 and 3: JSON) and Hive 4's ``gzip(json-2.0)`` (base64 of the
gzipped JSON, the same keys). :func:`read_message` reads both; :func:`write_message` writes JSON back in the
form a message came in.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from collections.abc import Iterable
from typing import Any

__all__ = ["LISTENER_KEYS", "missing_listener", "read_message", "write_message"]


def _gzipped(message: str, message_format: str | None) -> bool:
    return (message_format or "").startswith("gzip") or not message.lstrip().startswith("{")


def read_message(message: str | None, message_format: str | None) -> Any:
    """A message's JSON (plain, or base64 of gzip whatever its format says), or None when it cannot be read."""
    text = message or ""
    if _gzipped(text, message_format):
        try:
            text = gzip.decompress(base64.b64decode(text, validate=False)).decode("utf-8")
        except (binascii.Error, OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError):
            return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def write_message(body: Any, like: str, message_format: str | None) -> str:
    """``body`` as a message in the form of ``like`` (compact JSON; gzipped with a fixed time, and base64, when
    ``like`` was)."""
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    if not _gzipped(like, message_format):
        return text
    return base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")

#: the settings that name a metastore's event listeners (transactional ones write in the change's own transaction)
LISTENER_KEYS = ("hive.metastore.transactional.event.listeners", "hive.metastore.event.listeners")


def missing_listener(values: Iterable[str | None]) -> str | None:
    """Why the log is not written, given the values of :data:`LISTENER_KEYS` (None: the metastore would not say),
    or None when a notification listener is configured or it cannot be told."""
    said = list(values)
    if any(v is None for v in said):
        return None  # a setting it would not report: nothing known against it
    classes = [c.strip() for v in said for c in (v or "").split(",") if c.strip()]
    if any("notification" in c.rsplit(".", 1)[-1].lower() for c in classes):
        return None
    return ("its notification log is not written: neither " + " nor ".join(LISTENER_KEYS) +
            " names a notification listener (such as org.apache.hive.hcatalog.listener.DbNotificationListener)")
