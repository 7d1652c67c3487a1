"""Immutable, validated configuration objects.

A reload builds a whole new :class:`WaggleConfig` and swaps one reference; nothing here is ever mutated.
Each attribute that holds a setting says which (``port: int = setting_field(S.PORT)``, or
:func:`~waggle.config.registry.nested` for a value object):
its default is the setting's in the registry (:mod:`waggle.config.settings`, :mod:`waggle.config.hive_properties`),
never restated here, and the loader reads it from the files through that declaration
(:meth:`~waggle.config.reader.Reader.build`). What an attribute adds is its name, its type and its unit. The
enums live in :mod:`waggle.config.kinds` and are re-exported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from waggle.config.grants_model import Authorization
from waggle.config.hive_properties import HiveMetastore as HM
from waggle.config.hive_properties import HiveServer as HS
from waggle.config.kinds import TIME_UNITS
from waggle.config.kinds import AccessControlType as AccessControlType
from waggle.config.kinds import CacheMode as CacheMode
from waggle.config.kinds import CopyReads as CopyReads
from waggle.config.kinds import DatabaseResolution as DatabaseResolution
from waggle.config.kinds import Family as Family
from waggle.config.kinds import NotificationLog as NotificationLog
from waggle.config.kinds import PartialCopies as PartialCopies
from waggle.config.kinds import Per as Per
from waggle.config.kinds import ProtocolKind as ProtocolKind
from waggle.config.kinds import TransportKind as TransportKind
from waggle.config.member_settings import Metastore as M
from waggle.config.registry import nested, setting_field
from waggle.config.settings import RateRule as R
from waggle.config.settings import Server as S
from waggle.config.validators import Network

#: Bounds on a metastore's replies besides ``limits.max-upstream-message-bytes``: not settings.
UPSTREAM_MAX_STRING_BYTES = 256 * 1024 * 1024
UPSTREAM_MAX_CONTAINER_ITEMS = 50_000_000


def seconds(value: int, unit: str = "SECONDS") -> float:
    """A setting's number of ``unit`` (a ``TimeUnit`` name), in seconds."""
    return value * TIME_UNITS[unit]


def _ms_to_seconds(ms: int) -> float:
    return ms / 1000.0


def _is_read_only(access: str) -> bool:
    return access == "READ_ONLY"


@dataclass(frozen=True, slots=True)
class WireFormat:
    """How messages are framed and encoded on one socket. Equal formats allow byte-for-byte relaying."""

    transport: TransportKind = setting_field(S.TRANSPORT)
    protocol: ProtocolKind = setting_field(S.PROTOCOL)

    def describe(self) -> str:
        return f"{self.transport.value}/{self.protocol.value}"

    @property
    def compact(self) -> bool:
        """Whether messages are encoded in the compact protocol (else binary)."""
        return self.protocol is ProtocolKind.COMPACT

    @property
    def buffered(self) -> bool:
        """Whether messages go unframed (a reply can stream through as it arrives)."""
        return self.transport is TransportKind.BUFFERED


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what a peer may send in one message."""

    max_message_bytes: int
    max_string_bytes: int
    max_container_items: int


@dataclass(frozen=True, slots=True)
class LoadLimits:
    """How much work waggle takes on at once before it sheds load with a clear error."""

    max_in_flight_calls: int = setting_field(S.MAX_IN_FLIGHT_CALLS)
    max_calls_per_metastore: int = setting_field(S.MAX_CALLS_PER_METASTORE)
    queue_wait_seconds: float = setting_field(S.QUEUE_WAIT_MS, _ms_to_seconds)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """One rule of ``limits.rates``: a token bucket per user, per client address or for the rule, refilled at
    ``rate`` calls per second up to ``burst``, counting the calls of ``families`` that match ``users`` and
    ``addresses``."""

    name: str = setting_field(R.NAME)
    rate: float = setting_field(R.RATE)
    #: the loader gives ``rate`` rounded up when the file does not say
    burst: int = 1
    #: None: every user (``*``)
    users: frozenset[str] | None = None
    #: empty: every address
    addresses: tuple[Network, ...] = setting_field(R.ADDRESSES)
    #: the families counted (the loader gives all four when the file names none)
    families: tuple[Family, ...] = tuple(Family)
    per: Per = setting_field(R.PER)
    #: the serving processes that share the rule: each takes ``rate / workers`` and ``burst / workers`` (rounded
    #: up), so the rule holds for the pod (:func:`waggle.workers.worker.for_worker`)
    workers: int = 1


@dataclass(frozen=True, slots=True)
class TlsServer:
    """TLS on waggle's Thrift port."""

    certificate_file: str
    key_file: str
    client_ca_file: str | None = setting_field(S.TLS_CLIENT_CA)


