"""The enumerated values of configuration settings (re-exported by :mod:`waggle.config.model`)."""

from __future__ import annotations

import enum


class DatabaseResolution(enum.Enum):
    MANUAL = "MANUAL"
    PREFIXED = "PREFIXED"


class AccessControlType(enum.Enum):
    READ_ONLY = "READ_ONLY"
    READ_AND_WRITE_AND_CREATE = "READ_AND_WRITE_AND_CREATE"
    READ_AND_WRITE_ON_DATABASE_WHITELIST = "READ_AND_WRITE_ON_DATABASE_WHITELIST"
    READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST = "READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST"

    @property
    def primary_only(self) -> bool:
        """Waggle Dance allows the ``..._CREATE...`` variants on the primary metastore only."""
        return "CREATE" in self.value


class CopyReads(enum.Enum):
    """When reads of a member's tables are answered from their copies in the primary (``read-from-copies``)."""

    NEVER = "never"
    WHEN_DOWN = "when-down"
    PREFER = "prefer"


class PartialCopies(enum.Enum):
    """What a ``prefer`` read does with partitions its copy lacks or holds stale (``partial``)."""

    SOURCE = "source"
    REFUSE = "refuse"


class TransportKind(enum.Enum):
    BUFFERED = "buffered"
    FRAMED = "framed"


class ProtocolKind(enum.Enum):
    BINARY = "binary"
    COMPACT = "compact"


#: Java's ``TimeUnit`` names, in seconds (``status-polling-delay-time-unit``).
TIME_UNITS: dict[str, float] = {
    "NANOSECONDS": 1e-9, "MICROSECONDS": 1e-6, "MILLISECONDS": 1e-3, "SECONDS": 1.0,
    "MINUTES": 60.0, "HOURS": 3600.0, "DAYS": 86400.0,
}
