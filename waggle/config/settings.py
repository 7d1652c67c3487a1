"""Every key of the server and federation files, declared once: key, default, validator and meaning.

The registry drives everything else. The loaders (:mod:`waggle.config.loader` for the server and federation
files, :mod:`waggle.sync.runner` for sync files) read and validate each setting with its validator and fall back
to its default; the frozen :mod:`waggle.config.model` objects take their defaults from here; a key that is not
declared, or that waggle does not implement, is reported by name (:meth:`Section.unknown`); and the
configuration reference (docs/reference/configuration.md) is generated from it (``python -m waggle.docs``), so none of
them can drift apart.

Settings are kept in declaration order, which is the order of the docs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from waggle.config.kinds import (
    TIME_UNITS,
    DatabaseResolution,
    Family,
    NotificationLog,
    Per,
    ProtocolKind,
    TransportKind,
)
from waggle.config.registry import REQUIRED, Section, Setting
from waggle.config.validators import (
    age_seconds,
    boolean,
    choice,
    choices,
    integer,
    label,
    names,
    networks,
    one_of,
    optional_string,
    positive_number,
    regexes,
    string,
    string_map,
    worker_count,
)

_EMPTY: Mapping[str, str] = MappingProxyType({})

# -- the server file ---------------------------------------------------------------------------------------------
SERVER = Section("server")


class Server:
    """Keys of the server file (``--server-config``)."""

    PORT = SERVER.add("port", 48869, integer(0, 65535), "Thrift port that clients put in `hive.metastore.uris`.")
    BIND_ADDRESS = SERVER.add("bind-address", "0.0.0.0", string(),
                              "Address the Thrift port listens on (waggle addition).")
    DATABASE_RESOLUTION = SERVER.add(
        "database-resolution", DatabaseResolution.MANUAL, choice(DatabaseResolution),
        "`MANUAL` (each database belongs to one metastore) or `PREFIXED` (federated databases carry a prefix).",
    )
    TRANSPORT = SERVER.add(
        "transport", TransportKind.BUFFERED, choice(TransportKind),
        "`buffered` (unframed, what Hive and Spark send) or `framed`. Also set by the Hive property "
        "`hive.metastore.thrift.framed.transport.enabled` in `configuration-properties`.",
    )
    PROTOCOL = SERVER.add(
        "protocol", ProtocolKind.BINARY, choice(ProtocolKind),
        "`binary` or `compact`. Also set by `hive.metastore.thrift.compact.protocol.enabled`.",
    )
    MAX_CONNECTIONS = SERVER.add(
        "max-connections", 1000, integer(1),
        "Client connections served at once, by all workers together. A connection over the limit has its first "
        "call answered with a `MetaException` saying so, and is closed. "
        "Defaults to `hive.metastore.server.max.threads` when that property is set.",
    )
    WORKERS = SERVER.add(
        "workers", None, worker_count(),
        "Serving processes on the one Thrift port (SO_REUSEPORT), under one supervisor that owns the HTTP "
        "endpoint, the configuration, SSH tunnels and health checks; `auto`: the CPUs the process may use, as "
        "its cgroup's CPU limit (or CPU affinity) says. Without the key: `--workers`, else the environment's "
        "`WAGGLE_WORKERS` (the image sets `auto`, the Helm chart the pod's CPU), else 1. Needs a restart "
        "(waggle addition).", "1",
    )
    STOP_TIMEOUT = SERVER.add(
        "thrift-server-stop-timeout-val-in-seconds", 60, integer(0),
        "On SIGTERM, how long in-flight calls may take to finish before waggle exits (after `shutdown-delay`).",
    )
    SHUTDOWN_DELAY = SERVER.add(
        "shutdown-delay", 0, integer(0, 3600),
        "Seconds between SIGTERM and the drain during which `/readyz` already fails but new connections are "
        "still served, so load balancers stop sending clients first (waggle addition; the Helm chart sets 5).",
    )
    HOT_RELOAD = SERVER.add(
        "hot-reload", True, boolean(),
        "Watch both configuration files and apply an edit without a restart; `false` reloads on SIGHUP (or "
        "`POST /api/admin/reload`) only (waggle addition).",
    )
    ADMIN_TOKEN_FILE = SERVER.add(
        "admin.token-file", None, optional_string(),
        "File holding the bearer token that state-changing admin HTTP calls must present. Without it they are "
        "off (waggle addition).",
    )
    MAX_MESSAGE_BYTES = SERVER.add("limits.max-message-bytes", 100 * 1024 * 1024, integer(1024),
                                   "Largest request message a client may send (bytes).")
    MAX_STRING_BYTES = SERVER.add("limits.max-string-bytes", 16 * 1024 * 1024, integer(1),
                                  "Longest string or binary field in a request (bytes).")
    MAX_CONTAINER_ITEMS = SERVER.add("limits.max-container-items", 1_000_000, integer(1),
                                     "Most elements in one list, set or map of a request.")
    MAX_UPSTREAM_MESSAGE_BYTES = SERVER.add(
        "limits.max-upstream-message-bytes", 2**31 - 1, integer(1024, 2**31 - 1),
        "Largest reply accepted from a metastore (bytes); a 100,000-partition listing is ~100 MB.",
    )
    MAX_IN_FLIGHT_CALLS = SERVER.add(
        "limits.max-in-flight-calls", 500, integer(1),
        "Client calls being answered at once, over all connections (with workers, each takes an equal share). A "
        "call over the limit waits up to "
        "`limits.queue-wait-ms` for a slot, then fails with a `MetaException` saying waggle is overloaded.",
    )
    MAX_CALLS_PER_METASTORE = SERVER.add(
        "limits.max-calls-per-metastore", 200, integer(1),
        "Calls sent to one metastore at once (merged calls and bridges included; with workers, each takes an "
        "equal share). Over it a call waits up to "
        "`limits.queue-wait-ms`, then fails with a `MetaException` naming the metastore.",
    )
    QUEUE_WAIT_MS = SERVER.add("limits.queue-wait-ms", 1000, integer(0),
                               "How long a call may wait for a free slot under the two limits above.")
    RATES = SERVER.add(
        "limits.rates", (), None,
        "Token-bucket rate limits on client calls, per user, client address or rule, per method family: a list "
        "of rules with the keys of the next table (see \"Rate limits\" in Operations). A call over a limit is "
        "answered at once with a `MetaException` naming the rule, which clients retry with backoff; it never "
        "reaches a metastore. With workers, each takes an equal share of every rule (waggle addition).", "[] (none)",
    )
    STREAM_AFTER_BYTES = SERVER.add(
        "limits.stream-replies-after-bytes", 65536, integer(0),
        "A reply relayed unchanged that is longer than this streams to the client as it arrives, so memory "
        "holds one chunk of it; if its metastore fails mid-reply, the client's connection is closed.",
    )
    QUERY_FUNCTIONS_ACROSS_ALL = SERVER.add(
        "query-functions-across-all-metastores", True, boolean(),
        "`get_all_functions` fans out to every metastore (`true`) or asks the primary only (`false`).",
    )
    STATUS_POLLING_DELAY = SERVER.add(
        "status-polling-delay", 5, integer(1),
        "How often a healthy metastore is checked in the background, in `status-polling-delay-time-unit` "
        "units. A failed call triggers a check at once.",
    )
    STATUS_POLLING_DELAY_UNIT = SERVER.add(
        "status-polling-delay-time-unit", "MINUTES",
        one_of(TIME_UNITS, "one of " + ", ".join(TIME_UNITS), str.upper), "Unit of `status-polling-delay`.",
    )
    FAN_OUT_TIMEOUT = SERVER.add(
        "fan-out-timeout", 5000, integer(1),
        "Milliseconds each metastore gets to answer a merged call (`get_all_databases`, `get_databases`, "
        "`get_table_meta`, `get_all_functions`), plus its `latency`. A metastore that fails or is late is "
        "left out of the merge and logged (waggle addition).",
    )
    DOWN_MEMBER_RETRY = SERVER.add(
        "down-member-retry", 2, integer(1),
        "Seconds between health checks of a metastore that is down. A metastore is down when a check fails, or "
        "at once when a call finds it gone (its connection refused, or not opened within `connect-timeout`). "
        "Calls naming its databases are then answered at once, from copies where `read-from-copies` allows, "
        "else with a `MetaException` naming it, until a check succeeds (waggle addition).",
    )
    HEALTH_CHECK_TIMEOUT = SERVER.add(
        "health-check-timeout", 5000, integer(1),
        "Milliseconds a health check waits for the metastore's answer, plus its `latency` (the connection itself "
        "has `connect-timeout`). Every metastore is checked before the port serves; one that fails the check "
        "starts down (waggle addition).",
    )
    HUNG_MEMBER_CHECK_AFTER = SERVER.add(
        "hung-member-check-after", 3.0, positive_number(),
        "Seconds a call may wait on a metastore before the metastore is checked, and again every as many "
        "seconds while calls wait on it. A metastore that fails the check is down: every call waiting on it is "
        "let go, reads answered from a copy or with a `MetaException` naming it, writes saying that their "
        "outcome is unknown. Calls to a metastore that passes its checks wait up to its `read-timeout` "
        "(waggle addition).",
    )
    DATABASE_RESOLUTION_REFRESH = SERVER.add(
        "database-resolution-refresh", 60, integer(1),
        "MANUAL resolution: seconds between background refreshes of which metastore owns each database "
        "(waggle addition).",
    )
    ENDPOINT_PORT = SERVER.add("endpoint.port", 18000, integer(0, 65535),
                               "HTTP port for health, readiness, metrics and the admin API.")
    LOG_LEVEL = SERVER.add("logging.level", "info",
                           one_of(("debug", "info", "warning", "error"), "debug, info, warning or error", str.lower),
                           "`debug` logs one line per call; `info`, `warning`, `error`.")
    LOG_FORMAT = SERVER.add("logging.format", "auto", one_of(("auto", "json", "console"), "auto, json or console",
                                                             str.lower),
                            "`json`, `console`, or `auto` (console on a terminal, JSON otherwise).")
    CONFIGURATION_PROPERTIES = SERVER.add(
        "configuration-properties", _EMPTY, string_map(),
        "Hive properties. waggle reads the transport, protocol and thread ones listed above and the security "
        "ones in the table of Hive properties below, and passes the rest to nothing (it has no HiveConf).",
    )


    TLS_CERTIFICATE = SERVER.add(
        "tls.certificate-file", None, optional_string(),
        "PEM certificate chain of the Thrift port. With it (and `tls.key-file`) clients must speak TLS; Hive's "
        "`hive.metastore.use.SSL` in `configuration-properties` asks for the same (waggle addition).",
    )
    TLS_KEY = SERVER.add("tls.key-file", None, optional_string(),
                         "PEM private key of `tls.certificate-file` (unencrypted).")
    TLS_CLIENT_CA = SERVER.add(
        "tls.client-ca-file", None, optional_string(),
        "PEM CA bundle: when set, every client must present a certificate it signed (mutual TLS).",
    )
    KERBEROS_TRUSTED_REALMS = SERVER.add(
        "kerberos.trusted-realms", (), names(),
        "Comma-separated realms, besides waggle's own, whose principals may connect (their KDCs must trust "
        "each other). A principal of any other realm is refused (waggle addition).", "none",
    )
    TOKEN_SIGNING_KEY_FILE = SERVER.add(
        "delegation-tokens.signing-key-file", None, optional_string(),
        "File of the key that signs waggle's delegation tokens: lines `id:base64-secret` (the highest id signs, "
        "all verify), or one base64 secret. Give every replica the same file (a Kubernetes Secret). Without it "
        "a random key per process is used, and a token works only on the replica that issued it, until restart.",
    )

    REMOTES_ENABLED = SERVER.add(
        "remote-databases.enabled", False, boolean(),
        "Let users link remote databases from their own SQL (`CREATE DATABASE x WITH DBPROPERTIES "
        "('waggle.remote.metastore'=...)`); see \"Remote databases\" (waggle addition).",
    )
    REMOTES_METASTORES = SERVER.add(
        "remote-databases.allowed-metastores", (), names(),
        "Federation members that links may name (`*`: every federated member).", "[] (none)",
    )
    REMOTES_URIS: Setting[tuple[re.Pattern[str], ...]] = SERVER.add(
        "remote-databases.allowed-uris", (), regexes(),
        "Case-insensitive regexes of `thrift://host:port` URIs that links may name with `waggle.remote.uris`. A "
        "refused URI is never connected to.", "[] (none)",
    )
    REMOTES_USERS = SERVER.add(
        "remote-databases.allowed-users", ("*",), names(),
        "Users (the connection's identity: Kerberos, or set_ugi) who may create and drop links; `*`: anyone.",
        "[*]",
    )
    REMOTES_GROUPS = SERVER.add(
        "remote-databases.allowed-groups", (), names(),
        "Groups (from set_ugi) whose members may create and drop links, besides `allowed-users`.", "[]",
    )
    REMOTES_ACCESS = SERVER.add(
        "remote-databases.access", "READ_ONLY", one_of(("READ_ONLY", "READ_AND_WRITE"), "READ_ONLY or READ_AND_WRITE",
                                                       str.upper),
        "What linked databases allow: `READ_ONLY`, or `READ_AND_WRITE` (still within the member's own "
        "access-control-type).",
    )
    REMOTES_MAX_LINKS = SERVER.add("remote-databases.max-links", 100, integer(0),
                                   "The most links the primary may hold; a link over it is refused.")
    REMOTES_REFRESH = SERVER.add(
        "remote-databases.refresh-seconds", 30, integer(1),
        "How often waggle rereads the primary's links. A new link is seen at once (a name waggle does not "
        "know is looked up in the primary); a dropped one within this time on other replicas.",
    )
    CACHE_MAX_BYTES = SERVER.add(
        "cache.max-bytes", 64 * 1024 * 1024, integer(0),
        "The most bytes of replies each waggle process keeps for members with `cache` on; over it, the replies "
        "used longest ago are dropped. `0` keeps none (waggle addition).",
    )
    NOTIFICATION_LOG = SERVER.add(
        "notification-log", NotificationLog.PRIMARY, choice(NotificationLog),
        "Which notification log clients read (`get_next_notification`, `get_current_notificationEventId`, "
        "`get_notification_events_count`): `primary`, the primary's own, as Waggle Dance serves it (its ids are "
        "the primary's); `federated`, one log merging every member's, with waggle's names and ids of its own "
        "(see the event consumers guide) (waggle addition).",
    )
    NOTIFICATION_LOG_RETENTION = SERVER.add(
        "notification-log-retention", 86400, age_seconds(),
        "`notification-log: federated`: how long the merged log keeps which member event each id stands for "
        "(`86400`, `24h`); as long as the members keep their events (Hive's "
        "`hive.metastore.event.db.listener.timetolive`, a day by default); null keeps it all (waggle addition).",
    )
    REST_PORT: Setting[int | None] = SERVER.add(
        "iceberg-rest.port", None, integer(0, 65535),
        "Port of the Iceberg REST catalog over the whole federation (see the Iceberg REST guide); off when not set "
        "(waggle addition).", "none (off)",
    )
    REST_TLS_CERTIFICATE = SERVER.add(
        "iceberg-rest.tls.certificate-file", None, optional_string(),
        "PEM certificate chain of the Iceberg REST port: with it (and `iceberg-rest.tls.key-file`) the port speaks "
        "HTTPS only.",
    )
    REST_TLS_KEY = SERVER.add("iceberg-rest.tls.key-file", None, optional_string(),
                              "PEM private key of `iceberg-rest.tls.certificate-file` (unencrypted).")
    REST_CLIENTS = SERVER.add(
        "iceberg-rest.clients", (), None,
        "OAuth2 clients of the Iceberg REST port (client-credentials at `/v1/oauth/tokens`): a list with the keys "
        "of the next table. With any client, or with Kerberos on the Thrift port, every request needs a bearer "
        "token; tokens are signed with `delegation-tokens.signing-key-file`'s key, so every replica checks them.",
        "[] (none)",
    )
    REST_TOKEN_LIFETIME: Setting[int | None] = SERVER.add(
        "iceberg-rest.token-lifetime", 3600, age_seconds(),
        "How long a bearer token of the Iceberg REST port is good for (`3600`, `1h`).",
    )
    REST_ALLOW_PURGE = SERVER.add(
        "iceberg-rest.allow-purge", False, boolean(),
        "Whether a REST `DROP TABLE ... PURGE` (`purgeRequested=true`) may delete the table's files; refused "
        "(403) otherwise. A plain drop keeps the files, as Iceberg's Hive catalog does.",
    )
    AUTHORIZATION = SERVER.add(
        "authorization", None, None,
        "Per-user and per-group grants on every door (the Thrift and Iceberg REST ports, the merged notification "
        "log, copies and the cache): the keys of the `authorization` table below; see the grants guide. Off when "
        "not set (waggle addition).", "none (off)",
    )
    COPIES_REFRESH = SERVER.add(
        "copies-refresh-seconds", 30, integer(1),
        "How often waggle rereads which tables of the primary are copies made by `waggle sync` (see "
        "`read-from-copies`); a new copy is served within this time, with no reload (waggle addition).",
    )


SERVER.ignored("verbose", "false", "Accepted for compatibility; waggle's logs are always structured.")
SERVER.ignored("disconnect-connection-delay", "5", "Accepted; waggle notices closed clients at once.")
SERVER.ignored("disconnect-time-unit", "MINUTES", "Accepted; see `disconnect-connection-delay`.")
SERVER.ignored("thrift-server-request-timeout", "20", "Accepted, not used.")
SERVER.ignored("thrift-server-request-timeout-unit", "SECONDS", "Accepted, not used.")
SERVER.ignored("yaml-storage.overwrite-config-on-shutdown", "true", "Ignored: waggle never rewrites your YAML.")
SERVER.ignored("graphite", "-", "Not implemented; use the Prometheus endpoint.")
SERVER.ignored("prometheus.prefix", "waggle-dance", "Not implemented.")
SERVER.ignored("management", "-", "Spring actuator settings; not applicable.")
SERVER.ignored("logging.config", "-", "log4j2 file; not applicable.")
SERVER.ignored("waggledance", "-", "Waggle Dance extensions (rate limiting); not implemented.")

# -- one client of the server's iceberg-rest.clients -----------------------------------------------------------
REST_CLIENT = Section("iceberg-rest.clients entry")


class RestClient:
    """Keys of each client of ``iceberg-rest.clients`` (documented in a table of their own)."""

    ID = REST_CLIENT.add("id", "", label(), "The client id a REST client sends (`credential: <id>:<secret>`).",
                         REQUIRED)
    SECRET_FILE = REST_CLIENT.add(
        "secret-file", None, optional_string(),
        "File holding the client's secret (one line; a Kubernetes Secret). The secret itself is never logged.",
        REQUIRED,
    )
    USER = REST_CLIENT.add(
        "user", None, optional_string(),
        "The user this client's requests act as: what access control sees, and who the metastores see under "
        "impersonation.", "the id",
    )


# -- one rule of the server's limits.rates ---------------------------------------------------------------------
RATE_RULE = Section("limits.rates entry")


class RateRule:
    """Keys of each rule of ``limits.rates`` (documented in a table of their own)."""

    NAME = RATE_RULE.add("name", "", label(), "The rule's name, in metrics (`limit` label), logs and the error "
                         "a limited call gets; unique.", REQUIRED)
    USERS = RATE_RULE.add(
        "users", ("*",), names(),
        "Users the rule applies to: the connection's identity (its Kerberos principal's short name, else its "
        "`set_ugi` user); `*` (or an empty list): every user, and connections that gave none.", "[*]",
    )
    ADDRESSES = RATE_RULE.add(
        "addresses", (), networks(),
        "Client addresses or CIDR ranges the rule applies to (`10.1.0.0/16`, `192.0.2.7`, `2001:db8::/32`); "
        "empty: every address.", "[] (all)",
    )
    METHODS = RATE_RULE.add(
        "methods", (), choices(Family, lambda f: f.label),
        "Method families the rule counts: `reads`, `writes`, `listings` (database and table listings, merged "
        "calls), `partitions` (reads of partitions). Each method's family is in docs/supported-methods.md; "
        "`set_ugi` and the lock calls (`lock`, `check_lock`, heartbeats, `unlock`) are never limited.", "[] (all)",
    )
    RATE = RATE_RULE.add("rate", 0.0, positive_number(),
                         "Calls per second: tokens added to each of the rule's buckets per second.", REQUIRED)
    BURST: Setting[int | None] = RATE_RULE.add(
        "burst", None, integer(1),
        "Most calls taken at once: the size of each bucket, which starts full.", "`rate`, rounded up",
    )
    PER = RATE_RULE.add(
        "per", Per.USER, choice(Per),
        "What has a bucket of its own: `user` (each user), `address` (each client address) or `rule` (one "
        "bucket that every matching call shares).",
    )


#: The registries the tests and the configuration reference (docs/reference/configuration.md) read.
SERVER_SETTINGS: tuple[Setting[object], ...] = SERVER.settings
RATE_RULE_SETTINGS: tuple[Setting[object], ...] = RATE_RULE.settings
REST_CLIENT_SETTINGS: tuple[Setting[object], ...] = REST_CLIENT.settings
