"""Federation files as users write them (Waggle Dance's keys)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def federation_yaml(primary_uri: str, extra: str = "", access: str = "READ_AND_WRITE_AND_CREATE") -> str:
    return (f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary_uri}\n"
            f"  access-control-type: {access}\n{extra}")


def prefixed(primary_uri: str, *members: tuple[str, str, str], access: str | None = None, extra: str = "") -> str:
    """A federation of the primary (with ``access``, if given) and ``(name, uri, prefix)`` members, then ``extra``."""
    text = f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary_uri}\n"
    if access:
        text += f"  access-control-type: {access}\n"
    if members:
        text += "federated-meta-stores:\n" + "".join(
            f"- name: {name}\n  remote-meta-store-uris: {uri}\n  database-prefix: {prefix}\n"
            for name, uri, prefix in members)
    return text + extra


def federated_members(analytics_uri: str, ops_uri: str, prefixed: bool = True) -> str:
    """The federated part of the session federation (PREFIXED, or the same members for MANUAL)."""
    tables = ("  mapped-databases: [sales, web, default]\n"
              "  mapped-tables:\n  - database: web\n    mapped-tables: [visits, page_.*]\n")
    return (
        "federated-meta-stores:\n"
        f"- name: analytics\n  remote-meta-store-uris: {analytics_uri}\n"
        + ("  database-prefix: analytics_\n" if prefixed else "") + tables +
        f"- name: ops\n  remote-meta-store-uris: {ops_uri}\n"
        "  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n"
        "  writable-database-white-list: [scratch]\n"
        "  database-name-mapping: {telemetry: metrics}\n"
    )


def loaded_federation(tmp_path_factory: Any, text: str) -> Any:
    """The federation that ``text`` (a federation file) loads as, written to a file of its own first."""
    from waggle.config.loader import load

    path = Path(tmp_path_factory.mktemp("cfg")) / "fed.yml"
    path.write_text(text)
    return load(None, str(path)).federation