@dataclass(frozen=True, slots=True)
class TlsClient:
    """TLS to one metastore."""

    ca_file: str | None = setting_field(M.TLS_CA)
    certificate_file: str | None = setting_field(M.TLS_CERTIFICATE)
    key_file: str | None = setting_field(M.TLS_KEY)
    check_hostname: bool = setting_field(M.TLS_CHECK_HOSTNAME)


@dataclass(frozen=True, slots=True)
class KerberosServer:
    """Kerberos on waggle's Thrift port, and waggle's own identity towards Kerberized metastores."""

    principal: str  # ``_HOST`` already expanded
    keytab: str
    #: clients must log in with SASL (else the identity is only waggle's own, towards Kerberized metastores)
    sasl: bool = True
    qops: tuple[str, ...] = setting_field(HS.PROTECTION)
    auth_to_local: str = setting_field(HS.AUTH_TO_LOCAL)
    trusted_realms: tuple[str, ...] = setting_field(S.KERBEROS_TRUSTED_REALMS)
    #: delegation tokens: the signing-key file (None: a random key per process) and lifetimes
    token_key_file: str | None = setting_field(S.TOKEN_SIGNING_KEY_FILE)
    token_renew_interval_ms: int = setting_field(HS.RENEW_INTERVAL)
    token_max_lifetime_ms: int = setting_field(HS.MAX_LIFETIME)

    @property
    def realm(self) -> str:
        return self.principal.rpartition("@")[2]


@dataclass(frozen=True, slots=True)
class RestClientConfig:
    """One OAuth2 client of the Iceberg REST port; its secret stays in its file until the port reads it."""

    id: str
    user: str
    #: the file holding its secret, read by :func:`waggle.config.check.rest_secrets` (as the admin token is)
    secret_file: str


@dataclass(frozen=True, slots=True)
class IcebergRest:
    """The Iceberg REST port (``iceberg-rest.*``): None port, off."""

    port: int | None = setting_field(S.REST_PORT)
    tls: TlsServer | None = None
    clients: tuple[RestClientConfig, ...] = ()
    token_lifetime_seconds: int | None = setting_field(S.REST_TOKEN_LIFETIME)
    allow_purge: bool = setting_field(S.REST_ALLOW_PURGE)
    #: the delegation tokens' key file (``delegation-tokens.signing-key-file``), which signs the REST port's
    #: tokens too, with Kerberos or without (given by the loader)
    signing_key_file: str | None = None


