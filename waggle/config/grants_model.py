"""The frozen values of ``authorization`` (the server file, or a policy file): grants, where groups come from, and
Ranger. Read by :mod:`waggle.config.authorization`; the keys, defaults and meanings are declared in
:mod:`waggle.config.authorization_settings`."""

from __future__ import annotations

from dataclasses import dataclass

from waggle.config.kinds import Effect, GroupSource, Privilege


@dataclass(frozen=True, slots=True)
class GrantRule:
    """One rule of ``authorization.rules`` (or of a policy file). Names and patterns are lower-cased; ``*`` in
    ``users`` matches every caller, ``*`` or ``public`` in ``groups`` every group."""

    #: how messages and the audit name it: ``server.yml: authorization.rules[2] 'analysts read sales'``
    name: str
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    databases: tuple[str, ...] = ("*",)
    tables: tuple[str, ...] = ("*",)
    privileges: frozenset[Privilege] = frozenset()
    effect: Effect = Effect.ALLOW


@dataclass(frozen=True, slots=True)
class LdapGroups:
    """``authorization.groups.ldap``: a directory whose group entries name their members."""

    url: str  # ldap://host:port or ldaps://host:port
    base: str  # where groups are searched
    #: an LDAP filter; ``{user}`` is the user's short name, ``{dn}`` the user's entry (found with user-filter)
    group_filter: str = "(&(objectClass=posixGroup)(memberUid={user}))"
    group_attribute: str = "cn"
    user_base: str | None = None  # where users are searched, for ``{dn}`` (default: base)
    user_filter: str = "(uid={user})"
    bind_dn: str | None = None
    bind_password_file: str | None = None  # never logged
    start_tls: bool = False
    ca_file: str | None = None
    timeout_seconds: float = 5.0


@dataclass(frozen=True, slots=True)
class GroupsConfig:
    """``authorization.groups``: where a caller's groups come from, and how long they are trusted."""

    source: GroupSource = GroupSource.NONE
    file: str | None = None
    ttl_seconds: float = 300.0
    ldap: LdapGroups | None = None


@dataclass(frozen=True, slots=True)
class RangerConfig:
    """``authorization.ranger``: a Ranger Hive service's policies, from a file (Ranger admin's export or its
    plugin download), or polled from Ranger admin."""

    service: str = "hive"
    policy_file: str | None = None
    url: str | None = None  # Ranger admin, e.g. http://ranger:6080
    poll_seconds: float = 30.0
    #: where the last policies downloaded are kept, so a restart while Ranger admin is down has them
    cache_file: str | None = None
    ca_file: str | None = None


@dataclass(frozen=True, slots=True)
class Authorization:
    """``authorization``: per-user and per-group grants on every door. Absent from the server file: off."""

    trust_set_ugi: bool = False
    default: Effect = Effect.DENY
    rules: tuple[GrantRule, ...] = ()
    policy_file: str | None = None
    groups: GroupsConfig = GroupsConfig()
    ranger: RangerConfig | None = None
    #: an audit line for each allowed write too (refusals always have one)
    audit_writes: bool = False
