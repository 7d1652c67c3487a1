"""Ranger policy documents read into the policies :class:`~waggle.grants.ranger.RangerSource` evaluates: the
JSON of Ranger admin's plugin download or of its export, checked field by field (:class:`RangerPolicyError` names
the file, the policy and the field), each policy's resources compiled to patterns and its items sorted by
privilege. Pure; what is read and how is told in :mod:`waggle.grants.ranger`."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from waggle.config.kinds import Privilege
from waggle.grants.patterns import compile_globs, matches_all
from waggle.grants.verdict import Caller

#: the policy type of access policies (1 data masking, 2 row filter, 3 audit)
ACCESS_POLICY = 0
#: resources of policies that are not about databases and tables
OTHER_RESOURCES = frozenset({"url", "hiveservice", "global"})
#: the resources of Ranger's Hive service definition
HIVE_RESOURCES = frozenset({"database", "table", "udf", "column"}) | OTHER_RESOURCES
_WILDCARDS = re.compile(r"[*?]")


class RangerPolicyError(ValueError):
    """A Ranger policy document waggle cannot read: the message names where (the file or URL), the policy and the
    field."""


@dataclass(frozen=True, slots=True)
class Names:
    """One resource of a policy: its values as one pattern (None: every name), excluded or not."""

    pattern: re.Pattern[str] | None
    excludes: bool = False
    #: the literal names it matches (no wildcard, not excluded), by which a source indexes it; None otherwise
    literal: frozenset[str] | None = None

    @property
    def every(self) -> bool:
        """Whether it matches every name."""
        return self.pattern is None and not self.excludes

    def match(self, name: str) -> bool:
        if self.pattern is None:
            return not self.excludes
        return (self.pattern.fullmatch(name) is not None) != self.excludes


#: every name
EVERY = Names(None)


@dataclass(frozen=True, slots=True)
class Item:
    """One policy item: who it names (privileges are the key it is filed under)."""

    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    any_user: bool = False  # {USER}
    owner: bool = False  # {OWNER}
    everyone: bool = False  # group public

    def matches(self, who: Caller, owner: str | None) -> bool:
        if self.everyone:
            return True
        user = who.user
        if user is not None and (self.any_user or user in self.users or (self.owner and owner == user)):
            return True
        return not self.groups.isdisjoint(who.groups)


#: a policy's items of one kind, by the privilege they name
ByPrivilege = Mapping[Privilege, tuple[Item, ...]]


@dataclass(frozen=True, slots=True)
class RangerPolicy:
    """One access policy, compiled."""

    #: how verdicts name it: ``ranger policy 12 'sales readers' (service hive)``
    rule: str
    priority: int
    #: its place in the document (the first of equals names a verdict)
    order: int
    databases: Names
    tables: Names
    #: whether it is about tables (not a ``udf`` policy)
    on_tables: bool
    #: whether it grants on whole tables (no ``column`` resource, or ``*``)
    whole_tables: bool
    #: whether it is about a database itself (every table of it, whole; or every udf of it)
    covers_database: bool
    deny_all_else: bool
    allow: ByPrivilege
    allow_exceptions: ByPrivilege
    deny: ByPrivilege
    deny_exceptions: ByPrivilege

    def verdict(self, privilege: Privilege, who: Caller, owner: str | None, allows_only: bool) -> bool | None:
        """What the policy says of ``privilege`` for ``who``: True, False, or None. ``allows_only``: only whether
        it allows (a policy narrower than what is asked about can show it, never hide it)."""
        if not allows_only and _any_match(self.deny, privilege, who, owner) and not _any_match(
                self.deny_exceptions, privilege, who, owner):
            return False
        if _any_match(self.allow, privilege, who, owner) and not _any_match(
                self.allow_exceptions, privilege, who, owner):
            return True
        return False if self.deny_all_else and not allows_only else None


def _any_match(items: ByPrivilege, privilege: Privilege, who: Caller, owner: str | None) -> bool:
    return any(item.matches(who, owner) for item in items.get(privilege, ()))


def read_policies(doc: Mapping[str, Any], service: str, where: str,
                  access: Mapping[str, frozenset[Privilege]]) -> tuple[int | None, list[RangerPolicy]]:
    """The policy version (the download's ``policyVersion``; None for an export) and the access policies of
    ``service`` in ``doc``, in their order; ``access`` maps Ranger's access types to privileges."""
    if not isinstance(doc, Mapping):
        raise RangerPolicyError(f"{where}: not a Ranger policy document (a JSON object)")
    raw = doc.get("policies")
    if not isinstance(raw, list):
        raise RangerPolicyError(f"{where}: 'policies' is missing or not a list")
    version: int | None = None
    if "serviceName" in doc:  # the plugin download: every policy is the service's
        if doc["serviceName"] != service:
            raise RangerPolicyError(f"{where}: the policies of service '{doc['serviceName']}', not '{service}'")
        version = _version(doc.get("policyVersion"), where)
        chosen = list(enumerate(raw))
    else:  # an export: the service's policies among every service's
        chosen = [(i, p) for i, p in enumerate(raw) if not isinstance(p, Mapping) or p.get("service") == service]
        found = sorted({str(p.get("service")) for p in raw if isinstance(p, Mapping)})
        if raw and not chosen:
            raise RangerPolicyError(f"{where}: no policy of service '{service}' (services: {', '.join(found)})")
    policies = []
    for index, policy in chosen:
        policies.extend(_policy(policy, service, where, index, access))
    return version, policies


def _version(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RangerPolicyError(f"{where}: policyVersion: not a number: {value!r}")
    return value


def _policy(raw: Any, service: str, where: str, order: int,
            access: Mapping[str, frozenset[Privilege]]) -> list[RangerPolicy]:
    """The policy's compiled resource sets (Ranger 2.5's ``additionalResources`` beside ``resources``); none for
    a policy that is not read."""
    at = f"{where}: policies[{order}]"
    if not isinstance(raw, Mapping):
        raise RangerPolicyError(f"{at}: not a JSON object")
    pid = raw.get("id")
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise RangerPolicyError(f"{at}: id: missing or not a number: {pid!r}")
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise RangerPolicyError(f"{at}: policy {pid}: name: not a string")
    at = f"{where}: policy {pid} '{name}'"
    field = _fields(raw, at)
    policy_type, priority = field("policyType", int, ACCESS_POLICY), field("policyPriority", int, 0)
    if not field("isEnabled", bool, True) or policy_type != ACCESS_POLICY or field("zoneName", str, ""):
        return []
    conditional = bool(field("conditions", list, []))
    items = {key: _items(field(key, list, []), f"{at}: {key}", access, drop_conditional)
             for key, drop_conditional in (("policyItems", True), ("allowExceptions", False),
                                           ("denyPolicyItems", False), ("denyExceptions", True))}
    sets = [field("resources", Mapping, {}), *field("additionalResources", list, [])]
    compiled = []
    for number, resources in enumerate(sets):
        here = f"{at}: additionalResources[{number - 1}]" if number else f"{at}: resources"
        if not isinstance(resources, Mapping):
            raise RangerPolicyError(f"{here}: not a JSON object")
        if OTHER_RESOURCES.intersection(resources):
            continue
        unknown = sorted(set(resources) - HIVE_RESOURCES)
        if unknown:
            raise RangerPolicyError(f"{here}: {', '.join(unknown)}: not a resource of Ranger's Hive service")
        names = {key: _names(value, f"{here}.{key}") for key, value in resources.items()}
        if "database" not in names:
            raise RangerPolicyError(f"{here}: no 'database'")
        udf, tables, whole = names.get("udf"), names.get("table", EVERY), names.get("column", EVERY).every
        compiled.append(RangerPolicy(
            rule=f"ranger policy {pid} '{name}' (service {service})", priority=priority, order=order,
            databases=names["database"], tables=tables, on_tables=udf is None, whole_tables=whole,
            covers_database=(udf.every if udf is not None else tables.every and whole),
            deny_all_else=field("isDenyAllElse", bool, False),
            allow={} if conditional else items["policyItems"], allow_exceptions=items["allowExceptions"],
            deny=items["denyPolicyItems"], deny_exceptions={} if conditional else items["denyExceptions"]))
    return compiled


def _fields(raw: Mapping[str, Any], at: str, sep: str = ": ") -> Callable[[str, type, Any], Any]:
    """A reader of the fields of ``raw`` (``at``: where it is, ``sep`` between that and a field's name): a field's
    value, checked to be of a type, or a default when absent."""

    def field(key: str, kind: type, default: Any) -> Any:
        value = raw.get(key)
        if value is None:
            return default
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise RangerPolicyError(f"{at}{sep}{key}: not a {_KINDS.get(kind, kind.__name__)}: {value!r}")
        return value

    return field


_KINDS = {int: "number", bool: "boolean (true or false)", str: "string", list: "list", Mapping: "JSON object"}


def _names(raw: Any, at: str) -> Names:
    if not isinstance(raw, Mapping):
        raise RangerPolicyError(f"{at}: not a JSON object")
    field = _fields(raw, at, ".")
    values = _strings(field("values", list, []), f"{at}.values")
    excludes = field("isExcludes", bool, False)
    if not values or matches_all(values):
        return Names(None, excludes)
    literal = None if excludes or any(_WILDCARDS.search(v) for v in values) else frozenset(v.lower() for v in values)
    return Names(compile_globs(values), excludes, literal)


def _strings(raw: Sequence[Any], at: str) -> list[str]:
    if not all(isinstance(v, str) for v in raw):
        raise RangerPolicyError(f"{at}: not a list of strings: {list(raw)!r}")
    return list(raw)


def _items(raw: list[Any], at: str, access: Mapping[str, frozenset[Privilege]],
           drop_conditional: bool) -> ByPrivilege:
    """The items, filed by privilege; ``drop_conditional``: items with conditions are left out (else read as if
    they had none), failing closed."""
    filed: dict[Privilege, list[Item]] = {}
    for index, entry in enumerate(raw):
        here = f"{at}[{index}]"
        if not isinstance(entry, Mapping):
            raise RangerPolicyError(f"{here}: not a JSON object")
        field = _fields(entry, here, ".")
        if drop_conditional and field("conditions", list, []):
            continue
        privileges: set[Privilege] = set()
        for number, grant in enumerate(field("accesses", list, [])):
            if not isinstance(grant, Mapping) or not isinstance(grant.get("type"), str):
                raise RangerPolicyError(f"{here}.accesses[{number}]: not an access with a 'type': {grant!r}")
            if _fields(grant, f"{here}.accesses[{number}]", ".")("isAllowed", bool, True):
                privileges |= access.get(grant["type"].lower(), frozenset())
        users = set(_strings(field("users", list, []), f"{here}.users"))
        groups = set(_strings(field("groups", list, []), f"{here}.groups"))
        _strings(field("roles", list, []), f"{here}.roles")
        item = Item(users=frozenset(users - {"{USER}", "{OWNER}"}), groups=frozenset(groups - {"public"}),
                    any_user="{USER}" in users, owner="{OWNER}" in users, everyone="public" in groups)
        for privilege in privileges:
            filed.setdefault(privilege, []).append(item)
    return {privilege: tuple(items) for privilege, items in filed.items()}
