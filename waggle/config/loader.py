"""Read Waggle Dance's two YAML files into immutable :mod:`waggle.config.model` objects.

Every problem is reported with the file, the key and the offending value. Keys waggle does not implement
produce warnings, never silence and never a failure.

A setting is read, validated and defaulted through its declaration in the registry, by the model attribute that
holds it (:meth:`~waggle.config.reader.Reader.build`). What remains here is what no single declaration says:
values with a structure of their own (URIs, regex lists, the tunnel route), defaults that follow other keys (the
Hive properties, a member's name) and checks across keys and files.
"""

from __future__ import annotations

import difflib
import getpass
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from waggle.config.authorization import parse_authorization
from waggle.config.hive_properties import HiveMetastore as HM
from waggle.config.hive_properties import HiveServer as HS
from waggle.config.iceberg_rest import parse_iceberg_rest
from waggle.config.keys import KeyConflict, normalize
from waggle.config.member_settings import METASTORE, MappedTablesEntry
from waggle.config.member_settings import Metastore as M
from waggle.config.model import (
    CopyReads,
    Federation,
    HostPort,
    MappedTables,
    MetastoreConfig,
    ProtocolKind,
    ServerConfig,
    TransportKind,
    TunnelConfig,
    WaggleConfig,
    WireFormat,
    seconds,
)
from waggle.config.rates import parse_rates
from waggle.config.reader import MISSING, Reader, properties
from waggle.config.registry import Section, Setting
from waggle.config.security import parse_metastore_security, parse_server_security
from waggle.config.settings import RATE_RULE, REST_CLIENT, SERVER
from waggle.config.settings import Server as S

_HOP = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>[A-Za-z0-9._\-\[\]:]+)$")


class ConfigError(ValueError):
    """One or more problems in the configuration files; each line names file, key and value. ``warnings``: what
    else was found (a misspelled key is often the cause of an error, so it is shown beside it)."""

    def __init__(self, problems: list[str], warnings: Sequence[str] = ()) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
        self.warnings = tuple(warnings)


class UnknownKey(str):
    """A warning about a key waggle does not know (with the nearest known key, when one is near): an error
    under ``waggle check --strict``."""

    error: str

    def __new__(cls, file: str | None, what: str, key: str, near: str | None) -> UnknownKey:
        hint = f" (did you mean '{near}'?)" if near else ""
        self = super().__new__(cls, f"{file}: unknown {what} key '{key}' is ignored{hint}")
        self.error = f"{file}: unknown {what} key '{key}'{hint}"
        return self


def _nearest(key: str, known: Sequence[str]) -> str | None:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.7)
    return close[0] if close else None


def _warn_unknown(r: Reader, section: Section, warnings: list[str], what: str) -> None:
    """Warn, by name, about every key that is not a setting of ``section`` (with the nearest known key, when one
    is near) or that waggle does not implement."""
    for key, setting in r.unknown(section):
        if setting is None:
            depth, known = key.count("."), section.keys()
            near = _nearest(key, [k for k in known if k.count(".") == depth])
            warnings.append(UnknownKey(r.file, what, r.path(key), near and r.path(near)))
        else:
            warnings.append(
                f"{r.file}: key '{r.path(key)}' is not implemented by waggle and is ignored "
                f"({setting.doc.rstrip('.')})"
            )


def _load_yaml(path: str, what: str) -> Mapping[str, Any]:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read {what}: {exc.strerror or exc}"]) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML: {exc}"]) from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError([f"{path}: expected a mapping at the top level, found {type(data).__name__}"])
    try:
        return normalize(data)
    except KeyConflict as exc:
        raise ConfigError([f"{path}: key '{exc.path}' is given twice (nested and dotted spellings)"]) from exc


def _wire(r: Reader, framed: Setting[bool], compact: Setting[bool]) -> WireFormat:
    """``transport`` and ``protocol``, defaulting to the Hive properties that set them, then to the settings'."""
    p = properties(r)
    defaults: dict[str, object] = {}
    if p.given(framed.key):
        defaults["transport"] = TransportKind.FRAMED if p.get(framed) else TransportKind.BUFFERED
    if p.given(compact.key):
        defaults["protocol"] = ProtocolKind.COMPACT if p.get(compact) else ProtocolKind.BINARY
    return r.build(WireFormat, defaults)


