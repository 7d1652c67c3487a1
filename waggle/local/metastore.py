"""Real, local, Derby-backed Hive metastores started from the Hive jars that pyspark bundles.

Used by ``waggle demo``, the test harness and the benchmarks. Each instance owns a directory (Derby locks it)
holding ``hive-site.xml``, the Derby database, the warehouse and the JVM's log.

They behave as production metastores: none runs with ``hive.in.test``. Hive 2.3 creates its transaction and lock
tables (``TXNS``, ``HIVE_LOCKS``, ...) in Derby only under that flag, and the flag also makes ``lock()`` refuse
every lock component without an operation type, which is what Iceberg clients send. So a template database is
prepared once (started with the flag, one transaction call creates the tables, stopped) and every instance
starts from a copy of it, without the flag. See :func:`prepare_template`.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from waggle.config.model import ProtocolKind, TransportKind, WireFormat
from waggle.local.jvm import (
    LocalMetastoreError,
    PortTaken,
    cache_dir,
    free_port,
    java_executable,
    port_taken,
    pyspark_jars_dir,
)
from waggle.local.listener import CLEANER_INTERVAL_KEY, LISTENER_CLASS, LISTENERS_KEY, TTL_KEY, listener_jar

METASTORE_MAIN = "org.apache.hadoop.hive.metastore.HiveMetaStore"


# Warnings to the log, plus the metastore's audit trail (one line per call with the caller's ugi).
_LOG4J2 = """status = WARN
name = waggle-local-metastore
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = console
logger.audit.name = org.apache.hadoop.hive.metastore.HiveMetaStore.audit
logger.audit.level = INFO
"""


# With Kerberos: the keytab login ("Login successful for user ... using keytab file") shows the JVM got that far.
_LOG4J2_KERBEROS = """logger.ugi.name = org.apache.hadoop.security.UserGroupInformation
logger.ugi.level = INFO
"""


@dataclass(frozen=True)
class KerberosSetup:
    """What a Kerberized metastore needs: its service principal and keytab, the realm's ``krb5.conf``, and the
    short names of the services allowed to act for other users (Hadoop proxy users, e.g. ``waggle``)."""

    principal: str  # e.g. hive/localhost@WAGGLE.TEST
    keytab: Path
    krb5_conf: Path
    proxy_users: tuple[str, ...] = ()
    #: realms whose principals map to their first component (``alice@R`` and ``waggle/localhost@R`` to
    #: ``alice`` and ``waggle``); the service principal's realm is always one
    local_realms: tuple[str, ...] = ()

    @property
    def realm(self) -> str:
        return self.principal.rpartition("@")[2]

    def auth_to_local(self) -> str:
        realms = dict.fromkeys((self.realm, *self.local_realms))
        rules = [f"RULE:[{n}:$1@$0](.*@{re.escape(r)})s/@.*//" for r in realms for n in (1, 2)]
        return "\n".join([*rules, "DEFAULT"])

    def hive_site(self) -> dict[str, str]:
        return {
            "hive.metastore.sasl.enabled": "true",
            "hive.metastore.kerberos.principal": self.principal,
            "hive.metastore.kerberos.keytab.file": str(self.keytab),
        }

    def core_site(self) -> dict[str, str]:
        props = {
            "hadoop.security.authentication": "kerberos",
            "hadoop.security.auth_to_local": self.auth_to_local(),
        }
        for user in self.proxy_users:
            for key in ("hosts", "groups", "users"):
                props[f"hadoop.proxyuser.{user}.{key}"] = "*"
        return props


@dataclass(frozen=True)
class TlsSetup:
    """What a metastore serving TLS needs: a Java keystore (PKCS12, Java 17's default, or JKS) holding its key
    and certificate. ``ca_file`` (PEM), when given, is what :meth:`LocalMetastore.wait_ready` trusts."""

    keystore: Path
    password: str
    ca_file: Path | None = None

    def hive_site(self) -> dict[str, str]:
        """The keys Hive 2.3's ``HiveMetaStore.startMetaStore`` reads for TLS on the Thrift port."""
        return {
            "hive.metastore.use.SSL": "true",
            "hive.metastore.keystore.path": str(self.keystore),
            "hive.metastore.keystore.password": self.password,
        }

    def client_context(self) -> ssl.SSLContext:
        """A context trusting ``ca_file`` (without checking the host name), or trusting anything without it."""
        if self.ca_file is None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.check_hostname = False
        return context


def _site_xml(props: dict[str, str]) -> str:
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in props.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


#: the Hive properties that make a metastore speak framed Thrift, or the compact protocol
FRAMED_KEY = "hive.metastore.thrift.framed.transport.enabled"
COMPACT_KEY = "hive.metastore.thrift.compact.protocol.enabled"


@dataclass
class LocalMetastore:
    """One Hive 2.3 metastore JVM on a loopback port."""

    workdir: Path
    port: int = 0
    heap: str = "768m"
    #: Quick start-up (client compiler only) for tests and the demo; benchmarks turn it off.
    fast_start: bool = True
    extra_conf: dict[str, str] = field(default_factory=dict)
    #: start from a copy of the prepared template (transaction tables included); off only to build it
    from_template: bool = True
    process: subprocess.Popen[bytes] | None = None
    #: Kerberos (SASL GSSAPI, and DIGEST-MD5 with delegation tokens) instead of plain Thrift
    kerberos: KerberosSetup | None = None
    #: TLS on the Thrift port (``hive.metastore.use.SSL``)
    tls: TlsSetup | None = None
    #: write notification events as production metastores do (waggle's listener, :mod:`waggle.local.listener`)
    notifications: bool = True
    #: seconds an event is kept (``hive.metastore.event.db.listener.timetolive``; Hive's default: 86400)
    event_ttl: int | None = None
    #: seconds between the listener's deletions of expired events (Hive's: 60)
    event_cleaner_interval: int | None = None

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir).resolve()
        if not self.port:
            self.port = free_port()

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> Path:
        return self.workdir / "warehouse"

    @property
    def wire(self) -> WireFormat:
        """What it speaks: unframed binary, unless ``extra_conf`` turns on Hive's framed transport or compact
        protocol."""
        def on(key: str) -> bool:
            return self.extra_conf.get(key, "false").lower() == "true"

        return WireFormat(TransportKind.FRAMED if on(FRAMED_KEY) else TransportKind.BUFFERED,
                          ProtocolKind.COMPACT if on(COMPACT_KEY) else ProtocolKind.BINARY)

    @property
    def log_path(self) -> Path:
        return self.workdir / "metastore.log"

    def start(self) -> LocalMetastore:
        """Start the JVM without waiting for it; call :meth:`wait_ready` next. A port another process listens on
        is refused here: the readiness check would find that process answering."""
        busy = port_taken(self.port, reuse_address=True)
        if busy:
            raise PortTaken(f"port {self.port} is taken ({busy}): another process listens on it")
        conf = self.workdir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        database = self.workdir / "metastore_db"
        if self.from_template and not database.exists():
            shutil.copytree(prepare_template() / "metastore_db", database)
            self._own_default_database(database)
        props = {
            "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={self.workdir}/metastore_db;create=true",
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
            "hive.metastore.warehouse.dir": f"file://{self.warehouse}",
            "hive.async.log.enabled": "false",
            "hive.metastore.event.db.notification.api.auth": "false",
            # BoneCP (the default pool) is not among the jars pyspark ships; DBCP is.
            "datanucleus.connectionPoolingType": "dbcp",
        }
        if self.kerberos is not None:
            props.update(self.kerberos.hive_site())
            (conf / "core-site.xml").write_text(_site_xml(self.kerberos.core_site()))
        if self.tls is not None:
            props.update(self.tls.hive_site())
        jars = [str(pyspark_jars_dir() / "*")]
        if self.notifications:
            jars.append(str(listener_jar()))
            props[LISTENERS_KEY] = LISTENER_CLASS
            if self.event_ttl is not None:
                props[TTL_KEY] = f"{self.event_ttl}s"
            if self.event_cleaner_interval is not None:
                props[CLEANER_INTERVAL_KEY] = str(self.event_cleaner_interval)
        props.update(self.extra_conf)
        (conf / "hive-site.xml").write_text(_site_xml(props))
        (conf / "hive-log4j2.properties").write_text(_LOG4J2 + (_LOG4J2_KERBEROS if self.kerberos else ""))
        classpath = os.pathsep.join([str(conf), *jars])
        cmd = [
            java_executable(),
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            *(["-XX:TieredStopAtLevel=1"] if self.fast_start else []),
            f"-Dderby.system.home={self.workdir}",
            *([f"-Djava.security.krb5.conf={self.kerberos.krb5_conf}"] if self.kerberos else []),
            "-cp",
            classpath,
            METASTORE_MAIN,
            "-p",
            str(self.port),
        ]
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
            start_new_session=True,
        )
        log.close()
        return self

    def wait_ready(self, timeout: float = 120.0) -> LocalMetastore:
        """Block until the metastore answers a real Thrift call (with Kerberos: the first step of a SASL
        negotiation; with TLS: the call, over TLS), or raise with the log's tail."""
        from waggle.local.client import hms_client

        logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)  # refusals are expected here
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise LocalMetastoreError(
                    f"metastore on port {self.port} exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                if self.kerberos is not None:
                    _sasl_probe("127.0.0.1", self.port, timeout=5.0)
                elif self.tls is not None:
                    _tls_probe("127.0.0.1", self.port, self.tls.client_context(), timeout=5.0)
                else:
                    with hms_client("127.0.0.1", self.port, timeout=5.0, wire=self.wire) as client:
                        client.get_all_databases()
                return self
            except Exception as exc:
                last_error = exc
                time.sleep(0.5)
        raise LocalMetastoreError(
            f"metastore on port {self.port} not ready after {timeout:.0f}s ({last_error}):\n{self.log_tail()}"
        )

    def _own_default_database(self, database: Path) -> None:
        """Point ``default`` at this instance's warehouse: the copied template names the template's.

        Hive 2.3's ``alter_database`` ignores a new location, so this is one SQL update with Derby's own tool.
        """
        location = f"file:{self.warehouse}".replace("'", "''")
        _derby_sql(database, f"UPDATE APP.DBS SET DB_LOCATION_URI = '{location}' WHERE NAME = 'default';\n",
                   "1 row inserted/updated/deleted", "set the default database's location")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 20.0) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crashed metastore would."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def _sasl_probe(host: str, port: int, timeout: float) -> None:
    """Prove a SASL Thrift server serves, without credentials: start a DIGEST-MD5 negotiation (which a Kerberized
    metastore always offers, for delegation tokens) and expect its challenge. A metastore still starting up
    accepts the connection but answers nothing. The probe then ends the negotiation with an ERROR message, which
    the metastore logs as "Peer indicated failure: waggle readiness probe"."""
    mechanism = b"DIGEST-MD5"

    def read(sock: socket.socket, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the metastore closed the SASL negotiation")
            data += chunk
        return data

    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">BI", 1, len(mechanism)) + mechanism + struct.pack(">BI", 2, 0))
        status, length = struct.unpack(">BI", read(sock, 5))
        if status != 2 or not length:
            raise ConnectionError(f"unexpected SASL answer: status {status}, {length} bytes")
        read(sock, length)  # the DIGEST-MD5 challenge
        reason = b"waggle readiness probe"
        sock.sendall(struct.pack(">BI", 4, len(reason)) + reason)


def _tls_probe(host: str, port: int, context: ssl.SSLContext, timeout: float) -> None:
    """One ``get_all_databases`` over TLS (unframed binary, as Hive clients over TLS send it)."""
    from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
    from thrift.transport.TSocket import TSocket
    from thrift.transport.TTransport import TBufferedTransport

    from waggle.hms.gen.hive_metastore import ThriftHiveMetastore

    raw = socket.create_connection((host, port), timeout=timeout)
    try:
        tls = context.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise
    sock = TSocket(host, port)
    sock.setHandle(tls)
    transport = TBufferedTransport(sock)
    try:
        ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(transport)).get_all_databases()
    finally:
        transport.close()


def _derby_sql(database: Path, script: str, expect: str, what: str) -> None:
    """Run SQL on a stopped metastore's Derby database with Derby's own tool; fail unless it prints ``expect``."""
    jars = pyspark_jars_dir()
    classpath = os.pathsep.join(str(j) for pattern in ("derby-*.jar", "derbytools-*.jar", "derbyshared-*.jar")
                                for j in jars.glob(pattern))
    file = database.parent / f"{database.name}.sql"
    file.write_text(script)
    try:
        done = subprocess.run(
            [java_executable(), "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
             f"-Dderby.system.home={database.parent}", f"-Dij.connection.metastore=jdbc:derby:;databaseName={database}",
             "-cp", classpath, "org.apache.derby.tools.ij", str(file)],
            capture_output=True, text=True, cwd=database.parent, stdin=subprocess.DEVNULL, timeout=120,
        )
    finally:
        file.unlink(missing_ok=True)
    if done.returncode != 0 or expect not in done.stdout or "ERROR" in done.stdout:
        raise LocalMetastoreError(f"could not {what} in {database}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


#: The notification log's tables as Hive's own Derby schema script (``hive-schema-2.3.0.derby.sql``) makes them.
#: Left to DataNucleus, the message would be a LONG VARCHAR of at most 32,700 characters, and a change whose
#: message is longer (an ``add_partitions`` of a few hundred partitions) would fail. The sequence starts with its
#: one row and the events are indexed by id, as Hive 3's schema scripts make them (the index is not unique:
#: Hive 2.3 may give concurrent changes one id, HIVE-16886), so that reading the events after an id does not scan
#: the whole log.
_NOTIFICATION_TABLES = """CREATE TABLE APP.NOTIFICATION_LOG (NL_ID BIGINT NOT NULL, DB_NAME VARCHAR(128),
 EVENT_ID BIGINT NOT NULL, EVENT_TIME INTEGER NOT NULL, EVENT_TYPE VARCHAR(32) NOT NULL, MESSAGE CLOB,
 TBL_NAME VARCHAR(256), MESSAGE_FORMAT VARCHAR(16));
ALTER TABLE APP.NOTIFICATION_LOG ADD CONSTRAINT NOTIFICATION_LOG_PK PRIMARY KEY (NL_ID);
CREATE TABLE APP.NOTIFICATION_SEQUENCE (NNI_ID BIGINT NOT NULL, NEXT_EVENT_ID BIGINT NOT NULL);
ALTER TABLE APP.NOTIFICATION_SEQUENCE ADD CONSTRAINT NOTIFICATION_SEQUENCE_PK PRIMARY KEY (NNI_ID);
INSERT INTO APP.NOTIFICATION_SEQUENCE (NNI_ID, NEXT_EVENT_ID) VALUES (1, 1);
CREATE INDEX APP.NOTIFICATION_LOG_EVENTID ON APP.NOTIFICATION_LOG (EVENT_ID);
SELECT COUNT(*) AS NOTIFICATION_TABLES FROM SYS.SYSTABLES WHERE TABLENAME LIKE 'NOTIFICATION_%';
"""


def start_metastores(workdirs: list[Path], timeout: float = 180.0) -> list[LocalMetastore]:
    """Start several metastores in parallel and wait until all of them serve."""
    stores = [LocalMetastore(workdir=d).start() for d in workdirs]
    try:
        for store in stores:
            store.wait_ready(timeout)
    except BaseException:
        for store in stores:
            store.stop()
        raise
    return stores


#: bumped when what the template holds changes (2: the notification log's tables, as Hive's schema makes them;
#: 3: the sequence's row; 4: an index on the events' ids, as Hive 3's schema has, not unique: see the listener)
TEMPLATE_VERSION = 4


def template_dir() -> Path:
    """Where the prepared template lives: per Hive release, under ``WAGGLE_CACHE_DIR`` or the user's cache."""
    release = next(pyspark_jars_dir().glob("hive-metastore-*.jar")).stem
    return cache_dir() / f"template-{release}-{TEMPLATE_VERSION}"


def prepare_template(timeout: float = 180.0) -> Path:
    """Prepare, once per machine, a Derby metastore database that holds Hive's transaction and lock tables.

    Safe to call from several processes at once: one prepares it under a file lock, the others wait for it.
    """
    target = template_dir()
    ready = target / "READY"
    if ready.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return target
        build = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
        store = LocalMetastore(build, from_template=False, notifications=False, extra_conf={"hive.in.test": "true"})
        try:
            store.start().wait_ready(timeout)
            from waggle.local.client import hms_client

            with hms_client("127.0.0.1", store.port) as client:
                client.get_open_txns()  # creates the transaction and lock tables
        finally:
            store.stop()
        _derby_sql(build / "metastore_db", _NOTIFICATION_TABLES, "NOTIFICATION_TABLES", "create the notification "
                   "log's tables")
        shutil.rmtree(target, ignore_errors=True)
        (build / "READY").write_text("Hive transaction and lock tables created; copy metastore_db from here.\n")
        build.rename(target)
    return target