@dataclass(frozen=True, slots=True)
class RemotePolicy:
    """``remote-databases``: whether users may link remote databases from SQL, and within what."""

    enabled: bool = setting_field(S.REMOTES_ENABLED)
    allowed_metastores: tuple[str, ...] = setting_field(S.REMOTES_METASTORES)
    allowed_uris: tuple[re.Pattern[str], ...] = setting_field(S.REMOTES_URIS)
    allowed_users: tuple[str, ...] = setting_field(S.REMOTES_USERS)
    allowed_groups: tuple[str, ...] = setting_field(S.REMOTES_GROUPS)
    read_only: bool = setting_field(S.REMOTES_ACCESS, _is_read_only)
    max_links: int = setting_field(S.REMOTES_MAX_LINKS)
    refresh_seconds: float = setting_field(S.REMOTES_REFRESH, float)


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
    qops: tuple[str, ...] = setting_field(HM.PROTECTION)
    impersonation: bool = setting_field(M.IMPERSONATION)
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
    known_hosts: str | None = setting_field(M.TUNNEL_KNOWN_HOSTS)
    port: int = setting_field(M.TUNNEL_PORT)
    localhost: str = setting_field(M.TUNNEL_LOCALHOST)
    timeout_ms: int = setting_field(M.TUNNEL_TIMEOUT)
    strict_host_key_checking: bool = setting_field(M.TUNNEL_STRICT_HOST_KEY_CHECKING)


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
    #: a federated metastore's default is ``<name>_``, given by the loader
    database_prefix: str = setting_field(M.DATABASE_PREFIX, str.lower)
    access_control_type: AccessControlType = setting_field(M.ACCESS_CONTROL_TYPE)
    #: the mapped tables and the tunnel are read by the loader's own functions
    writable_database_white_list: tuple[re.Pattern[str], ...] = setting_field(M.WRITABLE_DATABASES)
    mapped_databases: tuple[re.Pattern[str], ...] | None = setting_field(M.MAPPED_DATABASES)
    mapped_tables: tuple[MappedTables, ...] | None = setting_field(M.MAPPED_TABLES)
    database_name_mapping: Mapping[str, str] = setting_field(M.DATABASE_NAME_MAPPING)
    latency_ms: int = setting_field(M.LATENCY)
    tunnel: TunnelConfig | None = setting_field(M.TUNNEL)
    configuration_properties: Mapping[str, str] = setting_field(M.CONFIGURATION_PROPERTIES)
    hive_version: str | None = setting_field(M.HIVE_VERSION)
    connect_timeout_ms: int = setting_field(M.CONNECT_TIMEOUT)
    read_timeout_ms: int = setting_field(M.READ_TIMEOUT)
    wire: WireFormat = nested(WireFormat)
    #: None: follow demand (see :class:`waggle.upstream.pool.UpstreamPool`)
    pool_max_idle: int | None = setting_field(M.POOL_MAX_IDLE)
    pool_idle_timeout_seconds: float = setting_field(M.POOL_IDLE_TIMEOUT, float)
    read_from_copies: CopyReads = setting_field(M.READ_FROM_COPIES)
    max_staleness_seconds: int | None = setting_field(M.MAX_STALENESS)
    partial: PartialCopies = setting_field(M.PARTIAL)
    cache: CacheMode = setting_field(M.CACHE)
    cache_ttl_seconds: int | None = setting_field(M.CACHE_TTL)
    cache_shared_across_users: bool = setting_field(M.CACHE_SHARED)
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

    port: int = setting_field(S.PORT)
    bind_address: str = setting_field(S.BIND_ADDRESS)
    database_resolution: DatabaseResolution = setting_field(S.DATABASE_RESOLUTION)
    wire: WireFormat = nested(WireFormat)
    max_connections: int = setting_field(S.MAX_CONNECTIONS)
    #: serving processes: None when the file does not say (see waggle.workers.count), 0 for auto
    workers: int | None = setting_field(S.WORKERS)
    graceful_stop_seconds: float = setting_field(S.STOP_TIMEOUT, float)
    shutdown_delay_seconds: float = setting_field(S.SHUTDOWN_DELAY, float)
    hot_reload: bool = setting_field(S.HOT_RELOAD)
    admin_token_file: str | None = setting_field(S.ADMIN_TOKEN_FILE)
    load: LoadLimits = nested(LoadLimits)
    limits: Limits = nested(Limits, max_message_bytes=S.MAX_MESSAGE_BYTES, max_string_bytes=S.MAX_STRING_BYTES,
                            max_container_items=S.MAX_CONTAINER_ITEMS)
    upstream_limits: Limits = nested(Limits, max_message_bytes=S.MAX_UPSTREAM_MESSAGE_BYTES,
                                     max_string_bytes=UPSTREAM_MAX_STRING_BYTES,
                                     max_container_items=UPSTREAM_MAX_CONTAINER_ITEMS)
    stream_after_bytes: int = setting_field(S.STREAM_AFTER_BYTES)
    #: read by the loader's own function (a list of rules)
    rates: tuple[RateLimit, ...] = setting_field(S.RATES)
    query_functions_across_all_metastores: bool = setting_field(S.QUERY_FUNCTIONS_ACROSS_ALL)
    #: two settings, a number and its unit: given by the loader
    status_polling_delay_seconds: float = seconds(S.STATUS_POLLING_DELAY.default, S.STATUS_POLLING_DELAY_UNIT.default)
    fan_out_timeout_ms: int = setting_field(S.FAN_OUT_TIMEOUT)
    down_retry_seconds: float = setting_field(S.DOWN_MEMBER_RETRY, float)
    health_check_timeout_ms: int = setting_field(S.HEALTH_CHECK_TIMEOUT)
    hung_check_seconds: float = setting_field(S.HUNG_MEMBER_CHECK_AFTER)
    database_refresh_seconds: float = setting_field(S.DATABASE_RESOLUTION_REFRESH, float)
    copies_refresh_seconds: float = setting_field(S.COPIES_REFRESH, float)
    cache_max_bytes: int = setting_field(S.CACHE_MAX_BYTES)
    notification_log: NotificationLog = setting_field(S.NOTIFICATION_LOG)
    notification_log_retention: int | None = setting_field(S.NOTIFICATION_LOG_RETENTION)
    endpoint_port: int = setting_field(S.ENDPOINT_PORT)
    log_level: str = setting_field(S.LOG_LEVEL)
    log_format: str = setting_field(S.LOG_FORMAT)
    configuration_properties: Mapping[str, str] = setting_field(S.CONFIGURATION_PROPERTIES)
    security: ServerSecurity = ServerSecurity()
    remotes: RemotePolicy = nested(RemotePolicy)
    iceberg_rest: IcebergRest = IcebergRest()
    #: ``authorization``: per-user and per-group grants; None, off
    authorization: Authorization | None = None


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
