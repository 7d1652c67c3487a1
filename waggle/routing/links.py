"""Remote databases: links users create from SQL, and the policy that bounds them. Pure.

A link is a database of the primary metastore whose parameters name a remote database::

    CREATE DATABASE eu_sales WITH DBPROPERTIES ('waggle.remote.metastore'='analytics',
                                                'waggle.remote.database'='sales')

Storing the link in the primary means restarts keep it, and the primary's backups carry it. Every replica
reads it from there. A call that names ``eu_sales`` then goes to the member ``analytics`` as ``sales``, and
replies come back as ``eu_sales``, just as for a prefixed member.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from waggle.config.model import AccessControlType, Federation, HostPort, MetastoreConfig, RemotePolicy
from waggle.hms.gen.hive_metastore.ttypes import Database

PREFIX = "waggle.remote."
#: Hive 4's DatabaseType.REMOTE
REMOTE = 2
METASTORE = "waggle.remote.metastore"
URIS = "waggle.remote.uris"
DATABASE = "waggle.remote.database"
#: the Hive 4 data connector a REMOTE database was made with (see waggle.remotes.connectors)
CONNECTOR = "waggle.remote.connector"
KEYS = (METASTORE, URIS, DATABASE, CONNECTOR)
#: shown (never stored): how waggle reaches the link's metastore
VIA = "waggle.remote.via"


class LinkError(ValueError):
    """A link's properties cannot make a link; ``str()`` says which and why."""


@dataclass(frozen=True, slots=True)
class Link:
    """``name`` (local, lower-case) stands for ``database`` of the member ``member`` (or of the metastore at
    ``uri``)."""

    name: str
    database: str
    member: str | None = None
    uri: str | None = None
    #: made by Hive 4's CREATE REMOTE DATABASE ... USING this connector
    connector: str | None = None

    def describe(self) -> str:
        where = f"metastore '{self.member}'" if self.member else f"the metastore at {self.uri}"
        return f"database '{self.database}' of {where}"


def is_link(parameters: Mapping[str, str] | None) -> bool:
    return bool(parameters) and any(str(k).startswith(PREFIX) for k in parameters or {})


def link_of(name: str, parameters: Mapping[str, str] | None) -> Link | None:
    """The link these database parameters make, None when they name none; :class:`LinkError` if malformed."""
    if not is_link(parameters):
        return None
    assert parameters is not None
    unknown = sorted(k for k in parameters if k.startswith(PREFIX) and k not in KEYS and k != VIA)
    if unknown:
        raise LinkError(f"unknown link propert{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)} (a link "
                        f"takes {', '.join(KEYS)})")
    member = (parameters.get(METASTORE) or "").strip() or None
    uri = (parameters.get(URIS) or "").strip() or None
    if member and uri:
        raise LinkError(f"a link names either {METASTORE} or {URIS}, not both")
    if not member and not uri:
        raise LinkError(f"a link needs {METASTORE} (a federation member) or {URIS} (a thrift:// URI)")
    if uri is not None:
        try:
            parts = urlsplit(uri)
            ok = parts.scheme == "thrift" and bool(parts.hostname) and parts.port is not None and \
                parts.path in ("", "/") and not parts.query
        except ValueError:
            ok = False
        if not ok:
            raise LinkError(f"{URIS}: '{uri[:200]}' is not a thrift://host:port URI")
    database = (parameters.get(DATABASE) or "").strip().lower() or name.lower()
    return Link(name.lower(), database, member, uri, (parameters.get(CONNECTOR) or "").strip() or None)


def policy_refusal(link: Link, policy: RemotePolicy, federation: Federation) -> str | None:
    """Why the policy forbids this link (naming the rule), or None. Who creates it is checked apart."""
    if not policy.enabled:
        return "remote databases are off (remote-databases.enabled is false)"
    if link.member is not None:
        names = {m.name for m in federation.federated}
        if link.member not in names:
            known = ", ".join(sorted(names)) or "none"
            primary = " (the primary's databases need no link)" if link.member == federation.primary.name else ""
            return f"{METASTORE} names '{link.member}', which is not a federated metastore{primary} (they are: " \
                   f"{known})"
        if "*" not in policy.allowed_metastores and link.member not in policy.allowed_metastores:
            return f"metastore '{link.member}' is not in remote-databases.allowed-metastores"
        return None
    assert link.uri is not None
    if not any(p.fullmatch(link.uri) for p in policy.allowed_uris):
        return f"{link.uri} matches no pattern of remote-databases.allowed-uris"
    return None


def creator_refusal(policy: RemotePolicy, user: str, groups: tuple[str, ...]) -> str | None:
    """Why this identity may not create or drop links (naming the rule), or None."""
    if "*" in policy.allowed_users or (user and user in policy.allowed_users):
        return None
    if any(g in policy.allowed_groups for g in groups):
        return None
    who = f"user '{user}'" if user else "a connection without a user (no Kerberos login or set_ugi)"
    return f"{who} is not in remote-databases.allowed-users or allowed-groups"


def description(link: Link, remote: str | None) -> str:
    """What ``DESCRIBE DATABASE`` shows for a link: the remote's own description, then the link."""
    text = f"[waggle link to {link.describe()}]"
    return f"{remote} {text}" if remote else text


def reached(member: MetastoreConfig) -> str:
    """How waggle reaches a link's metastore, for DESCRIBE: its URIs, and its SSH tunnel if it has one."""
    via = ", ".join(str(u) for u in member.uris)
    if member.tunnel is not None:
        via += " through SSH " + " -> ".join(f"{user}@{host}" for user, host in member.tunnel.route)
    return via


def present_link(result: Any, link: Link, member: MetastoreConfig | None = None) -> None:
    """A reply's Database (already in the client's names) described as the link it is: the remote's own
    description and parameters, then the link's."""
    database = getattr(result, "success", None)
    if not isinstance(database, Database) or (database.name or "").lower() != link.name:
        return
    database.description = description(link, database.description)
    parameters = dict(database.parameters or {})
    parameters.update({DATABASE: link.database, **({METASTORE: link.member} if link.member else {}),
                       **({URIS: link.uri} if link.uri else {})})
    if member is not None:
        parameters[VIA] = reached(member)
    database.parameters = parameters
    if link.connector:  # what Hive 4 clients show for a REMOTE database; older clients skip these fields
        database.type, database.connector_name, database.remote_dbname = REMOTE, link.connector, link.database


def parameters_of(link: Link) -> dict[str, str]:
    """The primary database parameters that store ``link``."""
    return {DATABASE: link.database, **({METASTORE: link.member} if link.member else {}),
            **({URIS: link.uri} if link.uri else {}), **({CONNECTOR: link.connector} if link.connector else {})}


def uri_member(uri: str) -> MetastoreConfig:
    """The metastore a URI link reaches: named after its URI, with waggle's default connection settings and no
    access of its own (the link policy's access applies). It is no federation member: listings leave it out."""
    parts = urlsplit(uri)
    assert parts.hostname is not None and parts.port is not None
    return MetastoreConfig(name=f"{parts.hostname}:{parts.port}", uris=(HostPort(parts.hostname, parts.port),),
                           primary=False, database_prefix="",
                           access_control_type=AccessControlType.READ_AND_WRITE_ON_DATABASE_WHITELIST,
                           writable_database_white_list=(re.compile(".*"),))
