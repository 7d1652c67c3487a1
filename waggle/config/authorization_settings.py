"""Every key of the server file's ``authorization`` block (and of a policy file), declared once like the server
file's (:mod:`waggle.config.settings`): read by :mod:`waggle.config.authorization`, listed in
docs/reference/configuration.md from here (``python -m waggle.docs``). Keys are relative to ``authorization``."""

from __future__ import annotations

from waggle.config.kinds import Effect, GroupSource, Privilege
from waggle.config.registry import REQUIRED, Section
from waggle.config.validators import (
    Validator,
    age_seconds,
    boolean,
    choice,
    choices,
    label,
    names,
    optional_string,
    positive_number,
    string,
)


def _privileges() -> Validator[tuple[Privilege, ...]]:
    """Privileges by name, ``all`` for every one."""
    named = choices(Privilege, lambda p: str(p.value))

    def convert(v: object) -> tuple[Privilege, ...]:
        items = [x.strip() for x in v.split(",")] if isinstance(v, str) else v
        if isinstance(items, list) and any(str(x).strip().lower() == "all" for x in items):
            return tuple(Privilege)
        return named.convert(v)

    return Validator(named.expect + ", all", convert)


# -- the server file's authorization block -------------------------------------------------------------------------
AUTHORIZATION = Section("authorization")


class Authz:
    """Keys of ``authorization`` (documented in a table of their own)."""

    TRUST_SET_UGI = AUTHORIZATION.add(
        "trust-set-ugi", False, boolean(),
        "Whether the user a client names with `set_ugi` counts as the caller, when the connection proved no one "
        "(no Kerberos, no token). Only for an estate without Kerberos: anyone can name any user. `waggle check` "
        "warns about it.",
    )
    DEFAULT = AUTHORIZATION.add(
        "default", Effect.DENY, choice(Effect),
        "What applies when no rule (and no Ranger policy) names the caller, object and privilege: `deny` or "
        "`allow`.",
    )
    RULES = AUTHORIZATION.add(
        "rules", (), None,
        "The grants: a list with the keys of the next table. Of the rules that apply, a deny wins.", "[] (none)",
    )
    POLICY_FILE = AUTHORIZATION.add(
        "policy-file", None, optional_string(),
        "A YAML file of more rules (`rules:`, each with the keys of the next table), kept apart from the server "
        "file (a Kubernetes ConfigMap, say); reread at each reload and when it changes.",
    )
    AUDIT_WRITES = AUTHORIZATION.add(
        "audit-writes", False, boolean(),
        "An `access.allowed` audit line for every write that is allowed, besides the `access.refused` line of "
        "every refusal.",
    )
    GROUPS_SOURCE = AUTHORIZATION.add(
        "groups.source", GroupSource.NONE, choice(GroupSource),
        "Where a caller's groups come from: `none`, `file` (`groups.file`), `nss` (the operating system: "
        "/etc/group, sssd) or `ldap` (`groups.ldap`).", "`file` with `groups.file`, `ldap` with `groups.ldap`, "
        "else `none`",
    )
    GROUPS_FILE = AUTHORIZATION.add(
        "groups.file", None, optional_string(),
        "A groups file: `group: user, user` lines, or /etc/group's `group:x:gid:user,user`; reread when it changes.",
    )
    GROUPS_TTL = AUTHORIZATION.add(
        "groups.ttl", 300, age_seconds(),
        "How long a user's groups are trusted (`300`, `5m`). They are refreshed in the background before then, so "
        "no call waits for the directory; a directory that cannot be reached changes nothing until the TTL runs "
        "out, and then the user has no groups.",
    )
    LDAP_URL = AUTHORIZATION.add("groups.ldap.url", None, optional_string(),
                                 "The directory: `ldap://host:389` or `ldaps://host:636`.", REQUIRED)
    LDAP_BASE = AUTHORIZATION.add("groups.ldap.base", "", string(), "Where groups are searched "
                                  "(`ou=groups,dc=example,dc=com`).", REQUIRED)
    LDAP_GROUP_FILTER = AUTHORIZATION.add(
        "groups.ldap.group-filter", "(&(objectClass=posixGroup)(memberUid={user}))", string(),
        "The filter of a user's groups: `{user}` is the user's short name, `{dn}` the user's entry (found with "
        "`groups.ldap.user-filter`), e.g. `(&(objectClass=groupOfNames)(member={dn}))`.",
    )
    LDAP_GROUP_ATTRIBUTE = AUTHORIZATION.add("groups.ldap.group-attribute", "cn", string(),
                                             "The attribute of a group entry that holds its name.")
    LDAP_USER_BASE = AUTHORIZATION.add("groups.ldap.user-base", None, optional_string(),
                                       "Where users are searched, for `{dn}`.", "`groups.ldap.base`")
    LDAP_USER_FILTER = AUTHORIZATION.add("groups.ldap.user-filter", "(uid={user})", string(),
                                         "The filter of a user's own entry, for `{dn}`.")
    LDAP_BIND_DN = AUTHORIZATION.add("groups.ldap.bind-dn", None, optional_string(),
                                     "Who waggle binds as; anonymous when not set.")
    LDAP_BIND_PASSWORD_FILE = AUTHORIZATION.add(
        "groups.ldap.bind-password-file", None, optional_string(),
        "File holding the bind password (one line; a Kubernetes Secret); never logged.",
    )
    LDAP_START_TLS = AUTHORIZATION.add("groups.ldap.start-tls", False, boolean(),
                                       "Upgrade an `ldap://` connection with StartTLS.")
    LDAP_CA_FILE = AUTHORIZATION.add("groups.ldap.ca-file", None, optional_string(),
                                     "PEM CA bundle that verifies the directory's certificate.", "the system's")
    LDAP_TIMEOUT = AUTHORIZATION.add("groups.ldap.timeout-seconds", 5.0, positive_number(),
                                     "The longest one exchange with the directory may take.")
    RANGER_SERVICE = AUTHORIZATION.add(
        "ranger.service", "hive", label(),
        "The Ranger Hive service whose policies apply (`ranger.policy-file` or `ranger.url`): its policies join "
        "the rules, and a deny in either wins.",
    )
    RANGER_POLICY_FILE = AUTHORIZATION.add(
        "ranger.policy-file", None, optional_string(),
        "Ranger policies in Ranger's own JSON: an export of Ranger admin, or its plugins' policy download; "
        "reread when it changes.",
    )
    RANGER_URL = AUTHORIZATION.add(
        "ranger.url", None, optional_string(),
        "Ranger admin (`http://ranger:6080`): its policy download for `ranger.service` is polled as Ranger's own "
        "plugins poll it (`lastKnownVersion`, ETag).",
    )
    RANGER_POLL = AUTHORIZATION.add("ranger.poll-seconds", 30.0, positive_number(),
                                    "How often Ranger admin is asked for new policies.")
    RANGER_CACHE_FILE = AUTHORIZATION.add(
        "ranger.cache-file", None, optional_string(),
        "Where the last policies downloaded are kept, so that a restart while Ranger admin is down has them.",
    )
    RANGER_CA_FILE = AUTHORIZATION.add("ranger.ca-file", None, optional_string(),
                                       "PEM CA bundle that verifies an `https://` Ranger admin.", "the system's")


