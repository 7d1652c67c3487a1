"""A Ranger Hive service's policies as a source of grants (:class:`RangerSource`), from the JSON of Ranger admin's
plugin download (``ServicePolicies``: ``serviceName``, ``policyVersion``, ``policies``) or of its export
(``metaDataInfo``, ``policies`` of one or more services: those of the configured service are read). Pure:
:mod:`waggle.grants.ranger_source` reads the file or polls Ranger admin.

What is read, as Ranger's ``RangerDefaultPolicyEvaluator`` reads it, for the resources waggle knows:

* access policies only (``policyType`` 0 or absent), enabled ones; data masking, row filters and audit policies,
  and policies of a security zone (``zoneName``), are not grants here;
* resources ``database`` and ``table`` (``*`` and ``?`` patterns, case-insensitive, ``isExcludes``); a policy
  without ``table`` (nor ``udf``) covers every table of its databases; ``udf`` policies cover no table, and cover
  the database itself when their ``udf`` is ``*``; ``url``, ``hiveservice`` and ``global`` policies are not read;
* a ``column`` other than ``*`` makes a column policy: it shows its tables and databases (:meth:`~RangerSource.sees`)
  but grants no privilege on a whole table, and its denials hide nothing;
* items name ``users`` (``{USER}``: every named caller; ``{OWNER}``: the caller when it owns the object) and
  ``groups`` (``public``: every caller); ``roles`` are not resolved (an item's roles match nobody); user and group
  names are compared as they are; tokens in resource values are not replaced (such a value matches no name);
* items with ``conditions`` (or a policy with them) are read failing closed: such an allow item or deny
  exception matches nobody, such a deny item or allow exception matches as if it had none;
* per policy: a matching deny item denies unless a deny exception matches too; else a matching allow item allows
  unless an allow exception matches too; else ``isDenyAllElse`` denies; else the policy says nothing;
* across policies: the highest ``policyPriority`` (1 OVERRIDE over 0 NORMAL) with a say decides, a denial over an
  allowance; nothing says anything: :data:`~waggle.grants.verdict.NO_MATCH`, and waggle's default applies.

Ranger's access types, as waggle's privileges (:data:`ACCESS_PRIVILEGES`): ``select``/``read`` SELECT,
``update``/``write`` UPDATE, ``create``, ``drop``, ``alter`` themselves, ``index`` ALTER (an index changes its
table), ``all`` every privilege, ``repladmin``/``serviceadmin``/``refresh`` ADMIN; ``lock`` and ``tempudfadmin``
grant nothing (waggle's locks need SELECT or UPDATE, which Hive's own plugin asks beside ``lock``); unknown types
nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from waggle.config.kinds import Privilege
from waggle.grants.ranger_document import RangerPolicy, RangerPolicyError, read_policies
from waggle.grants.verdict import NO_MATCH, Caller, Verdict

__all__ = ["ACCESS_PRIVILEGES", "RangerPolicyError", "RangerSource"]

_S, _U, _C, _D, _A, _ADM = (Privilege.SELECT, Privilege.UPDATE, Privilege.CREATE, Privilege.DROP,
                            Privilege.ALTER, Privilege.ADMIN)
#: Ranger's Hive access types, as waggle's privileges (a type not here grants nothing)
ACCESS_PRIVILEGES: Mapping[str, frozenset[Privilege]] = {
    "select": frozenset({_S}), "read": frozenset({_S}), "update": frozenset({_U}), "write": frozenset({_U}),
    "create": frozenset({_C}), "drop": frozenset({_D}), "alter": frozenset({_A}), "index": frozenset({_A}),
    "all": frozenset(Privilege), "repladmin": frozenset({_ADM}), "serviceadmin": frozenset({_ADM}),
    "refresh": frozenset({_ADM}), "lock": frozenset(), "tempudfadmin": frozenset(),
}
#: how many decisions (and databases' candidate policies) a source remembers
MEMO_SIZE = 65536
_PRIVILEGES = tuple(Privilege)
_V = TypeVar("_V")


class RangerSource:
    """The access policies of one Ranger Hive service, as a :class:`~waggle.grants.verdict.GrantSource`.

    Policies are filed by the literal database names they list (those with patterns or excludes are kept apart and
    matched per database), and every answer is remembered (:data:`MEMO_SIZE` of each, the oldest forgotten
    first): a source is immutable, a new document makes a new source.
    """

    def __init__(self, policies: Sequence[RangerPolicy], service: str, where: str,
                 version: int | None = None) -> None:
        self.service = service
        #: the file or URL the policies came from (messages name it)
        self.where = where
        #: the download's ``policyVersion`` (None for an export)
        self.version = version
        self.policies = tuple(policies)
        named: dict[str, list[RangerPolicy]] = {}
        patterned = []
        for policy in self.policies:
            if policy.databases.literal is None:
                patterned.append(policy)
            for name in policy.databases.literal or ():
                named.setdefault(name, []).append(policy)
        self._named = {name: tuple(found) for name, found in named.items()}
        self._patterned = tuple(patterned)
        self._by_database: dict[str, tuple[RangerPolicy, ...]] = {}
        self._decisions: dict[tuple[Any, ...], Verdict] = {}
        self._sights: dict[tuple[Any, ...], Verdict] = {}

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], service: str, where: str = "ranger policies") -> RangerSource:
        """The source of a parsed document: Ranger admin's plugin download (``serviceName`` must be ``service``)
        or its export (the policies whose ``service`` is ``service``). Raises :class:`RangerPolicyError`, naming
        ``where``, the policy and the field, for a document it cannot read."""
        version, policies = read_policies(doc, service, where, ACCESS_PRIVILEGES)
        return cls(policies, service, where, version)

    def __len__(self) -> int:
        return len(self.policies)

    def __repr__(self) -> str:
        return f"RangerSource({self.service!r}, {len(self)} policies, version {self.version}, from {self.where})"

    def decide(self, who: Caller, db: str, table: str | None, privilege: Privilege,
               owner: str | None = None) -> Verdict:
        """What the policies say of ``privilege`` on the table (``table`` None: the database itself, where only
        policies on every table of it, whole, or on all its functions apply)."""
        key = (who, db, table, privilege, owner)
        known = self._decisions.get(key)
        if known is not None:
            return known
        candidates = self._on(db.lower())
        if table is None:
            said = [(p, p.verdict(privilege, who, owner, False)) for p in candidates if p.covers_database]
        else:
            name = table.lower()
            said = [(p, p.verdict(privilege, who, owner, False)) for p in candidates
                    if p.on_tables and p.whole_tables and p.tables.match(name)]
        return _remember(self._decisions, key, _combine(said))

    def sees(self, who: Caller, db: str, table: str | None) -> Verdict:
        """Ranger's ``_any`` access: allowed when some privilege is allowed on the table, or with ``table`` None on
        the database or any table of it. A policy narrower than the object (a column policy for a table, a
        policy on some tables for a database) can show it but not hide it."""
        key = (who, db, table)
        known = self._sights.get(key)
        if known is not None:
            return known
        candidates = self._on(db.lower())
        if table is None:
            scoped = [(p, not p.covers_database) for p in candidates]
        else:
            name = table.lower()
            scoped = [(p, not p.whole_tables) for p in candidates if p.on_tables and p.tables.match(name)]
        verdict = denied = NO_MATCH
        for privilege in _PRIVILEGES:
            said = _combine([(p, p.verdict(privilege, who, None, narrower)) for p, narrower in scoped])
            if said.allowed:
                verdict = said
                break
            if said.allowed is False and denied is NO_MATCH:
                denied = said
        else:
            verdict = denied
        return _remember(self._sights, key, verdict)

    def _on(self, db: str) -> tuple[RangerPolicy, ...]:
        """The policies whose databases include ``db``, in their order."""
        known = self._by_database.get(db)
        if known is None:
            found = self._named.get(db, ()) + tuple(p for p in self._patterned if p.databases.match(db))
            known = _remember(self._by_database, db, tuple(sorted(found, key=lambda p: p.order)))
        return known


def _combine(said: Iterable[tuple[RangerPolicy, bool | None]]) -> Verdict:
    """Policies' say together: the highest priority decides, a denial over an allowance, the first in order
    among equals names the verdict."""
    best: tuple[int, bool, int] | None = None
    verdict = NO_MATCH
    for policy, allowed in said:
        if allowed is None:
            continue
        rank = (policy.priority, not allowed, -policy.order)
        if best is None or rank > best:
            best, verdict = rank, Verdict(allowed, policy.rule)
    return verdict


def _remember(memo: dict[Any, _V], key: Hashable, value: _V) -> _V:
    if len(memo) >= MEMO_SIZE:
        memo.pop(next(iter(memo), None), None)
    memo[key] = value
    return value
