"""Immutable, validated configuration objects.

A reload builds a whole new :class:`WaggleConfig` and swaps one reference; nothing here is ever mutated.
Every default is its setting's in the registry (:mod:`waggle.config.settings`), never restated here; the enums
live in :mod:`waggle.config.kinds` and are re-exported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from waggle.config.kinds import TIME_UNITS
from waggle.config.kinds import AccessControlType as AccessControlType
from waggle.config.kinds import DatabaseResolution as DatabaseResolution
from waggle.config.kinds import ProtocolKind as ProtocolKind
from waggle.config.kinds import TransportKind as TransportKind
from waggle.config.settings import Metastore as M
from waggle.config.settings import Server as S

#: Bounds on a metastore's replies besides ``limits.max-upstream-message-bytes``: not settings.
UPSTREAM_MAX_STRING_BYTES = 256 * 1024 * 1024
UPSTREAM_MAX_CONTAINER_ITEMS = 50_000_000


def seconds(value: int, unit: str = "SECONDS") -> float:
    """A setting's number of ``unit`` (a ``TimeUnit`` name), in seconds."""
    return value * TIME_UNITS[unit]


@dataclass(frozen=True, slots=True)
class WireFormat:
    """How messages are framed and encoded on one socket. Equal formats allow byte-for-byte relaying."""

    transport: TransportKind = S.TRANSPORT.default
    protocol: ProtocolKind = S.PROTOCOL.default

    def describe(self) -> str:
        return f"{self.transport.value}/{self.protocol.value}"


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what a peer may send in one message."""

    max_message_bytes: int
    max_string_bytes: int
    max_container_items: int


@dataclass(frozen=True, slots=True)
class LoadLimits:
    """How much work waggle takes on at once before it sheds load with a clear error."""

    max_in_flight_calls: int = S.MAX_IN_FLIGHT_CALLS.default
    max_calls_per_metastore: int = S.MAX_CALLS_PER_METASTORE.default
    queue_wait_seconds: float = S.QUEUE_WAIT_MS.default / 1000.0


@dataclass(frozen=True, slots=True)
class TlsServer:
    """TLS on waggle's Thrift port."""

    certificate_file: str
    key_file: str
    client_ca_file: str | None = None


@dataclass(frozen=True, slots=True)
class TlsClient:
    """TLS to one metastore."""

    ca_file: str | None = None
    certificate_file: str | None = None
    key_file: str | None = None
    check_hostname: bool = True


@dataclass(frozen=True, slots=True)
class KerberosServer:
    """Kerberos on waggle's Thrift port, and waggle's own identity towards Kerberized metastores."""

    principal: str  # ``_HOST`` already expanded
    keytab: str
    #: clients must log in with SASL (else the identity is only waggle's own, towards Kerberized metastores)
    sasl: bool = True
    qops: tuple[str, ...] = ("auth",)
    auth_to_local: str = "DEFAULT"
    trusted_realms: tuple[str, ...] = ()
    #: delegation tokens: the signing-key file (None: a random key per process) and lifetimes
    token_key_file: str | None = None
    token_renew_interval_ms: int = 86_400_000
    token_max_lifetime_ms: int = 7 * 86_400_000

    @property
    def realm(self) -> str:
        return self.principal.rpartition("@")[2]


@dataclass(frozen=True, slots=True)
class RemotePolicy:
    """``remote-databases``: whether users may link remote databases from SQL, and within what."""

    enabled: bool = S.REMOTES_ENABLED.default
    allowed_metastores: tuple[str, ...] = ()
    allowed_uris: tuple[re.Pattern[str], ...] = ()
    allowed_users: tuple[str, ...] = ("*",)
    allowed_groups: tuple[str, ...] = ()
    read_only: bool = True
    max_links: int = S.REMOTES_MAX_LINKS.default
    refresh_seconds: float = float(S.REMOTES_REFRESH.default)


@dataclass(frozen=True, slots=True)
class ServerSecurity:
    kerberos: KerberosServer | None = None
    tls: TlsServer | None = None

    @property
    def answers_tokens(self) -> bool:
        """Clients log in with Kerberos, so waggle issues and checks delegation tokens itself."""
        return self.kerberos is not None and self.kerberos.sasl


@dataclass(frozen=True, slots=True)
class MetastoreSecurity:
    """How waggle authenticates to one metastore."""

    #: the metastore's principal as configured (``_HOST`` is expanded per host when connecting), or None
    principal: str | None = None
    qops: tuple[str, ...] = ("auth",)
    impersonation: bool = False
    tls: TlsClient | None = None

    @property
    def kerberos(self) -> bool:
        return self.principal is not None


@dataclass(frozen=True, slots=True)
class HostPort:
    host: str
    port: int

    def __str__(self) -> str:
        return f"thrift://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class TunnelConfig:
    route: tuple[tuple[str, str], ...]  # (user, host) per hop
    private_keys: tuple[str, ...]
    known_hosts: str | None
    port: int = M.TUNNEL_PORT.default
    localhost: str = M.TUNNEL_LOCALHOST.default
    timeout_ms: int = M.TUNNEL_TIMEOUT.default
    strict_host_key_checking: bool = M.TUNNEL_STRICT_HOST_KEY_CHECKING.default


