"""Read Waggle Dance's two YAML files into immutable :mod:`waggle.config.model` objects.

Every problem is reported with the file, the key and the offending value. Keys waggle does not implement
produce warnings, never silence and never a failure.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar
from urllib.parse import urlsplit

import yaml

from waggle.config.keys import KeyConflict, normalize
from waggle.config.model import (
    AccessControlType,
    DatabaseResolution,
    Federation,
    HostPort,
    Limits,
    LoadLimits,
    MappedTables,
    MetastoreConfig,
    ProtocolKind,
    ServerConfig,
    TransportKind,
    TunnelConfig,
    WaggleConfig,
    WireFormat,
)
from waggle.config.settings import METASTORE_SETTINGS, SERVER_SETTINGS, Setting
from waggle.hms.bridges import parse_version

T = TypeVar("T")
_MISSING = object()
_TIME_UNITS = {
    "NANOSECONDS": 1e-9, "MICROSECONDS": 1e-6, "MILLISECONDS": 1e-3, "SECONDS": 1.0,
    "MINUTES": 60.0, "HOURS": 3600.0, "DAYS": 86400.0,
}
_HOP = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>[A-Za-z0-9._\-\[\]:]+)$")


class ConfigError(ValueError):
    """One or more problems in the configuration files; each line names file, key and value."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class _Reader:
    """Typed access to one normalized mapping, collecting problems instead of stopping at the first."""

    def __init__(self, file: str, data: Mapping[str, Any], prefix: str, problems: list[str]) -> None:
        self.file, self.data, self.prefix, self.problems = file, data, prefix, problems

    def path(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def fail(self, key: str, value: Any, reason: str) -> None:
        self.problems.append(f"{self.file}: key '{self.path(key)}': invalid value {value!r}: {reason}")

    def raw(self, key: str) -> Any:
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return _MISSING
            node = node[part]
        return node

    def get(self, key: str, default: T, convert: Callable[[Any], T], expect: str) -> T:
        value = self.raw(key)
        if value is _MISSING or value is None:
            return default
        try:
            return convert(value)
        except (TypeError, ValueError) as exc:
            detail = f": {exc}" if str(exc) else ""
            self.fail(key, value, f"expected {expect}{detail}")
            return default

    def integer(self, key: str, default: int, low: int = 0, high: int | None = None) -> int:
        def conv(v: Any) -> int:
            if isinstance(v, bool) or not isinstance(v, (int, str)):
                raise TypeError
            n = int(v)
            if n < low or (high is not None and n > high):
                raise ValueError(f"out of range {low}..{high if high is not None else 'inf'}")
            return n

        expect = f"an integer >= {low}" if high is None else f"an integer between {low} and {high}"
        return self.get(key, default, conv, expect)

    def boolean(self, key: str, default: bool) -> bool:
        def conv(v: Any) -> bool:
            if isinstance(v, bool):
                return v
            s = str(v).strip().lower()
            if s in ("true", "yes", "on", "1"):
                return True
            if s in ("false", "no", "off", "0"):
                return False
            raise ValueError
        return self.get(key, default, conv, "true or false")

    def choice(self, key: str, default: T, enum_type: type[T]) -> T:
        names = [e.value for e in enum_type]  # type: ignore[attr-defined]

        def conv(v: Any) -> T:
            s = str(v).strip()
            for e in enum_type:  # type: ignore[attr-defined]
                if e.value.lower() == s.lower():
                    return e  # type: ignore[no-any-return]
            raise ValueError

        return self.get(key, default, conv, "one of " + ", ".join(names))

    def string(self, key: str, default: str) -> str:
        def conv(v: Any) -> str:
            if isinstance(v, (Mapping, list)):
                raise TypeError
            return str(v)
        return self.get(key, default, conv, "a string")

    def regex_list(self, key: str) -> tuple[re.Pattern[str], ...] | None:
        value = self.raw(key)
        if value is _MISSING or value is None:
            return None
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list):
            self.fail(key, value, "expected a list of regular expressions")
            return None
        out = []
        for i, item in enumerate(value):
            try:
                out.append(re.compile(str(item), re.IGNORECASE))
            except re.error as exc:
                self.fail(f"{key}[{i}]", item, f"not a regular expression: {exc}")
        return tuple(out)

    def string_map(self, key: str) -> Mapping[str, str]:
        value = self.raw(key)
        if value is _MISSING or value is None:
            return MappingProxyType({})
        if not isinstance(value, Mapping):
            self.fail(key, value, "expected a map")
            return MappingProxyType({})
        return MappingProxyType({str(k): _scalar(v) for k, v in value.items()})


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _warn_unknown(reader: _Reader, settings: tuple[Setting, ...], warnings: list[str], what: str) -> None:
    """Warn, by name, about every key that is not a setting or that waggle does not implement.

    Nested maps are followed down to the settings' own keys, so ``logging: {level: debug}`` is the implemented
    ``logging.level`` while ``logging: {config: ...}`` is the unimplemented ``logging.config``.
    """
    by_key = {s.key: s for s in settings}

    def walk(data: Mapping[str, Any], prefix: str) -> None:
        for key, value in data.items():
            full = f"{prefix}{key}"
            setting = by_key.get(full)
            if setting is None and isinstance(value, Mapping) and any(k.startswith(full + ".") for k in by_key):
                walk(value, full + ".")
                continue
            if setting is None:
                warnings.append(f"{reader.file}: unknown {what} key '{reader.path(full)}' is ignored")
            elif not setting.implemented:
                warnings.append(
                    f"{reader.file}: key '{reader.path(full)}' is not implemented by waggle and is ignored "
                    f"({setting.doc.rstrip('.')})"
                )

    walk(reader.data, "")


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


