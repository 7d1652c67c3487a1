"""The grants in force: every source (waggle's rules, Ranger's policies) and the default, as one decision. Pure.

Across sources a deny wins, then an allow; when no source says anything, ``authorization.default`` decides. Names
are waggle's, compared lower-cased. Decisions are remembered per caller, object and privilege (a policy is
immutable: new grants make a new policy), so a call pays for its rules once.
"""

from __future__ import annotations

from collections.abc import Sequence

from waggle.config.kinds import Effect, Privilege
from waggle.grants.rules import RuleSource
from waggle.grants.verdict import Caller, GrantSource, Verdict

#: the rule named when nothing else decided
DEFAULT_RULE = "authorization.default"
#: how many decisions are remembered before they are worked out afresh
_REMEMBERED = 65536


class Policy:
    """The grants of one configuration (and one version of Ranger's policies)."""

    def __init__(self, sources: Sequence[GrantSource], default: Effect = Effect.DENY) -> None:
        self.sources = tuple(sources)
        self.default = default
        self.default_allows = default is Effect.ALLOW
        self._default = Verdict(self.default_allows, f"{DEFAULT_RULE} ({default.value})")
        self._decided: dict[tuple[Caller, str, str | None, Privilege, str | None], Verdict] = {}
        self._seen: dict[tuple[Caller, str, str | None], Verdict] = {}
        self._whole: dict[tuple[Caller, str], bool | None] = {}
        self._rules_only = all(isinstance(s, RuleSource) for s in self.sources)

    def decide(self, who: Caller, db: str, table: str | None, privilege: Privilege,
               owner: str | None = None) -> Verdict:
        """Whether ``who`` has ``privilege`` on ``db`` (``table`` None) or ``db.table``; ``allowed`` is never
        None, and ``rule`` names what decided."""
        key = (who, db.lower(), table.lower() if table is not None else None, privilege, owner)
        verdict = self._decided.get(key)
        if verdict is None:
            verdict = self._combine([s.decide(who, key[1], key[2], privilege, owner) for s in self.sources])
            if len(self._decided) >= _REMEMBERED:
                self._decided.clear()
            self._decided[key] = verdict
        return verdict

    def sees(self, who: Caller, db: str, table: str | None = None) -> Verdict:
        """Whether ``who`` may see ``db`` (any privilege on it or on a table of it) or ``db.table``."""
        key = (who, db.lower(), table.lower() if table is not None else None)
        verdict = self._seen.get(key)
        if verdict is None:
            verdict = self._combine([s.sees(who, key[1], key[2]) for s in self.sources])
            if len(self._seen) >= _REMEMBERED:
                self._seen.clear()
            self._seen[key] = verdict
        return verdict

    def visible_databases(self, who: Caller, names: Sequence[str]) -> list[str]:
        """The databases of a listing ``who`` may see, in their order."""
        return [n for n in names if self.sees(who, n).allowed]

    def whole_database(self, who: Caller, db: str) -> bool | None:
        """True when ``who`` sees every table of ``db``, False when none, None when it depends on the table: a
        listing of the database is answered as it is, or empty, without a look at it."""
        key = (who, db.lower())
        if key in self._whole:
            return self._whole[key]
        whole = None
        if self._rules_only:
            if not self.sources:
                whole = self.default_allows
            elif len(self.sources) == 1:
                source = self.sources[0]
                assert isinstance(source, RuleSource)
                whole = source.whole_database(who, key[1], self.default_allows)
        if len(self._whole) >= _REMEMBERED:
            self._whole.clear()
        self._whole[key] = whole
        return whole

    def visible_tables(self, who: Caller, db: str, names: Sequence[str]) -> list[str]:
        """The tables of ``db`` in a listing that ``who`` may see, in their order."""
        if not names:
            return []
        whole = self.whole_database(who, db)
        if whole is not None:
            return list(names) if whole else []
        db = db.lower()
        if len(self.sources) == 1 and self._rules_only:
            source = self.sources[0]
            assert isinstance(source, RuleSource)
            text = "\n" + "\n".join(names) + "\n"
            lowered = text.lower()
            if lowered == text:  # Hive's names are lower-case already
                return source.visible_tables(who, db, names, self.default_allows, text)
            low = lowered[1:-1].split("\n")
            kept = set(source.visible_tables(who, db, low, self.default_allows, lowered))
            return [n for n, n_low in zip(names, low, strict=True) if n_low in kept]
        return [n for n in names if self.sees(who, db, n).allowed]

    def _combine(self, verdicts: list[Verdict]) -> Verdict:
        allowed = None
        for verdict in verdicts:
            if verdict.allowed is False:
                return verdict
            if verdict.allowed:
                allowed = allowed or verdict
        return allowed if allowed is not None else self._default
