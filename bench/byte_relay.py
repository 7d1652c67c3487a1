"""A gevent TCP relay that copies bytes without parsing them: the floor any proxy hop costs.

    python bench/byte_relay.py LISTEN_PORT UPSTREAM_PORT
"""

from gevent import monkey

monkey.patch_all()

import socket
import sys

import gevent
from gevent.server import StreamServer


def pump(src: socket.socket, dst: socket.socket) -> None:
    while True:
        data = src.recv(262144)
        if not data:
            return
        dst.sendall(data)


def handle(client: socket.socket, _addr: object) -> None:
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    upstream = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = gevent.spawn(pump, upstream, client)
    try:
        pump(client, upstream)
    finally:
        back.kill()
        upstream.close()


if __name__ == "__main__":
    StreamServer(("127.0.0.1", int(sys.argv[1])), handle).serve_forever()
