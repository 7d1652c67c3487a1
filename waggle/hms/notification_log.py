"""Whether a metastore writes its notification log, from the settings it reports (``get_config_value``).

A Hive metastore writes the log only when a notification listener is configured (Hive's
``org.apache.hive.hcatalog.listener.DbNotificationListener``, or one like it) in one of these settings. Without
one, the log calls still answer, with no events ever: a cache kept true by such a log would never forget.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["LISTENER_KEYS", "missing_listener"]

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
