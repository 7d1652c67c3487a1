"""One tunnel: a chain of SSH transports, hop by hop, and a local port forwarded through it to the metastore.

Plain threads, no gevent. The chain is shared by every forwarded connection (one SSH session per hop, one
``direct-tcpip`` channel per connection), built when the forwarder starts and rebuilt by the first connection
that finds it broken.

For the proxy, a forwarded connection starts with one status line from the forwarder, before any metastore
byte: ``OK`` once the channel to the metastore is open, or ``ERR <message>`` (the message names the hop that
failed) followed by the close. :func:`local_forward` (for the sync, or any other plain Thrift client) has no
status line: a connection that cannot be forwarded is closed, and the reason goes to ``emit`` (``refused``).

Everything worth reporting goes to ``emit`` as a dict (see :mod:`waggle.tunnel.__main__`): the chain coming up,
going down (naming the hop and why), and each forwarded connection that the tunnel side closed. Key files are
read by paramiko and only their paths are ever reported.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import paramiko

from waggle.config.timing import TUNNEL_KEEPALIVE_SECONDS
from waggle.tunnel.keys import describe, read_known_hosts, read_private_key
from waggle.tunnel.spec import Hop, TunnelSpec

Emit = Callable[[dict[str, Any]], None]

#: Bytes per read when pumping a forwarded connection.
CHUNK = 65536
#: Flow-control window of each forwarded channel (paramiko's default is 2 MiB).
WINDOW = 8 * 1024 * 1024


class TunnelError(Exception):
    """The tunnel could not carry a connection. ``str()`` names the hop."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


class Chain:
    """Connected, authenticated transports: ``transports[i]`` is hop ``i``, carried by hop ``i - 1``."""

    def __init__(self, spec: TunnelSpec) -> None:
        self.spec = spec
        self.transports: list[paramiko.Transport] = []

    def first_dead(self) -> int | None:
        """The index of the outermost hop whose SSH session has ended, or None while all are up."""
        for i, t in enumerate(self.transports):
            if not t.is_active():
                return i
        return None

    def loss(self) -> tuple[str, str]:
        """Where and why the chain broke: its outermost dead hop, and that hop named in the message."""
        i = self.first_dead()
        where = self.spec.hop_label(i or 0)
        if i is None:
            return where, f"{where}: SSH session closed"
        cause = self.transports[i].saved_exception
        reason = f": {describe(cause)}" if cause is not None else ""
        return where, f"{where}: SSH session lost{reason}"

    def close(self) -> None:
        for t in reversed(self.transports):
            t.close()

    def open_channel(self, dest: tuple[str, int], timeout: float | None,
                     window_size: int | None = WINDOW) -> paramiko.Channel:
        """A ``direct-tcpip`` channel from the last hop to ``dest`` (``window_size`` None: paramiko's own)."""
        return self.transports[-1].open_channel("direct-tcpip", dest, ("127.0.0.1", 0), window_size=window_size,
                                                timeout=timeout)


def _load_keys(spec: TunnelSpec, where: str) -> list[paramiko.PKey]:
    try:
        return [read_private_key(path) for path in spec.private_keys]
    except ValueError as exc:
        raise TunnelError(where, f"private key {exc}") from None


def _load_known_hosts(spec: TunnelSpec, where: str) -> paramiko.HostKeys:
    try:
        return read_known_hosts(spec.known_hosts)
    except ValueError as exc:
        if spec.strict:
            raise TunnelError(where, f"known-hosts {exc}") from None
        return paramiko.HostKeys()


def _verify_host_key(spec: TunnelSpec, hop: Hop, where: str, transport: paramiko.Transport,
                     entry: Mapping[str, paramiko.PKey] | None, emit: Emit) -> None:
    """``entry``: known-hosts' keys for the hop (None: it has none)."""
    key = transport.get_remote_server_key()
    offered = f"{key.get_name()} {key.fingerprint}"
    if entry is not None and entry.get(key.get_name()) == key:
        return
    if entry is None:
        problem = (f"host key did not match: {hop.host} ({hop.known_hosts_name}) is not in known-hosts "
                   f"'{spec.known_hosts}'; it offered {offered}")
    else:
        expected = ", ".join(f"{k.get_name()} {k.fingerprint}" for k in entry.values())
        problem = (f"host key did not match for {hop.host} ({hop.known_hosts_name}): it offered {offered}, "
                   f"known-hosts '{spec.known_hosts}' has {expected}")
    if spec.strict:
        raise TunnelError(where, problem)
    emit({"event": "host_key_unchecked", "hop": str(hop), "problem": problem})


