"""Misbehaving clients on waggle's Thrift port: garbage, mutated calls, absurd declared lengths, truncated
calls and thousands of idle sockets. Each is disconnected (or answered) in bounded time and bounded memory,
the waggle process stays up, and a well-behaved client keeps getting correct answers throughout.

Everything runs against real waggle processes in front of a real Hive metastore: the session ``waggle``
fixture, plus a few processes of this module's own (``own``) where a test needs other settings or would
disturb the shared one.

The tests at the end reproduce defects these tests once found: a call flagged ONEWAY for a two-way method, a
UUID field (type 16) that the metastore's older Thrift cannot skip, identities that piled up in the pools,
declared lengths in skipped fields, and nesting deeper than Thrift decodes.
"""

from __future__ import annotations

import os
import random
import resource
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as T
from hmsclient.genthrift.hive_metastore import ttypes
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TMessageType, TType
from thrift.transport.TTransport import TMemoryBuffer, TTransportException

from tests.support.clients import encode_call, hive2_client
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess
from tests.support.waits import wait_for

pytestmark = pytest.mark.integration

STRICT_VERSION = 0x80010000
OWN_MAX_MESSAGE = 1 << 20  # limits.max-message-bytes of this module's own processes
IDLE_SOCKETS = 2000
CLOSE_WITHIN = 5.0  # seconds a misbehaving client may stay connected once waggle has all it needs to decide


# -- encoding ---------------------------------------------------------------------------------------------
def call_header(name: str, seqid: int = 1, mtype: int = TMessageType.CALL) -> bytes:
    encoded = name.encode()
    return struct.pack("!Ii", STRICT_VERSION | mtype, len(encoded)) + encoded + struct.pack("!i", seqid)


def field_header(ttype: int, fid: int) -> bytes:
    return struct.pack("!bh", ttype, fid)


GET_DEFAULT = encode_call("get_database", T.get_database_args(name="default"))
NAME_DEFAULT = field_header(TType.STRING, 1) + struct.pack("!i", 7) + b"default"  # get_database_args.name

VALID_CALLS = [
    GET_DEFAULT,
    encode_call("get_table", T.get_table_args(dbname="default", tbl_name="fuzz_no_such_table"), seqid=2),
    encode_call("get_all_databases", T.get_all_databases_args(), seqid=3),
    encode_call("get_databases", T.get_databases_args(pattern="def*"), seqid=4),
    encode_call("get_table_objects_by_name",
                T.get_table_objects_by_name_args(dbname="default", tbl_names=["fuzz_a", "fuzz_b"]), seqid=5),
    encode_call("fuzz_unknown_method", T.get_database_args(name="default"), seqid=6),
]


# -- talking to waggle as a misbehaving client ----------------------------------------------------------------
@dataclass
class Outcome:
    end: str  # "eof" (waggle closed), "reset" (closed with our bytes unread) or "open" (still connected)
    seconds: float
    data: bytes
    local_port: int

    @property
    def closed(self) -> bool:
        return self.end in ("eof", "reset")


