"""The settings registry is the one home of every default, validator and documented key: the loaded
configuration, the model's own defaults, the sync file and the docs reference pages all follow it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from waggle.config.hive_properties import HIVE_METASTORE, HIVE_SERVER, HiveMetastore, HiveServer
from waggle.config.kinds import TIME_UNITS
from waggle.config.loader import ConfigError, load
from waggle.config.member_settings import METASTORE, METASTORE_SETTINGS, Metastore
from waggle.config.model import (
    IcebergRest,
    KerberosServer,
    MetastoreConfig,
    MetastoreSecurity,
    ServerConfig,
    TlsClient,
    TlsServer,
    TunnelConfig,
)
from waggle.config.registry import SOURCE, FromSetting, Nested, Setting
from waggle.config.settings import SERVER, SERVER_SETTINGS, Server
from waggle.config.sync_settings import SYNC, SYNC_JOB, Sync, SyncJob
from waggle.docs.config_page import reference, sync_reference
from waggle.sync.runner import SyncConfigError, load_sync_file
from waggle.synced import objects as o

ROOT = Path(__file__).resolve().parents[3]
PRIMARY = {"name": "p", "remote-meta-store-uris": "thrift://h:1"}

_POLL_UNIT = TIME_UNITS[Server.STATUS_POLLING_DELAY_UNIT.default]

# Each implemented setting with a validator, read back from a loaded configuration in the setting's own units.
SERVER_VALUES: dict[str, Callable[[ServerConfig], object]] = {
    "port": lambda s: s.port,
    "bind-address": lambda s: s.bind_address,
    "database-resolution": lambda s: s.database_resolution,
    "transport": lambda s: s.wire.transport,
    "protocol": lambda s: s.wire.protocol,
    "max-connections": lambda s: s.max_connections,
    "workers": lambda s: s.workers,
    "thrift-server-stop-timeout-val-in-seconds": lambda s: s.graceful_stop_seconds,
    "shutdown-delay": lambda s: s.shutdown_delay_seconds,
    "hot-reload": lambda s: s.hot_reload,
    "admin.token-file": lambda s: s.admin_token_file,
    "limits.max-message-bytes": lambda s: s.limits.max_message_bytes,
    "limits.max-string-bytes": lambda s: s.limits.max_string_bytes,
    "limits.max-container-items": lambda s: s.limits.max_container_items,
    "limits.max-upstream-message-bytes": lambda s: s.upstream_limits.max_message_bytes,
    "limits.max-in-flight-calls": lambda s: s.load.max_in_flight_calls,
    "limits.max-calls-per-metastore": lambda s: s.load.max_calls_per_metastore,
    "limits.queue-wait-ms": lambda s: s.load.queue_wait_seconds * 1000,
    "limits.stream-replies-after-bytes": lambda s: s.stream_after_bytes,
    "query-functions-across-all-metastores": lambda s: s.query_functions_across_all_metastores,
    "status-polling-delay": lambda s: s.status_polling_delay_seconds / _POLL_UNIT,
    "status-polling-delay-time-unit": lambda s: next(
        u for u, f in TIME_UNITS.items() if s.status_polling_delay_seconds == Server.STATUS_POLLING_DELAY.default * f),
    "fan-out-timeout": lambda s: s.fan_out_timeout_ms,
    "down-member-retry": lambda s: s.down_retry_seconds,
    "health-check-timeout": lambda s: s.health_check_timeout_ms,
    "hung-member-check-after": lambda s: s.hung_check_seconds,
    "database-resolution-refresh": lambda s: s.database_refresh_seconds,
    "endpoint.port": lambda s: s.endpoint_port,
    "logging.level": lambda s: s.log_level,
    "logging.format": lambda s: s.log_format,
    "configuration-properties": lambda s: dict(s.configuration_properties),
    "tls.certificate-file": lambda s: s.security.tls.certificate_file if s.security.tls else None,
    "tls.key-file": lambda s: s.security.tls.key_file if s.security.tls else None,
    "tls.client-ca-file": lambda s: s.security.tls.client_ca_file if s.security.tls else None,
    "kerberos.trusted-realms": lambda s: s.security.kerberos.trusted_realms if s.security.kerberos else (),
    "delegation-tokens.signing-key-file": lambda s: s.security.kerberos.token_key_file if s.security.kerberos else None,
    "remote-databases.enabled": lambda s: s.remotes.enabled,
    "remote-databases.access": lambda s: "READ_ONLY" if s.remotes.read_only else "READ_AND_WRITE",
    "remote-databases.max-links": lambda s: s.remotes.max_links,
    "remote-databases.refresh-seconds": lambda s: s.remotes.refresh_seconds,
    "copies-refresh-seconds": lambda s: s.copies_refresh_seconds,
    "cache.max-bytes": lambda s: s.cache_max_bytes,
    "notification-log": lambda s: s.notification_log,
    "notification-log-retention": lambda s: s.notification_log_retention,
    "iceberg-rest.port": lambda s: s.iceberg_rest.port,
    "iceberg-rest.tls.certificate-file": lambda s: s.iceberg_rest.tls.certificate_file if s.iceberg_rest.tls else None,
    "iceberg-rest.tls.key-file": lambda s: s.iceberg_rest.tls.key_file if s.iceberg_rest.tls else None,
    "iceberg-rest.token-lifetime": lambda s: s.iceberg_rest.token_lifetime_seconds,
    "iceberg-rest.allow-purge": lambda s: s.iceberg_rest.allow_purge,
}

METASTORE_VALUES: dict[str, Callable[[MetastoreConfig], object]] = {
    "access-control-type": lambda m: m.access_control_type,
    "writable-database-white-list": lambda m: m.writable_database_white_list,
    "mapped-databases": lambda m: m.mapped_databases,
    "mapped-tables": lambda m: m.mapped_tables,
    "database-name-mapping": lambda m: dict(m.database_name_mapping),
    "latency": lambda m: m.latency_ms,
    "metastore-tunnel": lambda m: m.tunnel,
    "configuration-properties": lambda m: dict(m.configuration_properties),
    "hive-version": lambda m: m.hive_version,
    "connect-timeout": lambda m: m.connect_timeout_ms,
    "read-timeout": lambda m: m.read_timeout_ms,
    "pool-max-idle": lambda m: m.pool_max_idle,
    "pool-idle-timeout": lambda m: m.pool_idle_timeout_seconds,
    "read-from-copies": lambda m: m.read_from_copies,
    "max-staleness": lambda m: m.max_staleness_seconds,
    "partial": lambda m: m.partial,
    "cache": lambda m: m.cache,
    "cache-ttl": lambda m: m.cache_ttl_seconds,
    "cache-shared-across-users": lambda m: m.cache_shared_across_users,
    "impersonation-enabled": lambda m: m.security.impersonation,
    "tls.enabled": lambda m: m.security.tls is not None,
    "tls.ca-file": lambda m: m.security.tls.ca_file if m.security.tls else None,
    "tls.certificate-file": lambda m: m.security.tls.certificate_file if m.security.tls else None,
    "tls.key-file": lambda m: m.security.tls.key_file if m.security.tls else None,
    "tls.check-hostname": lambda m: m.security.tls.check_hostname if m.security.tls else True,
}

TUNNEL_VALUES: dict[str, Callable[[TunnelConfig], object]] = {
    "metastore-tunnel.known-hosts": lambda t: t.known_hosts,
    "metastore-tunnel.port": lambda t: t.port,
    "metastore-tunnel.localhost": lambda t: t.localhost,
    "metastore-tunnel.timeout": lambda t: t.timeout_ms,
    "metastore-tunnel.strict-host-key-checking": lambda t: t.strict_host_key_checking,
}

# Server settings whose values are lists, checked in tests/unit/routing/test_remote_links.py (limits.rates in
# tests/unit/server/test_rate_limits.py).
SERVER_LISTS = {"remote-databases.allowed-metastores", "remote-databases.allowed-uris",
                "remote-databases.allowed-users", "remote-databases.allowed-groups", "limits.rates",
                "iceberg-rest.clients", "authorization"}

# Settings without a default of their own: required, or derived from another key (the metastore's name).
NO_PLAIN_DEFAULT = {"name", "remote-meta-store-uris", "database-prefix", "metastore-tunnel.route",
                    "metastore-tunnel.private-keys"}


# Implemented settings that no one model attribute holds: read by the loader itself, because they combine with
# other keys (a number and its unit; the switches and names that decide whether Kerberos or TLS is on at all; the
# Hive properties that are other settings' defaults).
READ_BY_THE_LOADER: list[Setting[object]] = [
    Server.STATUS_POLLING_DELAY, Server.STATUS_POLLING_DELAY_UNIT, Server.TLS_CERTIFICATE, Server.TLS_KEY,
    Server.REST_TLS_CERTIFICATE, Server.REST_TLS_KEY, Server.REST_CLIENTS, Server.AUTHORIZATION,
    Metastore.NAME, Metastore.URIS, Metastore.TUNNEL_ROUTE, Metastore.TUNNEL_PRIVATE_KEYS, Metastore.TLS_ENABLED,
    HiveServer.SASL, HiveServer.PRINCIPAL, HiveServer.KEYTAB, HiveServer.WD_PRINCIPAL, HiveServer.WD_KEYTAB,
    HiveServer.USE_SSL, HiveMetastore.SASL, HiveMetastore.PRINCIPAL, HiveMetastore.USE_SSL,
    # Hive properties that give other settings their defaults
    HiveServer.FRAMED, HiveServer.COMPACT, HiveServer.MAX_THREADS, HiveMetastore.FRAMED, HiveMetastore.COMPACT,
    HiveMetastore.SOCKET_TIMEOUT,
]


def _held(*classes: type) -> list[Setting[object]]:
    """The settings the attributes of ``classes`` hold, and those of the value objects they hold, one entry each."""
    held: list[Setting[object]] = []
    for cls in classes:
        for f in dataclasses.fields(cls):
            source = f.metadata.get(SOURCE)
            if isinstance(source, FromSetting):
                held.append(source.setting)
            elif isinstance(source, Nested):
                held.extend(p for p in source.parts.values() if isinstance(p, Setting))
                held.extend(_held(source.cls))
    return held


def _plain(value: object) -> object:
    return dict(value) if hasattr(value, "items") else value  # a read-only map compares as its dict


def write_yaml(tmp_path: Path, name: str, data: object) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def federation(tmp_path: Path, **primary: object) -> str:
    return write_yaml(tmp_path, "fed.yml", {"primary-meta-store": {**PRIMARY, **primary}})


def test_every_setting_is_read_back_by_the_tables_above() -> None:
    implemented = {s.key for s in SERVER if s.implemented}
    assert set(SERVER_VALUES) | SERVER_LISTS == implemented
    implemented = {s.key for s in METASTORE if s.implemented}
    assert set(METASTORE_VALUES) | set(TUNNEL_VALUES) | NO_PLAIN_DEFAULT == implemented


def test_every_setting_is_held_by_one_model_attribute() -> None:
    """The model names, per attribute, the setting it holds: every implemented setting is held by exactly one
    attribute of its file's objects, or read by the loader itself, never both."""
    server = _held(ServerConfig, KerberosServer, TlsServer, IcebergRest)
    metastore = _held(MetastoreConfig, TunnelConfig, MetastoreSecurity, TlsClient)
    for held, sections in ((server, (SERVER, HIVE_SERVER)), (metastore, (METASTORE, HIVE_METASTORE))):
        assert len(held) == len({id(s) for s in held}), [s.key for s in held]
        for section in sections:
            for s in (s for s in section if s.implemented):
                by_loader = any(r is s for r in READ_BY_THE_LOADER)
                assert any(h is s for h in held) != by_loader, f"{section.name}: {s.key}"


