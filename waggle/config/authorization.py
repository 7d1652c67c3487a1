"""``authorization`` of the server file (and the rules of its ``policy-file``), read into
:class:`~waggle.config.grants_model.Authorization`. Every problem names the file, the key
(``authorization.rules[2].privileges[0]``) and the value. Absent: None, and grants are off."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from waggle.config.authorization_settings import AUTHORIZATION, GRANT_RULE
from waggle.config.authorization_settings import Authz as Z
from waggle.config.authorization_settings import Rule as R
from waggle.config.grants_model import Authorization, GrantRule, GroupsConfig, LdapGroups, RangerConfig
from waggle.config.kinds import GroupSource
from waggle.config.reader import MISSING, Reader
from waggle.config.registry import Section

#: warns about the keys of a mapping that a section does not declare (the loader's)
Unknown = Callable[[Reader, Section, str], None]


def parse_authorization(r: Reader, unknown: Unknown, warnings: list[str], kerberos: bool) -> Authorization | None:
    """The grants of the server file ``r`` reads (None: no ``authorization`` block); problems go to
    ``r.problems``, what a reader should know to ``warnings``. ``kerberos``: whether the Thrift port asks for
    Kerberos (then ``trust-set-ugi`` is not needed, and said so)."""
    block = r.raw("authorization")
    if block is MISSING or block is None:
        return None
    if not isinstance(block, Mapping):
        r.fail("authorization", block, "expected a map (trust-set-ugi, default, rules, policy-file, groups, ranger)")
        return None
    a = Reader(r.file, block, r.path("authorization."), r.problems)
    unknown(a, AUTHORIZATION, "authorization")
    rules = rules_of(a, unknown)
    policy_file = a.get(Z.POLICY_FILE)
    if policy_file:
        rules += policy_rules(policy_file, r.problems, unknown)
    out = Authorization(trust_set_ugi=a.get(Z.TRUST_SET_UGI), default=a.get(Z.DEFAULT), rules=rules,
                        policy_file=policy_file, groups=_groups(a), ranger=_ranger(a),
                        audit_writes=a.get(Z.AUDIT_WRITES))
    if out.trust_set_ugi:
        where = f"{r.file}: key '{a.path(Z.TRUST_SET_UGI.key)}'"
        warnings.append(f"{where}: the user a client names with set_ugi decides its grants, and anyone can name "
                        f"any user{' (Kerberos callers are not affected)' if kerberos else ''}: meant only for an "
                        f"estate without Kerberos")
    return out


def rules_of(a: Reader, unknown: Unknown) -> tuple[GrantRule, ...]:
    """The rules of the mapping ``a`` reads (its ``rules`` list)."""
    out = []
    for i, er in enumerate(a.entries(Z.RULES.key, "a rule: a map with users or groups, databases, tables, "
                                                  "privileges and effect", "rules")):
        unknown(er, GRANT_RULE, "authorization rule")
        rule = _rule(er, i)
        if rule is not None:
            out.append(rule)
    return tuple(out)


def policy_rules(path: str, problems: list[str], unknown: Unknown) -> tuple[GrantRule, ...]:
    """The rules of a policy file (``rules:``), whose problems name that file."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        problems.append(f"{path}: cannot read the policy file (authorization.policy-file): {exc.strerror or exc}")
        return ()
    except yaml.YAMLError as exc:
        problems.append(f"{path}: not valid YAML: {exc}")
        return ()
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        problems.append(f"{path}: expected a map with 'rules', got {type(data).__name__}")
        return ()
    p = Reader(path, data, "", problems)
    for key in data:
        if key != R_RULES:
            problems.append(f"{path}: key '{key}' is not known in a policy file (it holds 'rules')")
    return rules_of(p, unknown)


R_RULES = Z.RULES.key


def _rule(er: Reader, index: int) -> GrantRule | None:
    before = len(er.problems)
    if not er.given(R.PRIVILEGES.key):
        er.require(R.PRIVILEGES.key)
    users, groups = er.get(R.USERS), er.get(R.GROUPS)
    if not users and not groups:
        er.problems.append(f"{er.file}: rule '{er.prefix.rstrip('.')}' names no user and no group (use users: "
                           f"['*'] for everyone)")
    privileges = er.get(R.PRIVILEGES)
    name = er.get(R.NAME)
    shown = f"{er.file}: {er.prefix.rstrip('.')}" + (f" '{name}'" if name else "")
    if len(er.problems) != before:
        return None
    return GrantRule(shown, tuple(u.lower() for u in users), tuple(g.lower() for g in groups),
                     tuple(d.lower() for d in er.get(R.DATABASES)), tuple(t.lower() for t in er.get(R.TABLES)),
                     frozenset(privileges), er.get(R.EFFECT))


def _groups(a: Reader) -> GroupsConfig:
    file = a.get(Z.GROUPS_FILE)
    ldap = _ldap(a) if a.given("groups.ldap") else None
    inferred = GroupSource.FILE if file else GroupSource.LDAP if ldap is not None else GroupSource.NONE
    source = a.get(Z.GROUPS_SOURCE, inferred)
    if source is GroupSource.FILE and not file:
        a.require(Z.GROUPS_FILE.key, " with groups.source: file")
    if source is GroupSource.LDAP and ldap is None:
        a.require("groups.ldap", " with groups.source: ldap")
    ttl = a.get(Z.GROUPS_TTL)
    return GroupsConfig(source, file, float(ttl if ttl is not None else 0), ldap)


def _ldap(a: Reader) -> LdapGroups | None:
    before = len(a.problems)
    url = a.get(Z.LDAP_URL)
    if not url:
        a.require(Z.LDAP_URL.key)
    elif not url.startswith(("ldap://", "ldaps://")):
        a.fail(Z.LDAP_URL.key, url, "expected ldap://host:port or ldaps://host:port")
    base = a.get(Z.LDAP_BASE)
    if not base:
        a.require(Z.LDAP_BASE.key)
    group_filter = a.get(Z.LDAP_GROUP_FILTER)
    if "{user}" not in group_filter and "{dn}" not in group_filter:
        a.fail(Z.LDAP_GROUP_FILTER.key, group_filter, "the filter names neither {user} nor {dn}")
    if len(a.problems) != before or not url:
        return None
    return LdapGroups(url=url, base=base, group_filter=group_filter, group_attribute=a.get(Z.LDAP_GROUP_ATTRIBUTE),
                      user_base=a.get(Z.LDAP_USER_BASE), user_filter=a.get(Z.LDAP_USER_FILTER),
                      bind_dn=a.get(Z.LDAP_BIND_DN), bind_password_file=a.get(Z.LDAP_BIND_PASSWORD_FILE),
                      start_tls=a.get(Z.LDAP_START_TLS), ca_file=a.get(Z.LDAP_CA_FILE),
                      timeout_seconds=a.get(Z.LDAP_TIMEOUT))


def _ranger(a: Reader) -> RangerConfig | None:
    if not a.given("ranger"):
        return None
    file, url = a.get(Z.RANGER_POLICY_FILE), a.get(Z.RANGER_URL)
    if bool(file) == bool(url):
        a.fail("ranger", a.raw("ranger"), "give one of ranger.policy-file and ranger.url")
    if url and not url.startswith(("http://", "https://")):
        a.fail(Z.RANGER_URL.key, url, "expected http://host:port or https://host:port")
    return RangerConfig(service=a.get(Z.RANGER_SERVICE), policy_file=file, url=url,
                        poll_seconds=a.get(Z.RANGER_POLL), cache_file=a.get(Z.RANGER_CACHE_FILE),
                        ca_file=a.get(Z.RANGER_CA_FILE))