def parse_server(path: str | None, data: Mapping[str, Any], problems: list[str], warnings: list[str]) -> ServerConfig:
    r = Reader(path or "(server defaults)", data, "", problems)
    _warn_unknown(r, SERVER, warnings, "server")
    max_threads = properties(r).get(HS.MAX_THREADS)
    defaults = {} if max_threads is None else {"max_connections": max_threads}
    polling = seconds(r.get(S.STATUS_POLLING_DELAY), r.get(S.STATUS_POLLING_DELAY_UNIT))
    security = parse_server_security(r)
    return r.build(ServerConfig, defaults, wire=_wire(r, HS.FRAMED, HS.COMPACT),
                   status_polling_delay_seconds=polling, security=security,
                   rates=parse_rates(r, lambda rule: _warn_unknown(rule, RATE_RULE, warnings, "rate limit")),
                   iceberg_rest=parse_iceberg_rest(r, lambda c: _warn_unknown(c, REST_CLIENT, warnings,
                                                                              "iceberg-rest client"),
                                                   warnings, security.kerberos is not None),
                   authorization=parse_authorization(r, lambda a, section, what: _warn_unknown(a, section, warnings,
                                                                                               what),
                                                     warnings, security.kerberos is not None))


def _uris(r: Reader) -> tuple[HostPort, ...]:
    key = M.URIS.key
    value = r.raw(key)
    if value is MISSING or value is None or str(value).strip() == "":
        r.require(key)
        return ()
    out = []
    for part in str(value).split(","):
        part = part.strip()
        try:
            u = urlsplit(part)
            if u.scheme != "thrift" or not u.hostname or u.port is None:
                raise ValueError
            out.append(HostPort(u.hostname, u.port))
        except ValueError:
            r.fail(key, value, f"'{part}' is not a thrift://host:port URI")
    return tuple(out)


def _tunnel(r: Reader) -> TunnelConfig | None:
    value = r.raw(M.TUNNEL.key)
    if value is MISSING or value is None:
        return None
    if not isinstance(value, Mapping):
        r.fail(M.TUNNEL.key, value, "expected a map with 'route', 'private-keys', ...")
        return None
    route_text = r.get(M.TUNNEL_ROUTE)
    hops: list[tuple[str, str]] = []
    if not route_text.strip():
        r.require(M.TUNNEL_ROUTE.key)
    for part in route_text.split("->") if route_text.strip() else []:
        m = _HOP.match(part.strip())
        if not m:
            r.fail(M.TUNNEL_ROUTE.key, route_text, f"hop '{part.strip()}' is not [user@]host")
            continue
        hops.append((m.group("user") or getpass.getuser(), m.group("host")))
    keys = tuple(k.strip() for k in r.get(M.TUNNEL_PRIVATE_KEYS).split(",") if k.strip())
    if not keys:
        r.require(M.TUNNEL_PRIVATE_KEYS.key)
    return r.build(TunnelConfig, route=tuple(hops), private_keys=keys)


def _mapped_tables(r: Reader) -> tuple[MappedTables, ...] | None:
    key = M.MAPPED_TABLES.key
    value = r.raw(key)
    if value is MISSING or value is None:
        return None
    if not isinstance(value, list):
        r.fail(key, value, "expected a list of {database, mapped-tables}")
        return None
    out = []
    for i, entry in enumerate(value):
        er = Reader(r.file, entry if isinstance(entry, Mapping) else {}, r.path(f"{key}[{i}]."), r.problems)
        database = er.get(MappedTablesEntry.DATABASE)
        if not isinstance(entry, Mapping) or not database:
            r.fail(f"{key}[{i}]", entry, "expected {database: <db>, mapped-tables: [regex, ...]}")
            continue
        out.append(MappedTables(database.lower(), er.get(MappedTablesEntry.TABLES)))
    return tuple(out)


def parse_metastore(
    file: str, data: Any, where: str, primary: bool, problems: list[str], warnings: list[str]
) -> MetastoreConfig | None:
    if not isinstance(data, Mapping):
        problems.append(f"{file}: key '{where}': invalid value {data!r}: expected a map")
        return None
    r = Reader(file, data, f"{where}.", problems)
    _warn_unknown(r, METASTORE, warnings, "metastore")
    name = r.get(M.NAME).strip()
    if not name:
        r.require(M.NAME.key, " and must not be blank")
    defaults: dict[str, object] = {} if primary else {"database_prefix": f"{name}_"}
    p = properties(r)
    if p.given(HM.SOCKET_TIMEOUT.key):
        defaults["read_timeout_ms"] = p.get(HM.SOCKET_TIMEOUT, M.READ_TIMEOUT.default)
    member = r.build(
        MetastoreConfig, defaults, name=name, uris=_uris(r), primary=primary,
        mapped_tables=_mapped_tables(r), tunnel=_tunnel(r),
        wire=_wire(r, HM.FRAMED, HM.COMPACT), security=parse_metastore_security(r),
    )
    if member.access_control_type.primary_only and not primary:
        r.fail(M.ACCESS_CONTROL_TYPE.key, member.access_control_type.value,
               "this access type is allowed on the primary metastore only")
    if primary and member.read_from_copies is not CopyReads.NEVER:
        r.fail(M.READ_FROM_COPIES.key, member.read_from_copies.value,
               "copies are read for federated metastores; the primary's tables are its own")
    return member