def _hive_flag(props: Mapping[str, str], key: str) -> bool | None:
    value = props.get(key)
    return None if value is None else value.strip().lower() == "true"


_DEFAULT_WIRE = WireFormat()


def _wire(reader: _Reader, props: Mapping[str, str], default: WireFormat = _DEFAULT_WIRE) -> WireFormat:
    framed = _hive_flag(props, "hive.metastore.thrift.framed.transport.enabled")
    compact = _hive_flag(props, "hive.metastore.thrift.compact.protocol.enabled")
    transport = default.transport if framed is None else (TransportKind.FRAMED if framed else TransportKind.BUFFERED)
    protocol = default.protocol if compact is None else (ProtocolKind.COMPACT if compact else ProtocolKind.BINARY)
    return WireFormat(
        transport=reader.choice("transport", transport, TransportKind),
        protocol=reader.choice("protocol", protocol, ProtocolKind),
    )


def _hive_duration_ms(value: str) -> int:
    """Parse Hive's time values such as ``600``, ``600s`` or ``5000ms`` (seconds when no unit)."""
    m = re.fullmatch(r"\s*(\d+)\s*(ms|msec|s|sec|m|min)?\s*", value.lower())
    if not m:
        raise ValueError(value)
    n, unit = int(m.group(1)), m.group(2) or "s"
    return n * {"ms": 1, "msec": 1, "s": 1000, "sec": 1000, "m": 60000, "min": 60000}[unit]


