"""Kerberos principals and Hadoop's ``hadoop.security.auth_to_local`` mapping to short user names.

Hive and Hadoop name a Kerberos user by its short name (``alice`` for ``alice@EXAMPLE.COM``, ``hdfs`` for
``nn/host1@EXAMPLE.COM``), derived by the cluster's ``auth_to_local`` rules: a token's renewer, a proxy user's
real user and authorization checks all use short names. :class:`AuthToLocal` applies those rules as Hadoop's
``KerberosName`` does (the ``hadoop`` rule mechanism); :func:`expand_host` resolves the ``_HOST`` placeholder
of a service principal as Hadoop's ``SecurityUtil.getServerPrincipal`` does.

Rule regexes are Java regexes run with Python's :mod:`re`; the two agree on the syntax rules use in practice
(classes, anchors, groups, quantifiers); Java-only constructs such as ``\\p{Lower}`` are refused when parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PRINCIPAL = re.compile(r"([^/@]+)(?:/([^/@]+))?(?:@([^/@]+))?")
_RULE = re.compile(
    r"\s*((DEFAULT)|(RULE:\[(\d*):([^\]]*)\](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?))/?(L)?"
)  # the grammar of Hadoop's KerberosName.ruleParser
_NON_SIMPLE = re.compile(r"[/@]")


class PrincipalError(ValueError):
    """A malformed principal or ``auth_to_local`` rule."""


class RuleError(PrincipalError):
    """An ``auth_to_local`` rule that does not parse; the message names the rule."""


class NoMatchingRule(PrincipalError):
    """No ``auth_to_local`` rule maps the principal to a simple short name."""


@dataclass(frozen=True)
class Principal:
    """A Kerberos principal ``service[/host][@REALM]`` (for users, ``service`` is the user's primary name)."""

    service: str
    host: str | None = None
    realm: str | None = None

    @classmethod
    def parse(cls, text: str) -> Principal:
        match = _PRINCIPAL.fullmatch(text)
        if not match:
            raise PrincipalError(f"malformed Kerberos principal {text!r}: expected primary[/instance][@REALM]")
        return cls(match.group(1), match.group(2), match.group(3))

    def __str__(self) -> str:
        host = f"/{self.host}" if self.host is not None else ""
        realm = f"@{self.realm}" if self.realm is not None else ""
        return f"{self.service}{host}{realm}"


@dataclass(frozen=True)
class _Rule:
    text: str
    is_default: bool
    components: int = 0
    fmt: tuple[str | int, ...] = ()
    match: re.Pattern[str] | None = None
    from_pattern: re.Pattern[str] | None = None
    to: tuple[str | int | tuple[str], ...] = ()
    repeat: bool = False
    lower: bool = False

    def apply(self, realm: str, params: list[str], default_realm: str) -> str | None:
        result: str | None = None
        if self.is_default:
            if realm == default_realm:
                result = params[0]
        elif len(params) == self.components:
            values = [realm, *params]
            base = "".join(part if isinstance(part, str) else values[part] for part in self.fmt)
            if self.match is None or self.match.fullmatch(base):
                result = base if self.from_pattern is None else self._substitute(base)
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"non-simple name {result!r} after auth_to_local rule {self.text}")
        if result is not None and self.lower:
            result = result.lower()
        return result

    def _substitute(self, base: str) -> str:
        assert self.from_pattern is not None

        def expand(m: re.Match[str]) -> str:
            out = []
            for part in self.to:
                if isinstance(part, str):
                    out.append(part)
                else:
                    out.append(m.group(part if isinstance(part, int) else part[0]) or "")
            return "".join(out)

        return self.from_pattern.sub(expand, base, count=0 if self.repeat else 1)


def _java_regex(text: str, rule: str) -> re.Pattern[str]:
    if re.search(r"\\[pPQEGZ]|\(\?<[a-zA-Z]|\(\?[a-zA-Z]*d", text):
        raise RuleError(f"auth_to_local rule {rule}: regex {text!r} uses Java-only syntax")
    try:
        return re.compile(text)
    except re.error as exc:
        raise RuleError(f"auth_to_local rule {rule}: bad regex {text!r}: {exc}") from None


def _parse_format(fmt: str, components: int, rule: str) -> tuple[str | int, ...]:
    """``$0`` is the realm, ``$1``.. the components (Hadoop's ``Rule.replaceParameters``)."""
    parts: list[str | int] = []
    for literal, dollar, digits in re.findall(r"([^$]*)(\$?)(\d*)", fmt):
        if literal:
            parts.append(literal)
        if dollar:
            if not digits:
                raise RuleError(f"auth_to_local rule {rule}: '$' without a component number in {fmt!r}")
            index = int(digits)
            if index > components:
                raise RuleError(f"auth_to_local rule {rule}: ${index} is outside the valid range 0 to {components}")
            parts.append(index)
    return tuple(parts)


