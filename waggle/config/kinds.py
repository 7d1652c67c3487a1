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


class CacheMode(enum.Enum):
    """How waggle keeps the replies it remembers of a member true (``cache``)."""

    OFF = "off"  # nothing remembered: every read reaches the member
    TTL = "ttl"  # remembered for cache-ttl; writes through this waggle process drop what they name
    EVENTS = "events"  # remembered while the member's notification log says nothing changed


class NotificationLog(enum.Enum):
    """Which notification log clients read through waggle (``notification-log``)."""

    PRIMARY = "primary"  # the primary's own: its events and ids, as they are
    FEDERATED = "federated"  # every member's, merged, renamed, with ids of the merged log (waggle.events)


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


class Family(enum.IntEnum):
    """The method families a rate limit (``limits.rates``) counts: every method of the method table is in one
    (:attr:`waggle.hms.methods.MethodSpec.family`). An int, so that a family indexes a tuple on the call path."""

    READS = 0
    WRITES = 1
    LISTINGS = 2
    PARTITIONS = 3

    @property
    def label(self) -> str:
        """The family as the server file and the metrics name it (``reads``)."""
        return self.name.lower()


class Per(enum.Enum):
    """What a rate limit keeps one token bucket for (``limits.rates[].per``)."""

    USER = "user"  # each user (the connection's identity) has a bucket of its own
    ADDRESS = "address"  # each client address has one
    RULE = "rule"  # every matching call shares the rule's one bucket


class Privilege(enum.Enum):
    """What a grant (``authorization.rules[].privileges``) allows or denies: every method of the method table needs
    one on the objects it names (:attr:`waggle.hms.methods.MethodSpec.privilege`), Ranger's Hive access types
    included (:mod:`waggle.grants.ranger`)."""

    SELECT = "select"  # read: metadata, partitions, statistics, a shared lock
    UPDATE = "update"  # change data: partitions added, dropped or altered, statistics, an exclusive lock
    CREATE = "create"  # create a database, a table, a function
    DROP = "drop"  # drop them
    ALTER = "alter"  # alter or rename a database or a table
    ADMIN = "admin"  # roles, grants, catalogs, and what is not any one object's


class Effect(enum.Enum):
    """Whether a grant allows or denies (a deny wins over an allow)."""

    ALLOW = "allow"
    DENY = "deny"


class GroupSource(enum.Enum):
    """Where a caller's groups come from (``authorization.groups.source``)."""

    NONE = "none"  # no groups: rules name users
    FILE = "file"  # a groups file (``group: member, member`` lines, or /etc/group's form)
    NSS = "nss"  # the operating system (NSS: /etc/group, sssd, winbind, ...)
    LDAP = "ldap"  # an LDAP directory (``authorization.groups.ldap``)
