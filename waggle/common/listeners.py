"""Listening sockets of waggle's ports: each worker's Thrift port, and the Iceberg REST port."""

from __future__ import annotations

import socket


def listener(host: str, port: int, backlog: int = 1024, *, shared: bool = True, nodelay: bool = False
             ) -> socket.socket:
    """A listening socket on ``port``. ``shared``: beside other processes' (``SO_REUSEPORT``: the kernel spreads
    connections over them); ``nodelay``: the accepted connections send at once (``TCP_NODELAY``, which Linux
    passes on from the listening socket), for a server that writes one reply in several writes, such as an HTTP
    head and then its body: without it the body waits for the client's delayed ACK, about 40 ms."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock
