"""The Hive and Hadoop keys waggle reads from ``configuration-properties``, declared once like every other
setting (:mod:`waggle.config.registry`): the server file's and each metastore's. The configuration reference
(docs/reference/configuration.md) lists them from here."""

from __future__ import annotations

from waggle.config.registry import Section, Setting
from waggle.config.validators import (
    boolean,
    count_or_none,
    duration_ms,
    hive_flag,
    optional_string,
    protection,
    string,
    timeout_ms,
)

HIVE_SERVER = Section("server configuration-properties")
HIVE_METASTORE = Section("metastore configuration-properties")


class HiveServer:
    """Hive and Hadoop keys of the server file's ``configuration-properties`` that waggle reads."""

    SASL = HIVE_SERVER.add("hive.metastore.sasl.enabled", False, boolean(),
                           "`true`: clients must authenticate with Kerberos (GSSAPI) or a waggle delegation token "
                           "(DIGEST-MD5); anyone else is refused before a call is read.")
    PRINCIPAL = HIVE_SERVER.add(
        "hive.metastore.kerberos.principal", None, optional_string(),
        "waggle's own principal, e.g. `hive/_HOST@REALM` (`_HOST` becomes this host's name). Waggle Dance's "
        "`hive.server2.authentication.kerberos.principal` is read when this is absent.",
    )
    KEYTAB = HIVE_SERVER.add(
        "hive.metastore.kerberos.keytab.file", None, optional_string(),
        "Keytab holding waggle's principal; waggle logs in from it (no kinit) and renews before expiry. Waggle "
        "Dance's `hive.server2.authentication.kerberos.keytab` is read when this is absent.",
    )
    WD_PRINCIPAL = HIVE_SERVER.add("hive.server2.authentication.kerberos.principal", None, optional_string(),
                                   "Waggle Dance's spelling of the principal.")
    WD_KEYTAB = HIVE_SERVER.add("hive.server2.authentication.kerberos.keytab", None, optional_string(),
                                "Waggle Dance's spelling of the keytab.")
    PROTECTION = HIVE_SERVER.add(
        "hadoop.rpc.protection", ("auth",), protection(),
        "Quality of protection offered to GSSAPI clients: `authentication` (`auth`), `integrity` (`auth-int`), "
        "`privacy` (`auth-conf`), or a comma-separated list of them.", "authentication",
    )
    AUTH_TO_LOCAL = HIVE_SERVER.add(
        "hadoop.security.auth_to_local", "DEFAULT", string(),
        "Hadoop's rules mapping principals to the short user names metastores see.",
    )
    RENEW_INTERVAL = HIVE_SERVER.add(
        "hive.cluster.delegation.token.renew-interval", 86_400_000, duration_ms(),
        "How long a waggle delegation token lives unless renewed.", "1d",
    )
    MAX_LIFETIME = HIVE_SERVER.add(
        "hive.cluster.delegation.token.max-lifetime", 7 * 86_400_000, duration_ms(),
        "The longest a waggle delegation token can be renewed to.", "7d",
    )
    USE_SSL = HIVE_SERVER.add("hive.metastore.use.SSL", False, boolean(),
                              "`true`: the Thrift port speaks TLS (with `tls.certificate-file` and `tls.key-file`).")
    FRAMED = HIVE_SERVER.add("hive.metastore.thrift.framed.transport.enabled", False, hive_flag(),
                             "`true`: the default of `transport` is `framed`.")
    COMPACT = HIVE_SERVER.add("hive.metastore.thrift.compact.protocol.enabled", False, hive_flag(),
                              "`true`: the default of `protocol` is `compact`.")
    MAX_THREADS = HIVE_SERVER.add("hive.metastore.server.max.threads", None, count_or_none(),
                                  "The default of `max-connections`.")


class HiveMetastore:
    """Hive and Hadoop keys of a metastore's ``configuration-properties`` that waggle reads."""

    SASL = HIVE_METASTORE.add("hive.metastore.sasl.enabled", False, boolean(),
                              "`true`: connect with Kerberos (GSSAPI) as waggle's principal.")
    PRINCIPAL = HIVE_METASTORE.add(
        "hive.metastore.kerberos.principal", None, optional_string(),
        "The metastore's principal, e.g. `hive/_HOST@REALM`; `_HOST` becomes the host of the URI waggle "
        "connects to (through an SSH tunnel too).",
    )
    PROTECTION = HIVE_METASTORE.add(
        "hadoop.rpc.protection", ("auth",), protection(),
        "Protection waggle asks for, in order of preference (as the server's key).", "authentication",
    )
    USE_SSL = HIVE_METASTORE.add("hive.metastore.use.SSL", False, boolean(), "`true`: connect with TLS.")
    SOCKET_TIMEOUT = HIVE_METASTORE.add(
        "hive.metastore.client.socket.timeout", None, timeout_ms(),
        "The default of `read-timeout`: `600s`, `5000ms`, `10m`, or seconds without a unit.",
    )
    FRAMED = HIVE_METASTORE.add("hive.metastore.thrift.framed.transport.enabled", False, hive_flag(),
                                "`true`: speak the framed transport to this metastore.")
    COMPACT = HIVE_METASTORE.add("hive.metastore.thrift.compact.protocol.enabled", False, hive_flag(),
                                 "`true`: speak the compact protocol to this metastore.")


HIVE_SERVER_SETTINGS: tuple[Setting[object], ...] = HIVE_SERVER.settings
HIVE_METASTORE_SETTINGS: tuple[Setting[object], ...] = HIVE_METASTORE.settings