_FEDERATION_KEYS = ("primary-meta-store", "federated-meta-stores")


def parse_federation(file: str, data: Mapping[str, Any], problems: list[str], warnings: list[str]) -> Federation | None:
    for key in data:
        if key not in _FEDERATION_KEYS:
            warnings.append(UnknownKey(file, "federation", str(key), _nearest(str(key), _FEDERATION_KEYS)))
    if data.get("primary-meta-store") is None:
        problems.append(f"{file}: key 'primary-meta-store' is required")
        return None
    primary = parse_metastore(file, data["primary-meta-store"], "primary-meta-store", True, problems, warnings)
    federated_raw = data.get("federated-meta-stores") or []
    if not isinstance(federated_raw, list):
        problems.append(f"{file}: key 'federated-meta-stores': invalid value {federated_raw!r}: expected a list")
        federated_raw = []
    federated = []
    for i, item in enumerate(federated_raw):
        m = parse_metastore(file, item, f"federated-meta-stores[{i}]", False, problems, warnings)
        if m is not None:
            federated.append(m)
    if primary is None:
        return None
    members = [primary, *federated]
    names: dict[str, int] = {}
    prefixes: dict[str, str] = {}
    for i, m in enumerate(members):
        where = "primary-meta-store" if i == 0 else f"federated-meta-stores[{i - 1}]"
        if m.name and m.name in names:
            problems.append(f"{file}: key '{where}.name': invalid value {m.name!r}: duplicate metastore name")
        names[m.name] = i
        if m.database_prefix in prefixes and (i > 0 or m.database_prefix):
            problems.append(
                f"{file}: key '{where}.database-prefix': invalid value {m.database_prefix!r}: "
                f"same prefix as metastore '{prefixes[m.database_prefix]}'"
            )
        prefixes.setdefault(m.database_prefix, m.name)
    return Federation(primary=primary, federated=tuple(federated))


def load(server_file: str | None, federation_file: str, serving: bool = True, strict: bool = False) -> WaggleConfig:
    """Load and validate both files. Raises :class:`ConfigError` listing every problem found.

    ``serving``: the files are to be served, so a Kerberized member needs waggle's own keytab. The tools (the
    sync) may log in from the ticket cache of the person running them instead. ``strict``: a key waggle does not
    know is a problem, not a warning."""
    problems: list[str] = []
    warnings: list[str] = []
    server_data: Mapping[str, Any] = {}
    try:
        if server_file:
            server_data = _load_yaml(server_file, "server config")
    except ConfigError as exc:
        problems.extend(exc.problems)
    try:
        fed_data = _load_yaml(federation_file, "federation config")
    except ConfigError as exc:
        raise ConfigError(problems + exc.problems) from exc
    server = parse_server(server_file, server_data, problems, warnings)
    federation = parse_federation(federation_file, fed_data, problems, warnings)
    if federation is not None:
        names = {m.name for m in federation.federated}
        for name in server.remotes.allowed_metastores:
            if name != "*" and name not in names:
                problems.append(f"{server_file or '(server defaults)'}: key 'remote-databases.allowed-metastores': "
                                f"invalid value {name!r}: no federated metastore of that name in {federation_file} "
                                f"(links name federated members: {', '.join(sorted(names)) or 'there are none'})")
    if federation is not None and server.security.kerberos is None and serving:
        for member in federation.members:
            if member.security.kerberos:
                problems.append(f"{federation_file}: metastore '{member.name}' uses Kerberos "
                                f"(hive.metastore.sasl.enabled), so the server file needs waggle's own "
                                f"principal and keytab (configuration-properties.hive.metastore.kerberos.principal "
                                f"and .keytab.file)")
    if strict:
        problems.extend(w.error for w in warnings if isinstance(w, UnknownKey))
        warnings = [w for w in warnings if not isinstance(w, UnknownKey)]
    if problems or federation is None:
        raise ConfigError(problems, warnings)
    return WaggleConfig(
        server=server, federation=federation, server_file=server_file, federation_file=federation_file,
        warnings=tuple(warnings),
    )