def connect_chain(spec: TunnelSpec, emit: Emit) -> Chain:
    """Connect and authenticate every hop, each through the previous one. Raises :class:`TunnelError`, naming
    the hop, whatever goes wrong."""
    first = spec.hop_label(0)
    keys = _load_keys(spec, first)
    known = _load_known_hosts(spec, first)
    chain = Chain(spec)
    try:
        for i, hop in enumerate(spec.hops):
            where = spec.hop_label(i)
            emit({"event": "connecting", "hop": where})
            try:
                _connect_hop(spec, chain, i, hop, where, keys, known, emit)
            except TunnelError:
                raise
            except Exception as exc:  # whatever paramiko raises, the hop is named
                raise TunnelError(where, f"SSH failed: {describe(exc)}") from None
    except BaseException:
        chain.close()
        raise
    return chain


def _connect_hop(spec: TunnelSpec, chain: Chain, i: int, hop: Hop, where: str, keys: list[paramiko.PKey],
                 known: paramiko.HostKeys, emit: Emit) -> None:
    timeout = spec.timeout
    sock: Any
    if i == 0:
        try:
            sock = socket.create_connection((hop.host, hop.port), timeout=timeout)
        except OSError as exc:
            raise TunnelError(where, f"unreachable: {describe(exc)}") from None
        # Keepalives that go unanswered for this long end the session: a hop that vanished without a reset
        # is noticed in about a minute rather than when TCP gives up.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 4 * TUNNEL_KEEPALIVE_SECONDS * 1000)
    else:
        try:
            sock = chain.open_channel((hop.host, hop.port), timeout, window_size=None)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise TunnelError(where, f"unreachable from {spec.hop_label(i - 1)}: {describe(exc)}") from None
    transport = paramiko.Transport(sock)
    chain.transports.append(transport)
    # Prefer the host key types known_hosts holds for this host, as OpenSSH does.
    entry = known.lookup(hop.known_hosts_name)
    if entry:
        opts = transport.get_security_options()
        opts.key_types = [k for k in entry if k in opts.key_types] + [k for k in opts.key_types if k not in entry]
    if timeout is not None:
        transport.banner_timeout = transport.handshake_timeout = transport.auth_timeout = timeout
    try:
        transport.start_client(timeout=timeout)
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise TunnelError(where, f"SSH handshake failed: {describe(exc)}") from None
    if not transport.is_active() or transport.host_key is None:
        # start_client returns without an error when its wait runs out with the session still alive
        raise TunnelError(where, f"SSH handshake failed: no answer within {timeout:g}s" if timeout
                          else "SSH handshake failed")
    _verify_host_key(spec, hop, where, transport, entry, emit)
    for key in keys:
        try:
            transport.auth_publickey(hop.user, key)
        except paramiko.AuthenticationException:
            continue
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise TunnelError(where, f"authentication failed: {describe(exc)}") from None
        if transport.is_authenticated():
            break
    if not transport.is_authenticated():
        paths = ", ".join(f"'{p}'" for p in spec.private_keys)
        raise TunnelError(where, f"authentication failed for user '{hop.user}' with private key(s) {paths}")
    transport.set_keepalive(TUNNEL_KEEPALIVE_SECONDS)


def close_channel(channel: paramiko.Channel) -> None:
    """Close an SSH channel whose session may be gone: paramiko sends the close over the transport, and a
    transport whose socket has closed raises ``EOFError`` (or an ``OSError``, an ``SSHException``). The channel is
    over either way; the caller must still close the client's side."""
    try:
        channel.close()
    except (EOFError, OSError, paramiko.SSHException):
        pass