def exchange(port: int, payload: bytes, *, half_close: bool = True, timeout: float = CLOSE_WITHIN) -> Outcome:
    """Send ``payload``; with ``half_close`` also signal end-of-stream (so a message cut short is seen as
    such). Then read until waggle closes the connection or ``timeout`` passes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    local_port = sock.getsockname()[1]
    started = time.monotonic()
    data = bytearray()
    end = "open"
    try:
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except TimeoutError:  # waggle stopped reading but kept the connection
            return Outcome("open", time.monotonic() - started, bytes(data), local_port)
        except OSError:
            pass  # waggle hung up while we were still sending: read whatever it said first
        deadline = started + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                end = "reset"
                break
            if not chunk:
                end = "eof"
                break
            data += chunk
    finally:
        sock.close()
    return Outcome(end, time.monotonic() - started, bytes(data), local_port)


def replies_in(outcome: Outcome) -> list[tuple[str, int, int]]:
    """What waggle sent back: whole REPLY / EXCEPTION messages only (after a reset, a cut tail is allowed)."""
    data = outcome.data
    buf = TMemoryBuffer(data)
    proto = TBinaryProtocol(buf, strictRead=True)
    found = []
    pos = 0
    while pos < len(data):
        try:
            name, mtype, seqid = proto.readMessageBegin()
            proto.skip(TType.STRUCT)
        except (EOFError, TTransportException, TProtocolException) as exc:
            assert outcome.end == "reset", f"waggle sent something that is not a reply ({exc}): {data[pos:][:80]!r}"
            break
        assert mtype in (TMessageType.REPLY, TMessageType.EXCEPTION), f"waggle sent message type {mtype}"
        found.append((name, mtype, seqid))
        pos = buf._buffer.tell()
    return found


def assert_closed_or_answered(port: int, payload: bytes, what: str, *, half_close: bool = True) -> Outcome:
    outcome = exchange(port, payload, half_close=half_close)
    assert outcome.closed, (f"{what}: waggle kept the connection open for {outcome.seconds:.1f}s "
                            f"(payload starts {payload[:32]!r})")
    replies_in(outcome)
    return outcome


def assert_disconnected_promptly(port: int, payload: bytes, what: str, within: float = 3.0) -> Outcome:
    """The bytes sent already break the rules: waggle must hang up without waiting for more (or for EOF)."""
    outcome = exchange(port, payload, half_close=False, timeout=within)
    assert outcome.closed, f"{what}: still connected after {within}s (payload starts {payload[:32]!r})"
    assert not replies_in(outcome), f"{what}: answered instead of disconnected"
    return outcome


def plausible_start(data: bytes) -> bool:
    """Could a binary Thrift message start with these bytes? (a strict version word, or the length of a short
    old-style name). Under 8 bytes it cannot tell yet: waggle reads the first 8 bytes of a header at once."""
    if len(data) < 8:
        return True
    word = struct.unpack("!i", data[:4])[0]
    return 0 <= word <= 1024 or (word < 0 and (word & 0xFFFF0000) == STRICT_VERSION - (1 << 32))


# -- waggle's process, from outside ------------------------------------------------------------------------------
def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def unread(port: int, clients: list[socket.socket]) -> int | None:
    """Bytes these clients sent that the server on ``port`` has not read yet (the receive queues of its ends, in
    /proc/net/tcp); None while some of them are not listed yet."""
    peers = {s.getsockname()[1] for s in clients}
    queued: dict[int, int] = {}
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            local, remote, _state, queues = line.split()[1:5]
            peer = int(remote.rsplit(":", 1)[1], 16)
            if int(local.rsplit(":", 1)[1], 16) == port and peer in peers:
                queued[peer] = int(queues.split(":")[1], 16)
    return sum(queued.values()) if len(queued) == len(peers) else None


def pid_of(proc: WaggleProcess) -> int:
    assert proc.proc is not None
    return proc.proc.pid


def assert_alive(proc: WaggleProcess) -> None:
    assert proc.proc is not None and proc.proc.poll() is None, f"waggle died:\n{proc.log()[-3000:]}"


def wait_for_log(proc: WaggleProcess, event: str, peer: str, within: float = 3.0, since: int = 0
                 ) -> dict[str, Any] | None:
    """The first ``event`` line for ``peer`` after ``since`` (the session's waggle has seen many clients, and an
    ephemeral port comes round again: an older line may name the same peer)."""
    deadline = time.monotonic() + within
    while True:
        for entry in proc.events(event, since):
            if entry.get("peer") == peer:
                return entry
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def assert_served(port: int, within: float = 2.0) -> float:
    """A brand-new, well-behaved connection gets correct answers, fast."""
    started = time.monotonic()
    with hive2_client(port, timeout=10) as c:
        assert c.get_database("default").name == "default"
        assert "default" in c.get_all_databases()
    elapsed = time.monotonic() - started
    assert elapsed < within, f"a well-behaved client needed {elapsed:.2f}s"
    return elapsed


class Observer:
    """A well-behaved hmsclient client calling waggle in a loop, in the background, for a test's duration.
    Every exception or wrong answer is recorded; so is its slowest call.

    Like the misbehaving clients it never calls ``set_ugi``, so it shares their upstream connections. The
    seeded payloads of the robustness tests never flag a call ONEWAY nor carry a UUID field, the two ways found
    to make one client read another's reply (see the tests at the end, which use identities of their own),
    so this stays deterministic.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.calls = 0
        self.failures: list[str] = []
        self.slowest = 0.0
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with hive2_client(self.port, timeout=10) as c:
                self._ready.set()
                while not self._stop.is_set():
                    started = time.monotonic()
                    try:
                        db = c.get_database("default")
                        names = c.get_all_databases()
                        if db.name != "default" or "default" not in names:
                            self.failures.append(f"wrong answer: {db.name!r} / {names!r}")
                    except Exception as exc:
                        self.failures.append(repr(exc))
                        if len(self.failures) > 20:
                            return
                    self.slowest = max(self.slowest, time.monotonic() - started)
                    self.calls += 1
                    self._stop.wait(0.01)
        except Exception as exc:
            self.failures.append(f"observer connection failed: {exc!r}")
        finally:
            self._ready.set()

    def __enter__(self) -> Observer:
        self._thread.start()
        assert self._ready.wait(15), "the observer could not connect"
        assert not self.failures, self.failures
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def check(self, max_latency: float = 2.0) -> None:
        assert not self.failures, f"a well-behaved client was disturbed: {self.failures[:3]}"
        assert self.calls > 0, "the well-behaved client made no call at all"
        assert self.slowest < max_latency, f"a well-behaved client waited {self.slowest:.2f}s for one call"