def test_an_empty_server_file_has_every_registered_default(tmp_path: Path) -> None:
    loaded = load(write_yaml(tmp_path, "server.yml", {}), federation(tmp_path)).server
    for s in SERVER:
        if s.key in SERVER_VALUES:
            assert SERVER_VALUES[s.key](loaded) == _plain(s.default), s.key
            assert SERVER_VALUES[s.key](ServerConfig()) == _plain(s.default), s.key  # the model's own default
    assert loaded == ServerConfig()


def test_a_bare_metastore_has_every_registered_default(tmp_path: Path) -> None:
    tunnel = {"route": "u@bastion", "private-keys": "/k"}
    member = load(None, federation(tmp_path, **{"metastore-tunnel": tunnel})).federation.primary
    bare = load(None, federation(tmp_path)).federation.primary
    own = MetastoreConfig(name="p", uris=bare.uris, primary=True, database_prefix="")
    assert bare == own
    for s in METASTORE:
        if s.key in METASTORE_VALUES:
            assert METASTORE_VALUES[s.key](bare) == _plain(s.default), s.key
            assert METASTORE_VALUES[s.key](own) == _plain(s.default), s.key
        if s.key in TUNNEL_VALUES:
            assert member.tunnel is not None
            assert TUNNEL_VALUES[s.key](member.tunnel) == s.default, s.key
            assert TUNNEL_VALUES[s.key](TunnelConfig((), (), None)) == s.default, s.key


