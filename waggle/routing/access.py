"""Access control: may this call write to that database? Pure, decided before anything reaches a metastore."""

from __future__ import annotations

from collections.abc import Set

from waggle.config.model import AccessControlType, MetastoreConfig


def write_refusal(member: MetastoreConfig, db: str, created: Set[str] = frozenset(),
                  shown: str | None = None) -> str | None:
    """Why a write to ``db`` (its name inside ``member``) is refused, or None when it is allowed.

    ``created`` holds databases created through waggle under ``..._CREATE_ON_DATABASE_WHITELIST``; they are
    writable for the life of the process (the user's YAML is never rewritten). ``shown`` is the name the
    client used (with its prefix), for the message.
    """
    kind = member.access_control_type
    if kind is AccessControlType.READ_AND_WRITE_AND_CREATE:
        return None
    name = shown or db
    if kind is AccessControlType.READ_ONLY:
        return f"database '{name}' in metastore '{member.name}' is read-only (access-control-type READ_ONLY)"
    lowered = db.lower()
    if lowered in created or any(p.fullmatch(lowered) for p in member.writable_database_white_list):
        return None
    return (f"database '{name}' in metastore '{member.name}' is not writable: it does not match "
            f"writable-database-white-list ({kind.value})")


def create_refusal(member: MetastoreConfig, db: str) -> str | None:
    """Why creating database ``db`` in ``member`` is refused, or None."""
    if not member.primary:
        return f"databases can only be created in the primary metastore, not in '{member.name}'"
    if not member.access_control_type.primary_only:
        return (f"creating database '{db}' is not allowed: the primary metastore '{member.name}' has "
                f"access-control-type {member.access_control_type.value}")
    return None


def table_visible(member: MetastoreConfig, db: str, table: str) -> bool:
    """``mapped-tables``: a database listed there shows only the tables matching its regexes."""
    if member.mapped_tables is None:
        return True
    lowered = db.lower()
    for entry in member.mapped_tables:
        if entry.database == lowered:
            return any(p.fullmatch(table) for p in entry.patterns)
    return True