@contextmanager
def observed(proc: WaggleProcess, max_rss_growth_mb: float = 100.0) -> Iterator[Observer]:
    """Around an abuse: a well-behaved client keeps being served during it and after it, waggle stays alive
    and its memory does not grow by more than ``max_rss_growth_mb``."""
    pid = pid_of(proc)
    before = rss_mb(pid)
    with Observer(proc.port) as obs:
        yield obs
    assert_alive(proc)
    obs.check()
    assert_served(proc.port)
    growth = rss_mb(pid) - before
    assert growth < max_rss_growth_mb, f"waggle's RSS grew by {growth:.0f} MB"


# -- this module's own waggle processes ------------------------------------------------------------------------
def raise_fd_limit(wanted: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE towards ``wanted`` (waggle subprocesses inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return int(soft)


OWN_SERVERS = {
    # room for thousands of idle sockets, and a small message limit to exceed cheaply
    "limits": f"max-connections: {IDLE_SOCKETS + 500}\nlimits:\n  max-message-bytes: {OWN_MAX_MESSAGE}\n",
    "framed": f"transport: framed\nlimits:\n  max-message-bytes: {OWN_MAX_MESSAGE}\n",
    # a fresh process for the set_ugi memory bug, which leaves memory behind
    "ugi": "",
}


@pytest.fixture(scope="module")
def own(primary: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, WaggleProcess]]:
    raise_fd_limit(IDLE_SOCKETS * 2 + 1024)
    procs = {name: WaggleProcess(tmp_path_factory.mktemp(f"fuzz-{name}"), federation_yaml(primary.uri), yaml)
             for name, yaml in OWN_SERVERS.items()}
    try:
        for p in procs.values():
            p.start(wait=False)  # in parallel: each takes a second or two to import and listen
        for p in procs.values():
            p.wait_listening()
        yield procs
    finally:
        for p in procs.values():
            p.stop()


# -- 1. garbage and mutated calls ---------------------------------------------------------------------------------
NOT_THRIFT = {
    "http": b"GET / HTTP/1.1\r\nHost: waggle\r\n\r\n",
    "tls client hello": bytes.fromhex("1603010200010001fc0303") + bytes(64),
    "ssh banner": b"SSH-2.0-OpenSSH_9.6\r\n",
    "json": b'{"method": "get_database", "name": "default"}\n',
    "proxy protocol": b"PROXY TCP4 10.0.0.1 10.0.0.2 1234 48869\r\n",
    "all ones": b"\xff" * 64,
    "compact protocol call": b"\x82\x21\x01\x0cget_database\x00",
    "strict version 2": struct.pack("!Ii", 0x80020001, 12) + b"get_database" + bytes(5),
    "reply instead of call": call_header("get_database", mtype=TMessageType.REPLY) + b"\x00",
    "bad message type": call_header("get_database", mtype=7) + b"\x00",
    "name is not utf-8": struct.pack("!Ii", STRICT_VERSION | 1, 4) + b"\xff\xfe\xfd\xfc" + bytes(5),
}


@pytest.mark.parametrize("kind", sorted(NOT_THRIFT))
def test_other_protocols_are_disconnected_at_once(waggle, kind):
    with observed(waggle):
        outcome = assert_disconnected_promptly(waggle.port, NOT_THRIFT[kind], kind, within=2.0)
        assert outcome.seconds < 1.0, f"{kind}: took {outcome.seconds:.2f}s"


def test_seeded_random_garbage(waggle):
    lengths = [1, 2, 3, 4, 5, 8, 13, 64, 512, 4096, 65536, 1 << 20]
    tally: Counter[str] = Counter()
    with observed(waggle):
        for seed in range(6):
            rng = random.Random(seed)
            for n in lengths:
                payload = rng.randbytes(n)
                what = f"seed {seed}, {n} random bytes"
                if plausible_start(payload):
                    # could be the start of a message: waggle may rightly wait for the rest, until EOF
                    assert_closed_or_answered(waggle.port, payload, what)
                    tally["closed at EOF"] += 1
                else:
                    assert_disconnected_promptly(waggle.port, payload, what)
                    tally["closed at once"] += 1
                # a valid call header followed by random bytes exercises the struct decoder itself
                for name in ("get_database", "get_table", "fuzz_unknown_method"):
                    outcome = assert_closed_or_answered(waggle.port, call_header(name) + payload,
                                                        f"{name} header + {what}")
                    tally["answered" if replies_in(outcome) else "closed"] += 1
    print(f"random garbage: {dict(tally)}")


def mutate(rng: random.Random, message: bytes) -> tuple[bytes, list[str]]:
    data = bytearray(message)
    ops = []
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(("flip", "flip", "truncate", "insert", "delete", "int"))
        at = rng.randrange(len(data)) if data else 0
        if op == "flip" and data:
            data[at] ^= 1 << rng.randrange(8)
        elif op == "truncate":
            del data[at:]
        elif op == "insert":
            data[at:at] = rng.randbytes(rng.randint(1, 16))
        elif op == "delete":
            del data[at:at + rng.randint(1, 8)]
        elif op == "int":  # the classic troublemakers, written over a length or a count
            value = rng.choice((0x7FFFFFFF, -0x80000000, -1, 0, 1024, 1025, 10**6, 10**6 + 1, 10**9))
            data[at:at + 4] = struct.pack("!i", value)
        ops.append(f"{op}@{at}")
    return bytes(data), ops


def test_mutated_valid_calls(waggle):
    tally: Counter[str] = Counter()
    with observed(waggle):
        for seed in range(8):
            rng = random.Random(1000 + seed)
            for i in range(40):
                original = VALID_CALLS[i % len(VALID_CALLS)]
                payload, ops = mutate(rng, original)
                outcome = assert_closed_or_answered(waggle.port, payload, f"seed {1000 + seed}, mutant {i} {ops}")
                tally["answered" if replies_in(outcome) else "disconnected"] += 1
    print(f"mutated calls: {dict(tally)}")
    assert tally["answered"] and tally["disconnected"], "the mutations should produce both outcomes"


# -- 2. absurd declared lengths -----------------------------------------------------------------------------------
GIB2 = 0x7FFFFFFF
OVERSIZED = {
    "string of 2 GiB": call_header("get_database") + field_header(TType.STRING, 1) + struct.pack("!i", GIB2),
    "negative string length": call_header("get_database") + field_header(TType.STRING, 1) + struct.pack("!i", -1),
    "list of 10^9 strings": call_header("get_table_objects_by_name") + field_header(TType.LIST, 2)
    + struct.pack("!bi", TType.STRING, 10**9),
    "negative list size": call_header("get_table_objects_by_name") + field_header(TType.LIST, 2)
    + struct.pack("!bi", TType.STRING, -5),
    "list of 10^9 structs in an unknown field": call_header("get_database") + field_header(TType.LIST, 99)
    + struct.pack("!bi", TType.STRUCT, 10**9),
    "map of 10^9 entries": call_header("create_database") + field_header(TType.STRUCT, 1)
    + field_header(TType.MAP, 4) + struct.pack("!bbi", TType.STRING, TType.STRING, 10**9),
    "set of 10^9 in an unknown field": call_header("get_database") + field_header(TType.SET, 99)
    + struct.pack("!bi", TType.I32, 10**9),
    "list of 10^9 in an unknown method": call_header("fuzz_unknown_method") + field_header(TType.LIST, 1)
    + struct.pack("!bi", TType.I64, 10**9),
    "method name of 2 GiB": struct.pack("!Ii", STRICT_VERSION | 1, GIB2) + b"get_database",
    "old-style method name of 2 GiB": struct.pack("!i", GIB2) + b"get_database",
    "structs nested 200 deep": call_header("get_database") + field_header(TType.STRUCT, 99) * 200,
}


def test_oversized_declared_lengths_are_refused_without_allocating(waggle):
    pid = pid_of(waggle)
    with observed(waggle, max_rss_growth_mb=100):
        before = rss_mb(pid)
        for _ in range(3):
            for what, head in OVERSIZED.items():
                assert_disconnected_promptly(waggle.port, head + b"\x00" * 64, what)
        growth = rss_mb(pid) - before
    print(f"RSS growth after {3 * len(OVERSIZED)} oversized declarations: {growth:+.1f} MB")
    assert growth < 100, f"waggle's RSS grew by {growth:.0f} MB"


def test_message_beyond_the_size_limit(own):
    proc = own["limits"]
    pid = pid_of(proc)
    # just under the limit: answered (the limit is the limit, not less)
    under = encode_call("get_database", T.get_database_args(name="fuzz_" + "x" * (OWN_MAX_MESSAGE - 1024)))
    assert replies_in(assert_closed_or_answered(proc.port, under, "a call just under the limit"))
    # 16 MiB of a perfectly valid list: waggle must stop reading at its 1 MiB limit and hang up
    names = ["n" * 65536] * 256
    over = encode_call("get_table_objects_by_name", T.get_table_objects_by_name_args(dbname="d", tbl_names=names))
    with observed(proc, max_rss_growth_mb=100):
        before = rss_mb(pid)
        for _ in range(5):
            outcome = exchange(proc.port, over, half_close=False, timeout=3.0)
            assert outcome.closed, "a 16 MiB message was not cut off at the 1 MiB limit"
            assert not replies_in(outcome)
        growth = rss_mb(pid) - before
    assert growth < 50, f"waggle's RSS grew by {growth:.0f} MB for messages cut off at 1 MiB"
    assert any("exceeds the limit" in e.get("error", "") for e in proc.events("client.protocol_error"))


def test_framed_transport_refuses_absurd_frame_sizes(own):
    proc = own["framed"]
    pid = pid_of(proc)
    body = GET_DEFAULT
    with hive2_client(proc.port, timeout=10, framed=True) as c:
        assert c.get_database("default").name == "default"
    before = rss_mb(pid)
    for what, size in {"2 GiB": GIB2, "limit + 1": OWN_MAX_MESSAGE + 1, "negative": -1, "zero": 0}.items():
        assert_disconnected_promptly(proc.port, struct.pack("!i", size) + body, f"frame size {what}")
    # a frame shorter than the message inside it
    assert_closed_or_answered(proc.port, struct.pack("!i", 10) + body, "frame shorter than its message")
    assert rss_mb(pid) - before < 100
    assert_alive(proc)
    with hive2_client(proc.port, timeout=10, framed=True) as c:
        assert c.get_database("default").name == "default"


# -- 3. truncated calls ------------------------------------------------------------------------------------------
def test_half_a_call_then_close(waggle):
    with observed(waggle):
        for message in VALID_CALLS:
            log_start = len(waggle.log())
            outcome = assert_closed_or_answered(waggle.port, message[:len(message) // 2], "half a call")
            assert not replies_in(outcome), "half a call was answered"
        entry = wait_for_log(waggle, "client.protocol_error", f"127.0.0.1:{outcome.local_port}", since=log_start)
        assert entry is not None and "in the middle of a message" in entry["error"], entry


def test_half_a_call_left_hanging_blocks_nobody(waggle):
    """Slow clients that stop mid-message hold only their own connection (waggle never times them out)."""
    pid = pid_of(waggle)
    stalled = []
    with observed(waggle):
        try:
            for i in range(100):
                message = VALID_CALLS[i % len(VALID_CALLS)]
                s = socket.create_connection(("127.0.0.1", waggle.port), timeout=5)
                s.sendall(message[:len(message) // 2])
                stalled.append(s)
            wait_for(lambda: unread(waggle.port, stalled) == 0, 20, "waggle reading the 100 half-calls")
            elapsed = assert_served(waggle.port, within=1.0)
            print(f"served in {1000 * elapsed:.1f} ms beside 100 stalled half-calls, RSS {rss_mb(pid):.0f} MB")
            assert all(_still_open(s) for s in stalled), "waggle dropped a slow, but not broken, client"
        finally:
            for s in stalled:
                s.close()


def _still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


# -- 4. thousands of idle sockets --------------------------------------------------------------------------------
def test_thousands_of_idle_connections(own):
    """waggle serves ``max-connections`` clients at once (a gevent Pool) and leaves the rest in the listen
    backlog, so idle sockets beyond the limit would starve new clients; this process allows more than we
    open, so every idle socket really holds a greenlet and its cost is measured."""
    proc = own["limits"]
    pid = pid_of(proc)
    soft = raise_fd_limit(IDLE_SOCKETS * 2 + 1024)
    n = min(IDLE_SOCKETS, soft - len(os.listdir("/proc/self/fd")) - 200)
    assert n >= 500, f"RLIMIT_NOFILE {soft} leaves room for only {n} sockets"
    assert_served(proc.port)
    base_fds, base_rss = open_fds(pid), rss_mb(pid)
    socks: list[socket.socket] = []
    with observed(proc):
        try:
            for _ in range(n):
                socks.append(socket.create_connection(("127.0.0.1", proc.port), timeout=10))
            deadline = time.monotonic() + 20
            while open_fds(pid) < base_fds + n:
                assert time.monotonic() < deadline, f"waggle accepted {open_fds(pid) - base_fds} of {n} sockets"
                time.sleep(0.05)
            idle_rss = rss_mb(pid)
            elapsed = assert_served(proc.port, within=1.0)
            per_conn_kb = 1024 * (idle_rss - base_rss) / n
            print(f"{n} idle connections: RSS {base_rss:.0f} -> {idle_rss:.0f} MB "
                  f"({per_conn_kb:.1f} KB each); a new client served in {1000 * elapsed:.1f} ms")
            assert idle_rss - base_rss < 100, f"{n} idle connections cost {per_conn_kb:.1f} KB each"
            # now each of them sends the first bytes of a call and stalls inside the decoder
            for s in socks:
                s.sendall(GET_DEFAULT[:10])
            wait_for(lambda: unread(proc.port, socks) == 0, 20, f"waggle reading the {n} half-calls")
            stalled_rss = rss_mb(pid)
            assert_served(proc.port, within=1.0)
            assert stalled_rss - base_rss < 100, (
                f"{n} stalled half-calls cost {1024 * (stalled_rss - base_rss) / n:.1f} KB each")
        finally:
            for s in socks:
                s.close()
        deadline = time.monotonic() + 20
        while open_fds(pid) > base_fds + 5:
            assert time.monotonic() < deadline, f"waggle still holds {open_fds(pid) - base_fds} closed sockets"
            time.sleep(0.05)


# -- 5. the log -----------------------------------------------------------------------------------------------------
def test_a_garbage_client_is_logged(waggle):
    log_start = len(waggle.log())
    outcome = assert_disconnected_promptly(waggle.port, NOT_THRIFT["http"], "http")
    entry = wait_for_log(waggle, "client.protocol_error", f"127.0.0.1:{outcome.local_port}", since=log_start)
    assert entry is not None, "no client.protocol_error line for a client that sent HTTP"
    assert entry["level"] == "warning" and entry["calls"] == 0 and "conn" in entry
    assert "method name length" in entry["error"], entry


# -- bugs found -------------------------------------------------------------------------------------------------------
def test_deep_nesting_is_logged_as_a_protocol_error(waggle):
    payload = call_header("get_database") + NAME_DEFAULT + field_header(TType.STRUCT, 99) * 100 + bytes(101)
    log_start = len(waggle.log())
    outcome = assert_disconnected_promptly(waggle.port, payload, "structs nested 100 deep")
    entry = wait_for_log(waggle, "client.protocol_error", f"127.0.0.1:{outcome.local_port}", within=1.0,
                         since=log_start)
    assert entry is not None, "no client.protocol_error line for a client that nested structs 100 deep"


@pytest.mark.parametrize("where", ["unknown field", "unknown method"])
def test_string_limit_applies_to_skipped_fields(waggle, where):
    if where == "unknown field":
        head = call_header("get_database") + NAME_DEFAULT + field_header(TType.STRING, 99)
    else:
        head = call_header("fuzz_unknown_method") + field_header(TType.STRING, 1)
    assert_disconnected_promptly(waggle.port, head + struct.pack("!i", GIB2) + b"x" * 64,
                                 f"2 GiB string in an {where}", within=1.0)


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"


def _read_one_message(sock: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(65536)
        assert chunk, "closed before a whole reply arrived"
        data += chunk
        try:
            proto = TBinaryProtocol(TMemoryBuffer(data))
            proto.readMessageBegin()
            proto.skip(TType.STRUCT)
            return data
        except (EOFError, TTransportException):
            continue


@contextmanager
def raw_client(port: int, user: str) -> Iterator[socket.socket]:
    """A socket that has called ``set_ugi(user)``: its calls share upstream connections with every other
    client of that identity, and with no one else."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_call("set_ugi", T.set_ugi_args(user_name=user, group_names=[])))
        _read_one_message(sock)
        yield sock


def _victim_call(victim: Any) -> str | None:
    """One get_database('default'); what was wrong with the answer, if anything."""
    try:
        db = victim.get_database("default")
    except Exception as exc:
        return _describe(exc)
    return None if db.name == "default" else f"got database {db.name!r}"


# The two tests below run on the session waggle under an identity of their own (``set_ugi``), shared by their
# attacker and their victim (as every job of one service user shares it in real life): the upstream
# connections they disturb are used by nobody else.
def test_a_oneway_flagged_call_cannot_hand_its_reply_to_another_client(waggle):
    user = "fuzz-oneway"
    attack = encode_call("get_database", T.get_database_args(name="fuzz_attacker_db"),
                         mtype=TMessageType.ONEWAY) * 20
    stop = threading.Event()
    ready = threading.Event()

    def attacker() -> None:
        try:
            with raw_client(waggle.port, user) as s:
                ready.set()
                while not stop.is_set():
                    s.sendall(attack)  # no reply is due to a oneway call, so none is read
                    stop.wait(0.002)
        except OSError:
            pass
        finally:
            ready.set()

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    wrong = None
    calls = 0
    try:
        assert ready.wait(10)
        with hive2_client(waggle.port, timeout=10) as victim:
            victim.set_ugi(user, [])
            deadline = time.monotonic() + 5
            while wrong is None and time.monotonic() < deadline:
                calls += 1
                wrong = _victim_call(victim)
    finally:
        stop.set()
        thread.join(10)
    assert_alive(waggle)
    assert wrong is None, f"an innocent client's call {calls} got another client's reply: {wrong}"


def test_a_uuid_field_cannot_smuggle_a_call_whose_reply_reaches_another_client(waggle):
    user = "fuzz-smuggle"
    smuggled = call_header("lock", seqid=77)  # 16 bytes: exactly a UUID's worth; the STOP after it ends it
    assert len(smuggled) == 16
    attack = call_header("get_database") + NAME_DEFAULT + field_header(16, 9) + smuggled + b"\x00"
    wrong = None
    attempts = 0
    with hive2_client(waggle.port, timeout=10) as victim:
        victim.set_ugi(user, [])
        while wrong is None and attempts < 50:
            attempts += 1
            with raw_client(waggle.port, user) as attacker:
                attacker.sendall(attack)
                _read_one_message(attacker)  # the metastore's answer to the get_database part
                # the victim calls at once, while the metastore is still answering the smuggled 'lock'
                wrong = _victim_call(victim)
    assert_alive(waggle)
    assert wrong is None, f"an innocent client's call (attempt {attempts}) got another client's reply: {wrong}"


def test_set_ugi_identities_do_not_accumulate(own):
    """Pools remember identities (the metastore binds a connection to its first set_ugi): an absurd identity is
    refused, and clients with ever new identities leave a bounded trace (UpstreamPool.MAX_IDENTITIES)."""
    proc = own["ugi"]
    pid = pid_of(proc)
    big = "u" * (8 << 20)
    with hive2_client(proc.port, timeout=30) as c:
        with pytest.raises(ttypes.MetaException, match="set_ugi refused"):
            c.set_ugi("big-" + big, [])
        assert c.get_database("default").name == "default"  # the connection stays usable
    before = rss_mb(pid)
    for i in range(60):  # distinct identities, each client gone right after
        with hive2_client(proc.port, timeout=30) as c:
            c.set_ugi(f"user-{i}-" + "u" * 60000, [])
            assert c.get_database("default").name == "default"
    wait_for(lambda: proc.metric("waggle_client_connections") == 0.0, 20, "waggle closing the clients' connections")
    growth = rss_mb(pid) - before
    assert_alive(proc)
    assert growth < 48, f"60 clients that have all left still hold {growth:.0f} MB of waggle's memory"

