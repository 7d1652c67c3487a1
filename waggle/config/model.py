"""Immutable, validated configuration objects.

A reload builds a whole new :class:`WaggleConfig` and swaps one reference; nothing here is ever mutated.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


class DatabaseResolution(enum.Enum):
    MANUAL = "MANUAL"
    PREFIXED = "PREFIXED"


class AccessControlType(enum.Enum):
    READ_ONLY = "READ_ONLY"
    READ_AND_WRITE_AND_CREATE = "READ_AND_WRITE_AND_CREATE"
    READ_AND_WRITE_ON_DATABASE_WHITELIST = "READ_AND_WRITE_ON_DATABASE_WHITELIST"
    READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST = "READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST"

    @property
    def primary_only(self) -> bool:
        """Waggle Dance allows the ``..._CREATE...`` variants on the primary metastore only."""
        return "CREATE" in self.value


class TransportKind(enum.Enum):
    BUFFERED = "buffered"
    FRAMED = "framed"


class ProtocolKind(enum.Enum):
    BINARY = "binary"
    COMPACT = "compact"


@dataclass(frozen=True, slots=True)
class WireFormat:
    """How messages are framed and encoded on one socket. Equal formats allow byte-for-byte relaying."""

    transport: TransportKind = TransportKind.BUFFERED
    protocol: ProtocolKind = ProtocolKind.BINARY

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

    max_in_flight_calls: int = 500
    max_calls_per_metastore: int = 200
    queue_wait_seconds: float = 1.0


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
    port: int = 22
    localhost: str = "localhost"
    timeout_ms: int = 60000
    strict_host_key_checking: bool = True


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
    access_control_type: AccessControlType = AccessControlType.READ_ONLY
    writable_database_white_list: tuple[re.Pattern[str], ...] = ()
    mapped_databases: tuple[re.Pattern[str], ...] | None = None
    mapped_tables: tuple[MappedTables, ...] | None = None
    database_name_mapping: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    latency_ms: int = 0
    tunnel: TunnelConfig | None = None
    configuration_properties: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    hive_version: str | None = None
    connect_timeout_ms: int = 2000
    read_timeout_ms: int = 600000
    wire: WireFormat = WireFormat()
    pool_max_idle: int = 16

    def upstream_key(self) -> tuple[object, ...]:
        """What a pool's connections depend on: members equal here can keep their pool across a reload."""
        return (self.name, self.uris, self.tunnel, self.connect_timeout_ms, self.read_timeout_ms, self.latency_ms,
                self.wire, self.pool_max_idle, self.hive_version)

    def tunnel_key(self) -> tuple[object, ...] | None:
        """What an SSH tunnel depends on: members equal here keep their tunnel across a reload."""
        return None if self.tunnel is None else (self.name, self.uris, self.tunnel)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    port: int = 48869
    bind_address: str = "0.0.0.0"
    database_resolution: DatabaseResolution = DatabaseResolution.MANUAL
    wire: WireFormat = WireFormat()
    max_connections: int = 1000
    graceful_stop_seconds: float = 60.0
    shutdown_delay_seconds: float = 0.0
    hot_reload: bool = True
    admin_token_file: str | None = None
    load: LoadLimits = LoadLimits()
    limits: Limits = Limits(100 * 1024 * 1024, 16 * 1024 * 1024, 1_000_000)
    upstream_limits: Limits = Limits(2 * 1024 * 1024 * 1024 - 1, 256 * 1024 * 1024, 50_000_000)
    stream_after_bytes: int = 65536
    query_functions_across_all_metastores: bool = True
    status_polling_delay_seconds: float = 300.0
    fan_out_timeout_ms: int = 5000
    down_retry_seconds: float = 2.0
    database_refresh_seconds: float = 60.0
    endpoint_port: int = 18000
    log_level: str = "info"
    log_format: str = "auto"
    configuration_properties: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


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
