"""The calls that read a metastore's notification log and its settings, over an upstream connection (the
cache's log readers use them, as the health checks use ``getStatus``)."""

from __future__ import annotations

from typing import Any

from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore.ttypes import NotificationEventRequest
from waggle.upstream.client import UpstreamConnection, UpstreamError

__all__ = ["PAGE", "current_id", "next_events", "setting"]

#: events asked for at once
PAGE = 1000


def current_id(conn: UpstreamConnection, timeout: float) -> int:
    """The newest event id of the metastore's log."""
    result = conn.invoke("get_current_notificationEventId", T.get_current_notificationEventId_args(),
                         T.get_current_notificationEventId_result, timeout=timeout)
    return int(result.success.eventId or 0)


def next_events(conn: UpstreamConnection, after: int, timeout: float | None, most: int = PAGE) -> list[Any]:
    """Up to ``most`` events after id ``after``, in id order (``timeout`` None: the member's read timeout)."""
    result = conn.invoke("get_next_notification",
                         T.get_next_notification_args(NotificationEventRequest(lastEvent=after, maxEvents=most)),
                         T.get_next_notification_result, timeout=timeout)
    return sorted(result.success.events or [], key=lambda e: e.eventId)


def setting(conn: UpstreamConnection, key: str, timeout: float) -> str | None:
    """A setting as the metastore reports it, or None when it will not say."""
    try:
        result = conn.invoke("get_config_value", T.get_config_value_args(name=key, defaultValue=""),
                             T.get_config_value_result, timeout=timeout)
    except UpstreamError:
        return None
    return str(result.success or "")
