"""A caller's groups from an LDAP directory (``authorization.groups.source: ldap``), with the pure-Python ``ldap3``.

One lookup opens a connection (``ldap://`` or ``ldaps://``, optionally upgraded with StartTLS), binds (with
``bind-dn`` and the password read from ``bind-password-file`` at each lookup, so a rotated password is picked up;
anonymously without them), searches the group entries whose filter names the user (``{user}``: the user's short
name, ``{dn}``: the user's entry, found first with ``user-filter``), takes the values of ``group-attribute``, and
unbinds. Every value put into a filter is escaped (RFC 4515). Connecting, and each answer, is bounded by
``timeout-seconds`` (an answer's wait in whole seconds, as ldap3 takes it). Under gevent's monkey-patching ldap3's
sockets are cooperative. The password is never logged. A failure raises (an ``ldap3`` exception or an
:class:`OSError`): :class:`waggle.grants.groups.GroupResolver` decides what its callers get then.
"""

from __future__ import annotations

import math
import ssl
from pathlib import Path
from typing import Any

import ldap3
from ldap3.utils.conv import escape_filter_chars

from waggle.config.grants_model import LdapGroups


class LdapGroupSource:
    """The groups of a user, as one LDAP directory's group entries name them."""

    def __init__(self, config: LdapGroups) -> None:
        self.config = config
        self.timeout = config.timeout_seconds

    def describe(self) -> str:
        """How logs name this source (never with credentials)."""
        return f"ldap {self.config.url}"

    def lookup(self, user: str) -> frozenset[str]:
        """The user's group names, lower-cased; empty when the directory knows no such user (``{dn}``) or no
        group names them. Raises when the directory cannot be asked."""
        cfg = self.config
        conn = self._connect()
        try:
            values = {"{user}": escape_filter_chars(user)}
            if "{dn}" in cfg.group_filter:
                dn = self._user_dn(conn, user)
                if dn is None:
                    return frozenset()
                values["{dn}"] = escape_filter_chars(dn)
            found = self._search(conn, cfg.base, _fill(cfg.group_filter, values), cfg.group_attribute)
            return frozenset(str(value).lower() for entry in found for value in _values(entry, cfg.group_attribute))
        finally:
            conn.unbind()

    # -- one connection ------------------------------------------------------------------------------------
    def _tls(self) -> ldap3.Tls | None:
        """TLS settings for ``ldaps://``, StartTLS or a CA file: the certificate is always verified."""
        cfg = self.config
        if not (cfg.url.lower().startswith("ldaps://") or cfg.start_tls or cfg.ca_file):
            return None
        return ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=cfg.ca_file, version=ssl.PROTOCOL_TLS_CLIENT)

    def _connect(self) -> ldap3.Connection:
        """An open, bound connection (StartTLS first when asked)."""
        cfg = self.config
        password = _read_password(cfg.bind_password_file) if cfg.bind_dn else None
        # a Server of its own each time: ldap3's remembers an address that refused as unavailable for a while
        server = ldap3.Server(cfg.url, connect_timeout=cfg.timeout_seconds, get_info=ldap3.NONE, tls=self._tls())
        conn = ldap3.Connection(server, user=cfg.bind_dn, password=password,
                                authentication=ldap3.SIMPLE if cfg.bind_dn else ldap3.ANONYMOUS,
                                auto_bind=ldap3.AUTO_BIND_NONE, read_only=True, raise_exceptions=True,
                                receive_timeout=max(1, math.ceil(cfg.timeout_seconds)), auto_referrals=False)
        try:
            conn.open()
            if cfg.start_tls:
                conn.start_tls()
            conn.bind()
        except BaseException:
            conn.unbind()
            raise
        return conn

    def _user_dn(self, conn: ldap3.Connection, user: str) -> str | None:
        """The DN of the user's entry (``user-filter`` under ``user-base``), None when there is none."""
        cfg = self.config
        query = _fill(cfg.user_filter, {"{user}": escape_filter_chars(user)})
        found = self._search(conn, cfg.user_base or cfg.base, query, None)
        return str(found[0]["dn"]) if found else None

    def _search(self, conn: ldap3.Connection, base: str, query: str, attribute: str | None) -> list[dict[str, Any]]:
        """The entries found (``dn`` and ``attributes``), references left out."""
        conn.search(base, query, search_scope=ldap3.SUBTREE, attributes=[attribute] if attribute else [],
                    time_limit=max(1, round(self.timeout)))
        return [entry for entry in conn.response or [] if entry.get("type") == "searchResEntry"]


def _fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each placeholder replaced (by plain replacement: a filter's own braces stay)."""
    for key, value in values.items():
        template = template.replace(key, value)
    return template


def _values(entry: dict[str, Any], attribute: str) -> list[Any]:
    """The values of ``attribute`` in one entry (attribute names are case-insensitive)."""
    for name, value in (entry.get("attributes") or {}).items():
        if name.lower() == attribute.lower():
            return list(value) if isinstance(value, list | tuple) else [value]
    return []


def _read_password(path: str | None) -> str | None:
    """The bind password: the file's first line (a trailing newline is not part of it)."""
    if path is None:
        return None
    text = Path(path).read_text()
    return text.splitlines()[0] if text else ""
