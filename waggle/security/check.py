"""What ``waggle check`` validates about Kerberos: keytabs, principals, the token-signing key and krb5.conf.

Every problem names the file, the key and the value, as configuration errors do. None of them shows a key.
Nothing here talks to a KDC: a keytab is read and parsed, and it must hold the principal.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from waggle.config.model import WaggleConfig
from waggle.security.principals import Principal, PrincipalError
from waggle.security.tokens import TokenError, secrets_from_file

_PROPS = "configuration-properties"
KRB5_CONF_DEFAULT = "/etc/krb5.conf"


class KeytabError(ValueError):
    pass


def keytab_principals(path: str) -> list[str]:
    """The principals a keytab file holds keys for (MIT's format, versions 0x0501 and 0x0502)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise KeytabError(f"cannot read it: {exc.strerror or exc}") from None
    if len(data) < 2 or data[0] != 5 or data[1] not in (1, 2):
        raise KeytabError("not a Kerberos keytab (it does not start with 0x0501 or 0x0502)")
    big = data[1] == 2
    i16, i32 = (">h", ">i") if big else ("=h", "=i")
    pos, found = 2, []
    try:
        while pos + 4 <= len(data):
            (size,) = struct.unpack_from(i32, data, pos)
            pos += 4
            if size <= 0:  # a hole left by a deleted entry
                pos += -size
                continue
            entry, pos = data[pos:pos + size], pos + size
            (count,) = struct.unpack_from(i16, entry, 0)
            at = 2
            parts = []
            for _ in range(count + (1 if big else 0)):  # the realm, then each component (0x0501 counts the realm)
                (n,) = struct.unpack_from(">H" if big else "=H", entry, at)
                parts.append(entry[at + 2:at + 2 + n].decode("utf-8", "replace"))
                at += 2 + n
            realm, names = parts[0], parts[1:]
            name = f"{'/'.join(names)}@{realm}"
            if name not in found:
                found.append(name)
    except struct.error:
        raise KeytabError("truncated or corrupt keytab") from None
    return found


def _where(file: str | None, key: str, value: object) -> str:
    return f"{file or '(server defaults)'}: key '{key}': invalid value {value!r}"


def kerberos_problems(config: WaggleConfig) -> list[str]:
    problems: list[str] = []
    kerberos = config.server.security.kerberos
    server_file = config.server_file
    props = config.server.configuration_properties
    if kerberos is not None:
        keytab_key = next((k for k in ("hive.metastore.kerberos.keytab.file",
                                       "hive.server2.authentication.kerberos.keytab") if k in props),
                          "hive.metastore.kerberos.keytab.file")
        principal_key = next((k for k in ("hive.metastore.kerberos.principal",
                                          "hive.server2.authentication.kerberos.principal") if k in props),
                             "hive.metastore.kerberos.principal")
        try:
            Principal.parse(kerberos.principal)
        except PrincipalError as exc:
            problems.append(f"{_where(server_file, f'{_PROPS}.{principal_key}', kerberos.principal)}: {exc}")
        where = _where(server_file, f"{_PROPS}.{keytab_key}", kerberos.keytab)
        try:
            held = keytab_principals(kerberos.keytab)
        except KeytabError as exc:
            problems.append(f"{where}: {exc}")
        else:
            if kerberos.principal not in held:
                problems.append(f"{where}: it holds no key for {kerberos.principal} (it holds "
                                f"{', '.join(held) or 'no keys'})")
        if kerberos.token_key_file:
            try:
                secrets_from_file(kerberos.token_key_file)
            except TokenError as exc:
                problems.append(f"{_where(server_file, 'delegation-tokens.signing-key-file', kerberos.token_key_file)}"
                                f": {exc}")
        problems.extend(_krb5_conf_problems(kerberos.realm, server_file))
    for member in config.federation.members:
        principal = member.security.principal
        if principal is None:
            continue
        key = f"{member.name}.{_PROPS}.hive.metastore.kerberos.principal"
        try:
            Principal.parse(principal.replace("_HOST", "host"))
        except PrincipalError as exc:
            problems.append(f"{_where(config.federation_file, key, principal)}: {exc}")
    return problems


def _krb5_conf_problems(realm: str, server_file: str | None) -> list[str]:
    path = os.environ.get("KRB5_CONFIG", KRB5_CONF_DEFAULT).split(":")[0]
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        return [f"{server_file or '(server defaults)'}: waggle's realm {realm} needs a Kerberos configuration, "
                f"but {path} (KRB5_CONFIG or {KRB5_CONF_DEFAULT}) cannot be read: {exc.strerror or exc}"]
    if realm not in text and "dns_lookup_kdc = true" not in text.replace("\t", " "):
        return [f"{path}: names no KDC for waggle's realm {realm} (add it under [realms], or set "
                f"dns_lookup_kdc = true)"]
    return []