@pytest.mark.parametrize("setting", [s for s in SERVER_SETTINGS if s.parse is not None], ids=lambda s: s.key)
def test_every_server_validator_names_file_key_and_value(tmp_path: Path, setting: Setting[object]) -> None:
    server = write_yaml(tmp_path, "server.yml", {setting.key: [[1]]})  # a dotted key is a nested one
    with pytest.raises(ConfigError) as err:
        load(server, federation(tmp_path))
    assert f"{server}: key '{setting.key}': invalid value [[1]]: expected " in str(err.value)


@pytest.mark.parametrize("setting", [s for s in METASTORE_SETTINGS if s.parse is not None], ids=lambda s: s.key)
def test_every_metastore_validator_names_file_key_and_value(tmp_path: Path, setting: Setting[object]) -> None:
    fed = federation(tmp_path, **{setting.key: [[1]]})
    with pytest.raises(ConfigError) as err:
        load(None, fed)
    assert f"{fed}: key 'primary-meta-store.{setting.key}': invalid value [[1]]: expected " in str(err.value)


@pytest.mark.parametrize("value", [-1, "soon", 1.5])
def test_a_bad_pool_idle_timeout_names_file_key_and_value(tmp_path: Path, value: object) -> None:
    fed = federation(tmp_path, **{"pool-idle-timeout": value})
    with pytest.raises(ConfigError) as err:
        load(None, fed)
    assert f"{fed}: key 'primary-meta-store.pool-idle-timeout': invalid value {value!r}: expected an integer >= 0" \
        in str(err.value)