@dataclass(frozen=True, slots=True)
class MappedTables:
    database: str
    patterns: tuple[re.Pattern[str], ...]


@dataclass(frozen=True, slots=True)
class MetastoreConfig:
    """One member of the federation: the primary or a federated metastore."""

    name: str
    uris: tuple[HostPort, ...]
    primary: bool
    database_prefix: str
    access_control_type: AccessControlType = M.ACCESS_CONTROL_TYPE.default
    writable_database_white_list: tuple[re.Pattern[str], ...] = M.WRITABLE_DATABASES.default
    mapped_databases: tuple[re.Pattern[str], ...] | None = M.MAPPED_DATABASES.default
    mapped_tables: tuple[MappedTables, ...] | None = M.MAPPED_TABLES.default
    database_name_mapping: Mapping[str, str] = field(default_factory=lambda: M.DATABASE_NAME_MAPPING.default)
    latency_ms: int = M.LATENCY.default
    tunnel: TunnelConfig | None = M.TUNNEL.default
    configuration_properties: Mapping[str, str] = field(default_factory=lambda: M.CONFIGURATION_PROPERTIES.default)
    hive_version: str | None = M.HIVE_VERSION.default
    connect_timeout_ms: int = M.CONNECT_TIMEOUT.default
    read_timeout_ms: int = M.READ_TIMEOUT.default
    wire: WireFormat = WireFormat()
    #: None: follow demand (see :class:`waggle.upstream.pool.UpstreamPool`)
    pool_max_idle: int | None = M.POOL_MAX_IDLE.default
    pool_idle_timeout_seconds: float = float(M.POOL_IDLE_TIMEOUT.default)
    security: MetastoreSecurity = MetastoreSecurity()

    def upstream_key(self) -> tuple[object, ...]:
        """What a pool's connections depend on: members equal here can keep their pool across a reload."""
        return (self.name, self.uris, self.tunnel, self.connect_timeout_ms, self.read_timeout_ms, self.latency_ms,
                self.wire, self.pool_max_idle, self.hive_version, self.security)

    def tunnel_key(self) -> tuple[object, ...] | None:
        """What an SSH tunnel depends on: members equal here keep their tunnel across a reload."""
        return None if self.tunnel is None else (self.name, self.uris, self.tunnel)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The server file; every default is its setting's (:class:`waggle.config.settings.Server`)."""

    port: int = S.PORT.default
    bind_address: str = S.BIND_ADDRESS.default
    database_resolution: DatabaseResolution = S.DATABASE_RESOLUTION.default
    wire: WireFormat = WireFormat()
    max_connections: int = S.MAX_CONNECTIONS.default
    #: serving processes: None when the file does not say (see waggle.workers.count), 0 for auto
    workers: int | None = S.WORKERS.default
    graceful_stop_seconds: float = float(S.STOP_TIMEOUT.default)
    shutdown_delay_seconds: float = float(S.SHUTDOWN_DELAY.default)
    hot_reload: bool = S.HOT_RELOAD.default
    admin_token_file: str | None = S.ADMIN_TOKEN_FILE.default
    load: LoadLimits = LoadLimits()
    limits: Limits = Limits(S.MAX_MESSAGE_BYTES.default, S.MAX_STRING_BYTES.default, S.MAX_CONTAINER_ITEMS.default)
    upstream_limits: Limits = Limits(S.MAX_UPSTREAM_MESSAGE_BYTES.default, UPSTREAM_MAX_STRING_BYTES,
                                     UPSTREAM_MAX_CONTAINER_ITEMS)
    stream_after_bytes: int = S.STREAM_AFTER_BYTES.default
    query_functions_across_all_metastores: bool = S.QUERY_FUNCTIONS_ACROSS_ALL.default
    status_polling_delay_seconds: float = seconds(S.STATUS_POLLING_DELAY.default, S.STATUS_POLLING_DELAY_UNIT.default)
    fan_out_timeout_ms: int = S.FAN_OUT_TIMEOUT.default
    down_retry_seconds: float = float(S.DOWN_MEMBER_RETRY.default)
    database_refresh_seconds: float = float(S.DATABASE_RESOLUTION_REFRESH.default)
    endpoint_port: int = S.ENDPOINT_PORT.default
    log_level: str = S.LOG_LEVEL.default
    log_format: str = S.LOG_FORMAT.default
    configuration_properties: Mapping[str, str] = field(default_factory=lambda: S.CONFIGURATION_PROPERTIES.default)
    security: ServerSecurity = ServerSecurity()
    remotes: RemotePolicy = RemotePolicy()


@dataclass(frozen=True, slots=True)
class Federation:
    primary: MetastoreConfig
    federated: tuple[MetastoreConfig, ...] = ()

    @property
    def members(self) -> tuple[MetastoreConfig, ...]:
        return (self.primary, *self.federated)

    def member(self, name: str) -> MetastoreConfig:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class WaggleConfig:
    """Everything ``waggle serve`` runs on, with the files it came from and the warnings they raised."""

    server: ServerConfig
    federation: Federation
    server_file: str | None
    federation_file: str
    warnings: tuple[str, ...] = ()
