"""The values every source of grants speaks: who asks (:class:`Caller`), what a source answers (:class:`Verdict`),
and the interface of a source (:class:`GrantSource`). Pure."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from waggle.config.kinds import Privilege


class Caller(NamedTuple):
    """Who a call is from, as grants see it: the short user name (None: a connection that proved nothing and gave
    no trusted ``set_ugi``), and the user's groups (from ``authorization.groups``)."""

    user: str | None
    groups: frozenset[str] = frozenset()

    def describe(self) -> str:
        who = f"user '{self.user}'" if self.user else "an anonymous caller"
        return f"{who} (groups: {', '.join(sorted(self.groups)) or 'none'})"


class Verdict(NamedTuple):
    """A source's answer: ``allowed`` True or False, or None when nothing of the source applies; ``rule`` names
    what decided (``server.yml: authorization.rules[2] 'analysts read sales'``, ``ranger policy 12 'sales'``,
    ``authorization.default``)."""

    allowed: bool | None
    rule: str


#: nothing of a source applies
NO_MATCH = Verdict(None, "")


class GrantSource(Protocol):
    """One source of grants: waggle's rules (:mod:`waggle.grants.rules`) or Ranger's policies
    (:mod:`waggle.grants.ranger`).

    Names are waggle's (a prefixed member's databases with their prefix), lower-cased by the caller. ``table``
    None asks about the database itself (creating, dropping or altering it: only grants that cover every table of
    the database apply, a table pattern ``*``). ``owner``: the object's owner when the call says it (Ranger's
    ``{OWNER}``), else None.
    """

    def decide(self, who: Caller, db: str, table: str | None, privilege: Privilege,
               owner: str | None = None) -> Verdict:
        """Whether ``who`` has ``privilege`` on the database or table."""
        ...

    def sees(self, who: Caller, db: str, table: str | None) -> Verdict:
        """Whether ``who`` may see the table (any privilege on it), or with ``table`` None the database (any
        privilege on it or on any of its tables): what listings keep and what a direct read needs."""
        ...