def test_the_pool_settings_are_read_from_the_federation_file(tmp_path: Path) -> None:
    member = load(None, federation(tmp_path, **{"pool-idle-timeout": 5, "pool-max-idle": 32})).federation.primary
    assert (member.pool_idle_timeout_seconds, member.pool_max_idle) == (5.0, 32)
    member = load(None, federation(tmp_path, **{"pool-idle-timeout": 0, "pool-max-idle": None})).federation.primary
    assert (member.pool_idle_timeout_seconds, member.pool_max_idle) == (0.0, None)  # never reaped; follows demand


def test_unknown_and_unimplemented_keys_come_from_the_registry(tmp_path: Path) -> None:
    ignored = [s.key for s in SERVER if not s.implemented]
    server = write_yaml(tmp_path, "server.yml", {**{k: "x" for k in ignored}, "prot": 1, "limits": {"max-x": 1}})
    warnings = "\n".join(load(server, federation(tmp_path, colour="red")).warnings)
    for key in ignored:
        assert f"key '{key}' is not implemented by waggle and is ignored" in warnings
    assert "unknown server key 'prot' is ignored" in warnings
    assert "unknown server key 'limits.max-x' is ignored" in warnings
    assert "unknown metastore key 'primary-meta-store.colour' is ignored" in warnings


def sync_file(tmp_path: Path, **job: object) -> str:
    return write_yaml(tmp_path, "sync.yml", {"federation-config": "fed.yml", "source": "a",
                                             "jobs": [{"tables": "db.t", **job}]})


def test_an_empty_sync_job_has_every_registered_default(tmp_path: Path) -> None:
    run = load_sync_file(sync_file(tmp_path))
    (spec,) = run.specs
    assert (run.incremental, run.master) == (False, None)
    values = {"mode": spec.mode, "target-database": spec.target_database, "partition-filter": spec.partition_filter,
              "location-root": spec.location_root, "propagate-deletes": spec.propagate_deletes,
              "switch-mode": spec.switch_mode}
    for key, value in values.items():
        assert value == next(s.default for s in SYNC_JOB if s.key == key), key
    assert SyncJob.MODE.parse is not None
    assert (SyncJob.MODE.parse.convert(o.MIRROR), SyncJob.MODE.parse.convert(o.COPY)) == (o.MIRROR, o.COPY)


@pytest.mark.parametrize(("job", "message"), [
    ({"switch-mode": "maybe"}, "key 'jobs[0].switch-mode': invalid value 'maybe': expected true or false"),
    ({"propagate-deletes": 2}, "key 'jobs[0].propagate-deletes': invalid value 2: expected true or false"),
    ({"mode": "clone"}, "key 'jobs[0].mode': invalid value 'clone': expected mirror or copy"),
    ({"colour": "red"}, "unknown key 'jobs[0].colour'"),
])
def test_the_sync_file_is_validated_by_the_registry(tmp_path: Path, job: dict[str, object], message: str) -> None:
    path = sync_file(tmp_path, **job)
    with pytest.raises(SyncConfigError) as err:
        load_sync_file(path)
    assert f"{path}: {message}" in str(err.value)