# -- one rule -----------------------------------------------------------------------------------------------------
GRANT_RULE = Section("authorization.rules entry")


class Rule:
    """Keys of each rule of ``authorization.rules`` (and of a policy file's ``rules``)."""

    NAME = GRANT_RULE.add("name", None, optional_string(),
                          "What audit lines, refusals and `waggle access` call the rule.", "its place in the file")
    USERS = GRANT_RULE.add("users", (), names(),
                           "Users the rule applies to (short names: Kerberos principals through `auth_to_local`); "
                           "`*`: everyone.", "[]")
    GROUPS = GRANT_RULE.add("groups", (), names(),
                            "Groups the rule applies to (`authorization.groups`); `*` or `public`: everyone.", "[]")
    DATABASES = GRANT_RULE.add("databases", ("*",), names(),
                               "Databases, in waggle's names (with a member's prefix); `*` and `?` match.", "[*]")
    TABLES = GRANT_RULE.add("tables", ("*",), names(), "Tables of those databases; `*` and `?` match.", "[*]")
    PRIVILEGES = GRANT_RULE.add(
        "privileges", (), _privileges(),
        "What the rule allows or denies: `select`, `update`, `create`, `drop`, `alter`, `admin`; `all` for every "
        "one. Each method's privilege is in docs/supported-methods.md.", REQUIRED,
    )
    EFFECT = GRANT_RULE.add("effect", Effect.ALLOW, choice(Effect), "`allow` or `deny`; a deny wins.")


AUTHORIZATION_SETTINGS = AUTHORIZATION.settings
GRANT_RULE_SETTINGS = GRANT_RULE.settings
