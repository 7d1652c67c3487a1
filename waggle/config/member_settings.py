"""Every key of one metastore of the federation file (``primary-meta-store`` and each of
``federated-meta-stores``), declared once like the server file's (:mod:`waggle.config.settings`): read by
:mod:`waggle.config.loader`, listed in docs/reference/configuration.md from here (``python -m waggle.docs``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from waggle.config.kinds import (
    AccessControlType,
    CacheMode,
    CopyReads,
    PartialCopies,
)
from waggle.config.registry import REQUIRED, Section, Setting
from waggle.config.validators import (
    age_seconds,
    aliases,
    boolean,
    choice,
    hive_version,
    integer,
    optional_string,
    regexes,
    string,
    string_map,
    yes_no,
)

_EMPTY: Mapping[str, str] = MappingProxyType({})

# -- the federation file: every metastore ------------------------------------------------------------------------
METASTORE = Section("metastore")


class Metastore:
    """Keys of each metastore of the federation file (``primary-meta-store``, ``federated-meta-stores[]``)."""

    NAME = METASTORE.add("name", "", string(), "Unique name of the metastore; used in logs, metrics and errors.",
                         REQUIRED)
    URIS = METASTORE.add("remote-meta-store-uris", "", None,
                         "Comma-separated `thrift://host:port` list, tried in order until one connects.", REQUIRED)
    DATABASE_PREFIX = METASTORE.add(
        "database-prefix", "", string(), "Prefix of this metastore's databases in `PREFIXED` mode (lower-cased).",
        "primary: empty; federated: `<name>_`",
    )
    ACCESS_CONTROL_TYPE = METASTORE.add(
        "access-control-type", AccessControlType.READ_ONLY, choice(AccessControlType),
        "`READ_ONLY`, `READ_AND_WRITE_AND_CREATE` (primary only), `READ_AND_WRITE_ON_DATABASE_WHITELIST`, "
        "`READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST` (primary only).",
    )
    WRITABLE_DATABASES: Setting[tuple[re.Pattern[str], ...]] = METASTORE.add(
        "writable-database-white-list", (), regexes(), "Case-insensitive regexes of databases that may be written.",
    )
    MAPPED_DATABASES: Setting[tuple[re.Pattern[str], ...] | None] = METASTORE.add(
        "mapped-databases", None, regexes(), "Case-insensitive regexes of visible databases; `[]` shows none.",
        "null (all)",
    )
    MAPPED_TABLES = METASTORE.add("mapped-tables", None, None,
                                  "Per database, `{database: db, mapped-tables: [regex, ...]}`.", "null (all)")
    DATABASE_NAME_MAPPING = METASTORE.add("database-name-mapping", _EMPTY, aliases(),
                                          "`{name-in-metastore: alias}`; both names are served.")
    LATENCY = METASTORE.add("latency", 0, integer(0),
                            "Extra milliseconds this metastore may take, added to its timeouts.")
    TUNNEL = METASTORE.add("metastore-tunnel", None, None,
                           "Reach this metastore through SSH; the keys below. One tunnel per metastore, shared by "
                           "all clients, run in a helper process and rebuilt when it breaks.")
    TUNNEL_ROUTE = METASTORE.add(
        "metastore-tunnel.route", "", string(),
        "Hops `user@host -> user@host -> ...`; `user@` defaults to the OS user running waggle. The last hop "
        "opens the connection to the `remote-meta-store-uris` hosts (tried in order).", REQUIRED,
    )
    TUNNEL_PRIVATE_KEYS = METASTORE.add(
        "metastore-tunnel.private-keys", "", string(),
        "Comma-separated private key files, tried on every hop. Keys with a passphrase are not supported.", REQUIRED,
    )
    TUNNEL_KNOWN_HOSTS = METASTORE.add(
        "metastore-tunnel.known-hosts", None, optional_string(),
        "OpenSSH known_hosts file; a hop on a port other than 22 is looked up as `[host]:port`.",
        "`~/.ssh/known_hosts`",
    )
    TUNNEL_PORT = METASTORE.add("metastore-tunnel.port", 22, integer(1, 65535), "SSH port of every hop.")
    TUNNEL_LOCALHOST = METASTORE.add("metastore-tunnel.localhost", "localhost", string(),
                                     "Address the tunnel's local forwarded port listens on.")
    TUNNEL_TIMEOUT = METASTORE.add(
        "metastore-tunnel.timeout", 60000, integer(0),
        "Milliseconds per hop to connect, handshake, authenticate and open a channel; `0` means no limit.",
    )
    TUNNEL_STRICT_HOST_KEY_CHECKING = METASTORE.add(
        "metastore-tunnel.strict-host-key-checking", True, yes_no("yes or no"),
        "`yes`: a hop whose host key is missing from `known-hosts` or differs is refused. `no`: accepted, "
        "with a warning in the log. YAML booleans are accepted too.", "yes",
    )
    CONFIGURATION_PROPERTIES = METASTORE.add(
        "configuration-properties", _EMPTY, string_map(),
        "Hive client properties: `hive.metastore.client.socket.timeout` sets the read timeout, "
        "`hive.metastore.thrift.framed.transport.enabled` / `...compact.protocol.enabled` the wire format.",
    )
    HIVE_VERSION = METASTORE.add(
        "hive-version", None, hive_version(),
        "The metastore's Hive version, e.g. `2.3.10`, `3.1.3`, `4.0.1` (waggle addition). Optional: without "
        "it waggle learns from the metastore's answers what it lacks. With it, version bridges apply from the "
        "first call, and Hive 4's `tablesPattern` is passed through instead of expanded.",
    )
    CONNECT_TIMEOUT = METASTORE.add("connect-timeout", 2000, integer(1),
                                    "Milliseconds to open a connection, plus `latency` (waggle addition).")
    READ_TIMEOUT = METASTORE.add(
        "read-timeout", 600000, integer(1),
        "Milliseconds to wait for a reply, plus `latency`; defaults to `hive.metastore.client.socket.timeout` "
        "when set (waggle addition).",
    )
    POOL_MAX_IDLE: Setting[int | None] = METASTORE.add(
        "pool-max-idle", None, integer(0),
        "Most idle upstream connections kept open to this metastore, over all users; over it, the one released "
        "longest ago is closed. Unset, the bound is `limits.max-calls-per-metastore` and the pool follows "
        "demand (see `pool-idle-timeout`). `0` keeps none: every call opens a connection (waggle addition).",
        "none (follow demand)",
    )
    POOL_IDLE_TIMEOUT = METASTORE.add(
        "pool-idle-timeout", 60, integer(0),
        "Seconds an idle upstream connection is kept unused before it is closed. The pool thus keeps, per user, "
        "as many connections as the most calls in flight at once during that time, and gives back those a "
        "burst opened (each holds a metastore server thread) that long after it. `0`: never closed for being "
        "unused (waggle addition).",
    )
    READ_FROM_COPIES = METASTORE.add(
        "read-from-copies", CopyReads.NEVER, choice(CopyReads),
        "Answer reads of this member's tables from their copies in the primary (made by `waggle sync`): `never`; "
        "`when-down`, while the member is down; `prefer`, always, partition by partition where the copy holds "
        "them. Writes always go to the member. Federated members only (waggle addition).",
    )
    MAX_STALENESS: Setting[int | None] = METASTORE.add(
        "max-staleness", None, age_seconds(),
        "A copy not confirmed in sync with its source for longer than this (`600`, `600s`, `15m`, `2h`, `1d`) "
        "is not read (waggle addition).", "none (no limit)",
    )
    CACHE = METASTORE.add(
        "cache", CacheMode.OFF, choice(CacheMode),
        "Answer the reads clients repeat (databases, tables, table listings, partitions, partition names) from "
        "waggle's memory: `off`; `ttl`, each reply kept for `cache-ttl`; `events`, kept while the member's "
        "notification log says nothing it names changed (read twice a second; a change made at the member "
        "directly is seen within a second). Writes through waggle drop what they name before they are answered. "
        "See \"Caching\" (waggle addition).",
    )
    CACHE_TTL = METASTORE.add(
        "cache-ttl", 60, age_seconds(),
        "`cache: ttl`: how long a reply is kept (`60`, `60s`, `5m`) (waggle addition).",
    )
    CACHE_SHARED = METASTORE.add(
        "cache-shared-across-users", False, boolean(),
        "With `impersonation-enabled`, replies are kept per user (the member may authorize each caller), unless "
        "this says the member does no per-user authorization (waggle addition).",
    )
    PARTIAL = METASTORE.add(
        "partial", PartialCopies.SOURCE, choice(PartialCopies),
        "`read-from-copies: prefer`: partitions the copy lacks, or holds older than the source, are read from "
        "the member (`source`), or the read is refused naming them (`refuse`) (waggle addition).",
    )


    IMPERSONATION = METASTORE.add(
        "impersonation-enabled", False, boolean(),
        "Kerberos only: act for each caller. waggle gets the caller's delegation token from this metastore as a "
        "proxy user (`hadoop.proxyuser.<waggle>.*` there), keeps it, renews it, and connects with it over "
        "DIGEST-MD5, so the metastore sees the caller, not waggle.",
    )
    TLS_ENABLED = METASTORE.add(
        "tls.enabled", False, boolean(),
        "Connect with TLS; Hive's `hive.metastore.use.SSL` in `configuration-properties` does the same "
        "(waggle addition).",
    )
    TLS_CA = METASTORE.add("tls.ca-file", None, optional_string(),
                           "PEM CA bundle that signed the metastore's certificate; the system's when unset.")
    TLS_CERTIFICATE = METASTORE.add("tls.certificate-file", None, optional_string(),
                                    "PEM client certificate, for a metastore that asks for one.")
    TLS_KEY = METASTORE.add("tls.key-file", None, optional_string(), "PEM key of `tls.certificate-file`.")
    TLS_CHECK_HOSTNAME = METASTORE.add(
        "tls.check-hostname", True, boolean(),
        "Check that the certificate names the host of `remote-meta-store-uris` (also through an SSH tunnel).",
    )


METASTORE.ignored("hive-metastore-filter-hook", "-", "Java filter hook class; not applicable.")
METASTORE.ignored("glue-config", "-", "AWS Glue catalogs; not implemented.")
METASTORE.ignored("read-only-remote-meta-store-uris", "-", "Not implemented.")
METASTORE.ignored("read-only-glue-config", "-", "Not implemented.")
METASTORE.ignored("status", "-", "Runtime status in Waggle Dance's REST output; ignored in files.")

# -- one entry of a metastore's mapped-tables -------------------------------------------------------------------
MAPPED_TABLES_ENTRY = Section("mapped-tables entry")


class MappedTablesEntry:
    """Keys of each entry of a metastore's ``mapped-tables`` (documented with it)."""

    DATABASE = MAPPED_TABLES_ENTRY.add("database", "", string(), "The database whose tables are mapped.")
    TABLES: Setting[tuple[re.Pattern[str], ...]] = MAPPED_TABLES_ENTRY.add(
        "mapped-tables", (), regexes(), "Case-insensitive regexes of its visible tables.",
    )



#: The registry the tests and the configuration reference read.
METASTORE_SETTINGS: tuple[Setting[object], ...] = METASTORE.settings