def parse_server(path: str | None, data: Mapping[str, Any], problems: list[str], warnings: list[str]) -> ServerConfig:
    r = _Reader(path or "(server defaults)", data, "", problems)
    _warn_unknown(r, SERVER_SETTINGS, warnings, "server")
    props = r.string_map("configuration-properties")
    max_threads = props.get("hive.metastore.server.max.threads")
    default_conns = int(max_threads) if max_threads and max_threads.isdigit() else 1000
    unit_name = r.string("status-polling-delay-time-unit", "MINUTES").upper()
    if unit_name not in _TIME_UNITS:
        r.fail("status-polling-delay-time-unit", unit_name, "expected one of " + ", ".join(_TIME_UNITS))
        unit_name = "MINUTES"
    level = r.string("logging.level", "info").lower()
    if level not in ("debug", "info", "warning", "error"):
        r.fail("logging.level", level, "expected debug, info, warning or error")
        level = "info"
    fmt = r.string("logging.format", "auto").lower()
    if fmt not in ("auto", "json", "console"):
        r.fail("logging.format", fmt, "expected auto, json or console")
        fmt = "auto"
    defaults = ServerConfig()
    return ServerConfig(
        port=r.integer("port", defaults.port, 0, 65535),
        bind_address=r.string("bind-address", defaults.bind_address),
        database_resolution=r.choice("database-resolution", defaults.database_resolution, DatabaseResolution),
        wire=_wire(r, props),
        max_connections=r.integer("max-connections", default_conns, 1),
        graceful_stop_seconds=float(r.integer("thrift-server-stop-timeout-val-in-seconds", 60, 0)),
        shutdown_delay_seconds=float(r.integer("shutdown-delay", 0, 0, 3600)),
        hot_reload=r.boolean("hot-reload", True),
        admin_token_file=r.string("admin.token-file", "") or None,
        load=LoadLimits(
            max_in_flight_calls=r.integer("limits.max-in-flight-calls", defaults.load.max_in_flight_calls, 1),
            max_calls_per_metastore=r.integer("limits.max-calls-per-metastore",
                                              defaults.load.max_calls_per_metastore, 1),
            queue_wait_seconds=r.integer("limits.queue-wait-ms", int(defaults.load.queue_wait_seconds * 1000), 0)
            / 1000.0,
        ),
        limits=Limits(
            max_message_bytes=r.integer("limits.max-message-bytes", defaults.limits.max_message_bytes, 1024),
            max_string_bytes=r.integer("limits.max-string-bytes", defaults.limits.max_string_bytes, 1),
            max_container_items=r.integer("limits.max-container-items", defaults.limits.max_container_items, 1),
        ),
        upstream_limits=replace(
            defaults.upstream_limits,
            max_message_bytes=r.integer(
                "limits.max-upstream-message-bytes", defaults.upstream_limits.max_message_bytes, 1024, 2**31 - 1
            ),
        ),
        stream_after_bytes=r.integer("limits.stream-replies-after-bytes", defaults.stream_after_bytes, 0),
        query_functions_across_all_metastores=r.boolean("query-functions-across-all-metastores", True),
        status_polling_delay_seconds=r.integer("status-polling-delay", 5, 1) * _TIME_UNITS[unit_name],
        fan_out_timeout_ms=r.integer("fan-out-timeout", defaults.fan_out_timeout_ms, 1),
        down_retry_seconds=r.integer("down-member-retry", int(defaults.down_retry_seconds), 1),
        database_refresh_seconds=r.integer("database-resolution-refresh", int(defaults.database_refresh_seconds), 1),
        endpoint_port=r.integer("endpoint.port", defaults.endpoint_port, 0, 65535),
        log_level=level,
        log_format=fmt,
        configuration_properties=props,
    )


def _uris(r: _Reader) -> tuple[HostPort, ...]:
    value = r.raw("remote-meta-store-uris")
    if value is _MISSING or value is None or str(value).strip() == "":
        r.problems.append(f"{r.file}: key '{r.path('remote-meta-store-uris')}' is required")
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
            r.fail("remote-meta-store-uris", value, f"'{part}' is not a thrift://host:port URI")
    return tuple(out)


def _tunnel(r: _Reader) -> TunnelConfig | None:
    value = r.raw("metastore-tunnel")
    if value is _MISSING or value is None:
        return None
    if not isinstance(value, Mapping):
        r.fail("metastore-tunnel", value, "expected a map with 'route', 'private-keys', ...")
        return None
    t = _Reader(r.file, value, r.path("metastore-tunnel."), r.problems)
    route_text = t.string("route", "")
    hops: list[tuple[str, str]] = []
    if not route_text.strip():
        t.problems.append(f"{t.file}: key '{t.path('route')}' is required")
    for part in route_text.split("->") if route_text.strip() else []:
        m = _HOP.match(part.strip())
        if not m:
            t.fail("route", route_text, f"hop '{part.strip()}' is not [user@]host")
            continue
        hops.append((m.group("user") or getpass.getuser(), m.group("host")))
    keys = tuple(k.strip() for k in t.string("private-keys", "").split(",") if k.strip())
    if not keys:
        t.problems.append(f"{t.file}: key '{t.path('private-keys')}' is required")
    strict_raw = t.raw("strict-host-key-checking")
    strict = True
    if strict_raw is not _MISSING and strict_raw is not None:
        s = _scalar(strict_raw).strip().lower()
        if s in ("yes", "true"):
            strict = True
        elif s in ("no", "false"):
            strict = False
        else:
            t.fail("strict-host-key-checking", strict_raw, "expected yes or no")
    known = t.string("known-hosts", "") or None
    return TunnelConfig(
        route=tuple(hops),
        private_keys=keys,
        known_hosts=known,
        port=t.integer("port", 22, 1, 65535),
        localhost=t.string("localhost", "localhost"),
        timeout_ms=t.integer("timeout", 60000, 0),
        strict_host_key_checking=strict,
    )


