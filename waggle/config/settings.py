"""Every configuration key waggle reads, with its default and meaning, in one registry.

The loader validates against it and the configuration reference in the README is generated from it
(``python -m waggle.config.settings``), so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    default: str
    doc: str
    implemented: bool = True


SERVER_SETTINGS: tuple[Setting, ...] = (
    Setting("port", "48869", "Thrift port that clients put in `hive.metastore.uris`."),
    Setting("bind-address", "0.0.0.0", "Address the Thrift port listens on (waggle addition)."),
    Setting(
        "database-resolution", "MANUAL",
        "`MANUAL` (each database belongs to one metastore) or `PREFIXED` (federated databases carry a prefix).",
    ),
    Setting(
        "transport", "buffered",
        "`buffered` (unframed, what Hive and Spark send) or `framed`. Also set by the Hive property "
        "`hive.metastore.thrift.framed.transport.enabled` in `configuration-properties`.",
    ),
    Setting(
        "protocol", "binary",
        "`binary` or `compact`. Also set by `hive.metastore.thrift.compact.protocol.enabled`.",
    ),
    Setting(
        "max-connections", "1000",
        "Client connections served at once. A connection over the limit has its first call answered with a "
        "`MetaException` saying so, and is closed. "
        "Defaults to `hive.metastore.server.max.threads` when that property is set.",
    ),
    Setting(
        "thrift-server-stop-timeout-val-in-seconds", "60",
        "On SIGTERM, how long in-flight calls may take to finish before waggle exits (after `shutdown-delay`).",
    ),
    Setting(
        "shutdown-delay", "0",
        "Seconds between SIGTERM and the drain during which `/readyz` already fails but new connections are "
        "still served, so load balancers stop sending clients first (waggle addition; the Helm chart sets 5).",
    ),
    Setting(
        "hot-reload", "true",
        "Watch both configuration files and apply an edit without a restart; `false` reloads on SIGHUP (or "
        "`POST /api/admin/reload`) only (waggle addition).",
    ),
    Setting(
        "admin.token-file", "none",
        "File holding the bearer token that state-changing admin HTTP calls must present. Without it they are "
        "off (waggle addition).",
    ),
    Setting("limits.max-message-bytes", "104857600", "Largest request message a client may send (bytes)."),
    Setting("limits.max-string-bytes", "16777216", "Longest string or binary field in a request (bytes)."),
    Setting("limits.max-container-items", "1000000", "Most elements in one list, set or map of a request."),
    Setting(
        "limits.max-upstream-message-bytes", "2147483647",
        "Largest reply accepted from a metastore (bytes); a 100,000-partition listing is ~100 MB.",
    ),
    Setting(
        "limits.max-in-flight-calls", "500",
        "Client calls being answered at once, over all connections. A call over the limit waits up to "
        "`limits.queue-wait-ms` for a slot, then fails with a `MetaException` saying waggle is overloaded.",
    ),
    Setting(
        "limits.max-calls-per-metastore", "200",
        "Calls sent to one metastore at once (merged calls and bridges included). Over it a call waits up to "
        "`limits.queue-wait-ms`, then fails with a `MetaException` naming the metastore.",
    ),
    Setting("limits.queue-wait-ms", "1000", "How long a call may wait for a free slot under the two limits above."),
    Setting(
        "limits.stream-replies-after-bytes", "65536",
        "A reply relayed unchanged that is longer than this streams to the client as it arrives, so memory "
        "holds one chunk of it; if its metastore fails mid-reply, the client's connection is closed.",
    ),
    Setting(
        "query-functions-across-all-metastores", "true",
        "`get_all_functions` fans out to every metastore (`true`) or asks the primary only (`false`).",
    ),
    Setting(
        "status-polling-delay", "5",
        "How often a healthy metastore is checked in the background, in `status-polling-delay-time-unit` "
        "units. A failed call triggers a check at once.",
    ),
    Setting("status-polling-delay-time-unit", "MINUTES", "Unit of `status-polling-delay`."),
    Setting(
        "fan-out-timeout", "5000",
        "Milliseconds each metastore gets to answer a merged call (`get_all_databases`, `get_databases`, "
        "`get_table_meta`, `get_all_functions`), plus its `latency`. A metastore that fails or is late is "
        "left out of the merge and logged (waggle addition).",
    ),
    Setting(
        "down-member-retry", "2",
        "Seconds between health checks of a metastore that is down. Calls naming its databases fail at once "
        "with a `MetaException` naming it until a check succeeds (waggle addition).",
    ),
    Setting(
        "database-resolution-refresh", "60",
        "MANUAL resolution: seconds between background refreshes of which metastore owns each database "
        "(waggle addition).",
    ),
    Setting("endpoint.port", "18000", "HTTP port for health, readiness, metrics and the admin API."),
    Setting("logging.level", "info", "`debug` logs one line per call; `info`, `warning`, `error`."),
    Setting("logging.format", "auto", "`json`, `console`, or `auto` (console on a terminal, JSON otherwise)."),
    Setting(
        "configuration-properties", "{}",
        "Hive properties. waggle reads the transport, protocol, thread and socket-timeout ones listed "
        "above and passes the rest to nothing (it has no HiveConf).",
    ),
    Setting("verbose", "false", "Accepted for compatibility; waggle's logs are always structured.", False),
    Setting("disconnect-connection-delay", "5", "Accepted; waggle notices closed clients at once.", False),
    Setting("disconnect-time-unit", "MINUTES", "Accepted; see `disconnect-connection-delay`.", False),
    Setting("thrift-server-request-timeout", "20", "Accepted, not used.", False),
    Setting("thrift-server-request-timeout-unit", "SECONDS", "Accepted, not used.", False),
    Setting("yaml-storage.overwrite-config-on-shutdown", "true", "Ignored: waggle never rewrites your YAML.", False),
    Setting("graphite", "-", "Not implemented; use the Prometheus endpoint.", False),
    Setting("prometheus.prefix", "waggle-dance", "Not implemented.", False),
    Setting("management", "-", "Spring actuator settings; not applicable.", False),
    Setting("logging.config", "-", "log4j2 file; not applicable.", False),
    Setting("waggledance", "-", "Waggle Dance extensions (rate limiting); not implemented.", False),
)

METASTORE_SETTINGS: tuple[Setting, ...] = (
    Setting("name", "(required)", "Unique name of the metastore; used in logs, metrics and errors."),
    Setting(
        "remote-meta-store-uris", "(required)",
        "Comma-separated `thrift://host:port` list, tried in order until one connects.",
    ),
    Setting(
        "database-prefix", "primary: empty; federated: `<name>_`",
        "Prefix of this metastore's databases in `PREFIXED` mode (lower-cased).",
    ),
    Setting(
        "access-control-type", "READ_ONLY",
        "`READ_ONLY`, `READ_AND_WRITE_AND_CREATE` (primary only), `READ_AND_WRITE_ON_DATABASE_WHITELIST`, "
        "`READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST` (primary only).",
    ),
    Setting("writable-database-white-list", "[]", "Case-insensitive regexes of databases that may be written."),
    Setting("mapped-databases", "null (all)", "Case-insensitive regexes of visible databases; `[]` shows none."),
    Setting("mapped-tables", "null (all)", "Per database, `{database: db, mapped-tables: [regex, ...]}`."),
    Setting("database-name-mapping", "{}", "`{name-in-metastore: alias}`; both names are served."),
    Setting("latency", "0", "Extra milliseconds this metastore may take, added to its timeouts."),
    Setting("metastore-tunnel", "none", "Reach this metastore through SSH; the keys below. One tunnel per "
            "metastore, shared by all clients, run in a helper process and rebuilt when it breaks."),
    Setting("metastore-tunnel.route", "(required)",
            "Hops `user@host -> user@host -> ...`; `user@` defaults to the OS user running waggle. The last hop "
            "opens the connection to the `remote-meta-store-uris` hosts (tried in order)."),
    Setting("metastore-tunnel.private-keys", "(required)",
            "Comma-separated private key files, tried on every hop. Keys with a passphrase are not supported."),
    Setting("metastore-tunnel.known-hosts", "`~/.ssh/known_hosts`",
            "OpenSSH known_hosts file; a hop on a port other than 22 is looked up as `[host]:port`."),
    Setting("metastore-tunnel.port", "22", "SSH port of every hop."),
    Setting("metastore-tunnel.localhost", "localhost", "Address the tunnel's local forwarded port listens on."),
    Setting("metastore-tunnel.timeout", "60000",
            "Milliseconds per hop to connect, handshake, authenticate and open a channel; `0` means no limit."),
    Setting("metastore-tunnel.strict-host-key-checking", "yes",
            "`yes`: a hop whose host key is missing from `known-hosts` or differs is refused. `no`: accepted, "
            "with a warning in the log. YAML booleans are accepted too."),
    Setting(
        "configuration-properties", "{}",
        "Hive client properties: `hive.metastore.client.socket.timeout` sets the read timeout, "
        "`hive.metastore.thrift.framed.transport.enabled` / `...compact.protocol.enabled` the wire format.",
    ),
    Setting("hive-version", "none",
            "The metastore's Hive version, e.g. `2.3.10`, `3.1.3`, `4.0.1` (waggle addition). Optional: without "
            "it waggle learns from the metastore's answers what it lacks. With it, version bridges apply from the "
            "first call, and Hive 4's `tablesPattern` is passed through instead of expanded."),
    Setting("connect-timeout", "2000", "Milliseconds to open a connection, plus `latency` (waggle addition)."),
    Setting(
        "read-timeout", "600000",
        "Milliseconds to wait for a reply, plus `latency`; defaults to `hive.metastore.client.socket.timeout` "
        "when set (waggle addition).",
    ),
    Setting("pool-max-idle", "16", "Idle upstream connections kept open to this metastore (waggle addition)."),
    Setting("impersonation-enabled", "false", "Kerberos impersonation; not implemented.", False),
    Setting("hive-metastore-filter-hook", "-", "Java filter hook class; not applicable.", False),
    Setting("glue-config", "-", "AWS Glue catalogs; not implemented.", False),
    Setting("read-only-remote-meta-store-uris", "-", "Not implemented.", False),
    Setting("read-only-glue-config", "-", "Not implemented.", False),
    Setting("status", "-", "Runtime status in Waggle Dance's REST output; ignored in files.", False),
)


def markdown_table(settings: tuple[Setting, ...]) -> str:
    rows = ["| Key | Default | Meaning |", "|---|---|---|"]
    for s in settings:
        note = "" if s.implemented else " *(accepted with a warning)*"
        rows.append(f"| `{s.key}` | {s.default} | {s.doc}{note} |")
    return "\n".join(rows)


def main() -> None:  # pragma: no cover - documentation helper
    print("### Server file\n")
    print(markdown_table(SERVER_SETTINGS))
    print("\n### Federation file: every metastore (`primary-meta-store`, `federated-meta-stores[]`)\n")
    print(markdown_table(METASTORE_SETTINGS))


if __name__ == "__main__":  # pragma: no cover
    main()