def test_an_unknown_top_level_sync_key_lists_the_registered_ones(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "sync.yml", {"federation-config": "f.yml", "jobs": [{"tables": "d.t", "source": "a"}],
                                             "incrementl": True})
    with pytest.raises(SyncConfigError) as err:
        load_sync_file(path)
    assert f"{path}: unknown key 'incrementl' (expected one of {', '.join(sorted(SYNC.keys()))})" in str(err.value)
    assert sorted(SYNC.keys()) == ["execution-window", "federation-config", "follow", "http-port", "incremental",
                                   "jobs", "lease-seconds", "master", "max-writes-per-second", "page-size",
                                   "poll-interval-max", "propagate-deletes", "source"]


@pytest.mark.parametrize("value", [-1, "fast", 2.5, [1]])
def test_a_bad_write_limit_names_file_key_and_value(tmp_path: Path, value: object) -> None:
    path = write_yaml(tmp_path, "sync.yml", {"federation-config": "f.yml", "max-writes-per-second": value,
                                             "jobs": [{"tables": "d.t", "source": "a"}]})
    with pytest.raises(SyncConfigError) as err:
        load_sync_file(path)
    assert f"{path}: key 'max-writes-per-second': invalid value {value!r}: expected an integer >= 0" in str(err.value)


def test_the_write_limit_is_read_from_the_sync_file(tmp_path: Path) -> None:
    assert load_sync_file(sync_file(tmp_path)).max_writes_per_second == Sync.MAX_WRITES_PER_SECOND.default
    path = write_yaml(tmp_path, "limited.yml", {"federation-config": "f.yml", "max-writes-per-second": 0,
                                                "jobs": [{"tables": "d.t", "source": "a"}]})
    assert load_sync_file(path).max_writes_per_second == 0


def test_the_reference_pages_hold_the_generated_tables() -> None:
    """docs/reference/*.md are generated (tests/unit/docs/test_generated_pages.py checks they are current): every
    setting's table is on its page."""
    configuration = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    assert reference() in configuration, "regenerate it: python -m waggle.docs"
    sync = (ROOT / "docs" / "reference" / "sync-configuration.md").read_text()
    for table in sync_reference().split("\n\nEach job:\n\n"):
        assert table in sync, "regenerate it: python -m waggle.docs"


def test_settings_are_declared_once_per_section() -> None:
    for section in (SERVER, METASTORE, SYNC, SYNC_JOB):
        assert len(section.keys()) == len(set(section.keys())), section.name
    assert Metastore.TUNNEL_PORT.key.startswith(Metastore.TUNNEL.key + ".")


def test_the_write_limit_flag_uses_the_settings_validator(capsys: pytest.CaptureFixture[str]) -> None:
    from waggle.cli import build_parser

    assert build_parser().parse_args(["sync", "--max-writes-per-second", "5"]).max_writes_per_second == 5
    assert build_parser().parse_args(["sync"]).max_writes_per_second is None  # the sync file's, else the default
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sync", "--max-writes-per-second", "-1"])
    assert "--max-writes-per-second: invalid value '-1': expected an integer >= 0" in capsys.readouterr().err


def test_a_model_object_is_built_through_its_settings(tmp_path: Path) -> None:
    from waggle.config.reader import Reader

    problems: list[str] = []
    r = Reader("t.yml", {"port": "7", "limits": {"queue-wait-ms": 250, "max-message-bytes": 1}}, "", problems)
    server = r.build(ServerConfig, {"max_connections": 9}, security=ServerConfig().security, rates=())
    assert (server.port, server.max_connections, server.load.queue_wait_seconds) == (7, 9, 0.25)
    assert server.limits.max_message_bytes == Server.MAX_MESSAGE_BYTES.default  # refused, so the default
    assert problems == ["t.yml: key 'limits.max-message-bytes': invalid value 1: expected an integer >= 1024"]
    with pytest.raises(TypeError, match="no attribute"):
        r.build(ServerConfig, {"prot": 1})
    with pytest.raises(TypeError, match="read by its own function"):
        r.build(MetastoreConfig, name="m", uris=(), primary=True)  # mapped-tables and the tunnel are not given