def _mapped_tables(r: _Reader) -> tuple[MappedTables, ...] | None:
    value = r.raw("mapped-tables")
    if value is _MISSING or value is None:
        return None
    if not isinstance(value, list):
        r.fail("mapped-tables", value, "expected a list of {database, mapped-tables}")
        return None
    out = []
    for i, entry in enumerate(value):
        er = _Reader(r.file, entry if isinstance(entry, Mapping) else {}, r.path(f"mapped-tables[{i}]."), r.problems)
        if not isinstance(entry, Mapping) or not er.string("database", ""):
            r.fail(f"mapped-tables[{i}]", entry, "expected {database: <db>, mapped-tables: [regex, ...]}")
            continue
        out.append(MappedTables(er.string("database", "").lower(), er.regex_list("mapped-tables") or ()))
    return tuple(out)


def parse_metastore(
    file: str, data: Any, where: str, primary: bool, problems: list[str], warnings: list[str]
) -> MetastoreConfig | None:
    if not isinstance(data, Mapping):
        problems.append(f"{file}: key '{where}': invalid value {data!r}: expected a map")
        return None
    r = _Reader(file, data, f"{where}.", problems)
    _warn_unknown(r, METASTORE_SETTINGS, warnings, "metastore")
    name = r.string("name", "").strip()
    if not name:
        problems.append(f"{file}: key '{r.path('name')}' is required and must not be blank")
    access = r.choice("access-control-type", AccessControlType.READ_ONLY, AccessControlType)
    if access.primary_only and not primary:
        r.fail("access-control-type", access.value, "this access type is allowed on the primary metastore only")
    default_prefix = "" if primary else f"{name}_"
    props = r.string_map("configuration-properties")
    read_default = 600000
    if "hive.metastore.client.socket.timeout" in props:
        try:
            read_default = _hive_duration_ms(props["hive.metastore.client.socket.timeout"])
        except ValueError:
            r.fail("configuration-properties.hive.metastore.client.socket.timeout",
                   props["hive.metastore.client.socket.timeout"], "expected a duration such as 600s")
    aliases = r.string_map("database-name-mapping")
    lowered = {k.lower(): v.lower() for k, v in aliases.items()}
    seen: dict[str, str] = {}
    for k, v in lowered.items():
        if v in seen:
            r.fail("database-name-mapping", dict(aliases), f"'{seen[v]}' and '{k}' both map to alias '{v}'")
        seen[v] = k
    return MetastoreConfig(
        name=name,
        uris=_uris(r),
        primary=primary,
        database_prefix=r.string("database-prefix", default_prefix).lower(),
        access_control_type=access,
        writable_database_white_list=r.regex_list("writable-database-white-list") or (),
        mapped_databases=r.regex_list("mapped-databases"),
        mapped_tables=_mapped_tables(r),
        database_name_mapping=MappingProxyType(lowered),
        latency_ms=r.integer("latency", 0, 0),
        tunnel=_tunnel(r),
        configuration_properties=props,
        hive_version=_hive_version(r),
        connect_timeout_ms=r.integer("connect-timeout", 2000, 1),
        read_timeout_ms=r.integer("read-timeout", read_default, 1),
        wire=_wire(r, props),
        pool_max_idle=r.integer("pool-max-idle", 16, 0),
    )


def _hive_version(r: Any) -> str | None:
    text = r.string("hive-version", "") or None
    try:
        parse_version(text)
    except ValueError as exc:
        r.fail("hive-version", text, str(exc))
    return text


def parse_federation(file: str, data: Mapping[str, Any], problems: list[str], warnings: list[str]) -> Federation | None:
    for key in data:
        if key not in ("primary-meta-store", "federated-meta-stores"):
            warnings.append(f"{file}: unknown federation key '{key}' is ignored")
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


def load(server_file: str | None, federation_file: str) -> WaggleConfig:
    """Load and validate both files. Raises :class:`ConfigError` listing every problem found."""
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
    if problems or federation is None:
        raise ConfigError(problems)
    return WaggleConfig(
        server=server, federation=federation, server_file=server_file, federation_file=federation_file,
        warnings=tuple(warnings),
    )