class Forwarder:
    """A local listening port whose connections reach the metastore through the shared chain."""

    def __init__(self, spec: TunnelSpec, emit: Emit, status_line: bool = True) -> None:
        self.spec = spec
        self.emit = emit
        self.status_line = status_line
        self.listener = socket.create_server((spec.bind, 0), backlog=512)
        self.port: int = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._chain: Chain | None = None
        self._finished = 0  # connection attempts finished, successful or not
        self._last_error: TunnelError | None = None
        self._stopped = threading.Event()

    # -- the chain ------------------------------------------------------------------------------------------
    def chain(self) -> Chain:
        """The live chain, rebuilt if it is missing or broken. Callers that queued behind a failed rebuild
        get that failure rather than starting another one."""
        seen = self._finished
        with self._lock:
            chain = self._chain
            if chain is not None and chain.first_dead() is None:
                return chain
            if chain is not None:
                self._lost(chain)
            if self._finished != seen and self._last_error is not None:
                raise self._last_error  # an attempt failed while this caller waited: share its answer
            started = time.monotonic()
            try:
                chain = connect_chain(self.spec, self.emit)
            except TunnelError as exc:
                self._last_error = exc
                self.emit({"event": "down", "hop": exc.where, "error": str(exc)})
                raise
            finally:
                self._finished += 1
            self._chain, self._last_error = chain, None
            self.emit({"event": "up", "ms": round(1000 * (time.monotonic() - started), 1)})
            return chain

    def _lost(self, chain: Chain) -> None:
        """Forget a broken chain (under the lock), once."""
        if self._chain is chain:
            self._chain = None
            where, error = chain.loss()
            self.emit({"event": "down", "hop": where, "error": error})
            chain.close()

    def watch(self, interval: float = 0.5) -> None:
        """Report a broken chain as soon as it breaks, not only when the next connection finds it."""
        while not self._stopped.wait(interval):
            chain = self._chain
            if chain is not None and chain.first_dead() is not None:
                with self._lock:
                    self._lost(chain)

    # -- forwarded connections ------------------------------------------------------------------------------
    def _open(self) -> tuple[Chain, paramiko.Channel]:
        """A channel to the first of the metastore's addresses that the last hop reaches."""
        last_index = len(self.spec.hops) - 1
        for attempt in range(2):  # a chain that died unnoticed is rebuilt once
            chain = self.chain()
            errors = []
            for host, port in self.spec.targets:
                try:
                    return chain, chain.open_channel((host, port), self.spec.timeout)
                except (paramiko.SSHException, OSError, EOFError) as exc:
                    text = exc.text if isinstance(exc, paramiko.ChannelException) else describe(exc)
                    errors.append(f"{host}:{port}: {text}")
                if chain.first_dead() is not None:
                    break  # the session broke under us: rebuild, then try every address again
            else:
                raise TunnelError(self.spec.hop_label(last_index), "cannot reach the metastore: "
                                  + "; ".join(errors))
            if attempt == 1:
                where, _ = chain.loss()
                raise TunnelError(where, f"SSH session lost while opening a channel ({'; '.join(errors)})")
        raise AssertionError("unreachable")

    def handle(self, conn: socket.socket) -> None:
        channel: paramiko.Channel | None = None
        try:
            peer_port = conn.getpeername()[1]
            try:
                chain, channel = self._open()
            except Exception as exc:  # a TunnelError names the hop; anything else is still answered
                if not isinstance(exc, TunnelError):
                    exc = TunnelError("tunnel", f"failed: {describe(exc)}")
                self.emit({"event": "refused", "conn": peer_port, "error": str(exc)})
                if self.status_line:
                    conn.sendall(b"ERR " + str(exc).replace("\n", " ").encode() + b"\n")
                return
            if self.status_line:
                conn.sendall(b"OK\n")
            reason = self._pump(conn, channel, chain)
            if reason is not False:
                self.emit({"event": "closed", "conn": peer_port, "reason": reason})
        except OSError:
            pass
        finally:
            if channel is not None:
                close_channel(channel)
            conn.close()

    def _pump(self, conn: socket.socket, channel: paramiko.Channel, chain: Chain) -> str | bool | None:
        """Copy bytes both ways until one side closes. Returns False when the local side closed, None when
        the metastore closed its end, and the loss (naming the hop) when the tunnel broke."""
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with selectors.DefaultSelector() as selector:  # epoll: no limit on descriptor numbers
            selector.register(conn, selectors.EVENT_READ)
            selector.register(channel, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select():
                        if key.fileobj is conn:
                            data = conn.recv(CHUNK)
                            if not data:
                                return False
                            channel.sendall(data)
                        else:
                            data = channel.recv(CHUNK)
                            if not data:
                                raise EOFError
                            conn.sendall(data)
            except EOFError:
                pass
            except OSError:
                if not channel.closed or channel.eof_received:
                    return False  # the local side failed
            finally:
                close_channel(channel)
        if channel.eof_received:
            return None
        # The channel ended without an EOF from the metastore side: an SSH session may have broken. The
        # transport thread unlinks channels just before it marks itself inactive, so give it a moment.
        deadline = time.monotonic() + 1.0
        while chain.first_dead() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return chain.loss()[1] if chain.first_dead() is not None else None

    def connect_now(self) -> None:
        """Build the chain at start, so a broken route shows in the log before any client needs it."""
        try:
            self.chain()
        except TunnelError:
            pass  # reported by chain()

    def serve_forever(self) -> None:
        threading.Thread(target=self.watch, name="watch", daemon=True).start()
        while not self._stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                if self._stopped.is_set():
                    return
                raise
            if self._stopped.is_set():
                conn.close()
                return
            threading.Thread(target=self.handle, args=(conn,), name="forward", daemon=True).start()

    def close(self) -> None:
        self._stopped.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept(), which close() alone does not
        except OSError:
            pass
        self.listener.close()
        with self._lock:
            if self._chain is not None:
                self._chain.close()
                self._chain = None


@contextmanager
def local_forward(spec: TunnelSpec, emit: Emit | None = None) -> Iterator[tuple[str, int]]:
    """Run a tunnel in this process (threads; not under gevent) and yield the ``(host, port)`` that reaches the
    metastore through it, for plain Thrift clients. Raises :class:`TunnelError` if the route cannot be
    connected now."""
    forwarder = Forwarder(spec, emit or (lambda event: None), status_line=False)
    try:
        forwarder.chain()
        threading.Thread(target=forwarder.serve_forever, name=f"tunnel-{spec.member}", daemon=True).start()
        yield spec.connect_host, forwarder.port
    finally:
        forwarder.close()