def _parse_replacement(to: str, pattern: re.Pattern[str], rule: str) -> tuple[str | int | tuple[str], ...]:
    """A Java ``Matcher`` replacement: ``$n`` and ``${name}`` are groups, a backslash quotes the next character."""
    parts: list[str | int | tuple[str]] = []
    literal: list[str] = []
    i = 0
    while i < len(to):
        c = to[i]
        if c == "\\":
            if i + 1 >= len(to):
                raise RuleError(f"auth_to_local rule {rule}: replacement {to!r} ends with a backslash")
            literal.append(to[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        if literal:
            parts.append("".join(literal))
            literal = []
        if to[i + 1 : i + 2] == "{":
            close = to.find("}", i)
            name = to[i + 2 : close] if close > 0 else ""
            if not name or name not in pattern.groupindex:
                raise RuleError(f"auth_to_local rule {rule}: no group named {name!r} in the replacement {to!r}")
            parts.append((name,))
            i = close + 1
            continue
        if not to[i + 1 : i + 2].isdigit():
            raise RuleError(f"auth_to_local rule {rule}: illegal group reference in the replacement {to!r}")
        group = int(to[i + 1])
        i += 2
        while i < len(to) and to[i].isdigit() and group * 10 + int(to[i]) <= pattern.groups:
            group = group * 10 + int(to[i])
            i += 1
        if group > pattern.groups:
            raise RuleError(f"auth_to_local rule {rule}: no group {group} in the replacement {to!r}")
        parts.append(group)
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


def _parse_rules(rules_text: str) -> list[_Rule]:
    rules: list[_Rule] = []
    remaining = rules_text.strip()
    while remaining:
        m = _RULE.match(remaining)
        if not m or not m.group(0).strip():
            bad = remaining.split(None, 1)[0]
            after = f" (after {rules[-1].text})" if rules else ""
            raise RuleError(f"invalid auth_to_local rule {bad!r}{after}")
        text = m.group(0).strip()
        remaining = remaining[m.end() :].strip()
        lower = m.group(12) == "L"
        if m.group(2):
            rules.append(_Rule(text, is_default=True, lower=lower))
            continue
        if not m.group(4):
            raise RuleError(f"auth_to_local rule {text}: missing the number of components")
        components = int(m.group(4))
        match = _java_regex(m.group(7), text) if m.group(6) is not None else None
        from_pattern = _java_regex(m.group(9), text) if m.group(8) is not None else None
        to = _parse_replacement(m.group(10), from_pattern, text) if from_pattern is not None else ()
        rules.append(
            _Rule(
                text,
                is_default=False,
                components=components,
                fmt=_parse_format(m.group(5), components, text),
                match=match,
                from_pattern=from_pattern,
                to=to,
                repeat=m.group(11) == "g",
                lower=lower,
            )
        )
    return rules


class AuthToLocal:
    """Hadoop's ``hadoop.security.auth_to_local`` rules, applied in order by :meth:`short_name`.

    ``RULE:[n:format](regex)s/pattern/replacement/g`` applies to principals of ``n`` components: ``format``
    builds a string from ``$0`` (realm), ``$1``, ``$2`` (components); if it fully matches ``regex``, the sed
    substitution (all matches with ``g``) gives the short name; a trailing ``/L`` lower-cases it. ``DEFAULT``
    maps a principal of ``default_realm`` to its first component.
    """

    def __init__(self, rules_text: str, default_realm: str) -> None:
        self.rules_text = rules_text
        self.default_realm = default_realm
        self._rules = _parse_rules(rules_text)

    def __repr__(self) -> str:
        return f"AuthToLocal({[r.text for r in self._rules]!r}, default_realm={self.default_realm!r})"

    def short_name(self, principal: Principal | str) -> str:
        """The short name of a principal; :class:`NoMatchingRule` if no rule gives a simple name."""
        p = Principal.parse(principal) if isinstance(principal, str) else principal
        if p.host is None:
            if p.realm is None:
                return p.service
            params = [p.service]
        else:
            params = [p.service, p.host]
        realm = p.realm if p.realm is not None else ""
        for rule in self._rules:
            result = rule.apply(realm, params, self.default_realm)
            if result is not None:
                return result
        raise NoMatchingRule(f"no auth_to_local rule applies to {p}")
