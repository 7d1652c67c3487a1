"""The tunnel helper process: ``python -m waggle.tunnel``, started by the proxy once per tunnelled metastore.

Protocol, one JSON object per line:

- stdin: the :class:`~waggle.tunnel.spec.TunnelSpec`. When stdin closes (the proxy exited or stopped the
  tunnel), the helper exits.
- stdout, events: ``listening`` (``port``), ``fatal`` (``error``: the helper cannot run and exits),
  ``connecting`` (``hop``: a hop is being connected), ``up`` (``ms``: how long the build took), ``down``
  (``hop``, ``error``),
  ``closed`` (``conn``: the proxy-side port of a forwarded connection that the tunnel side closed; ``reason``:
  null when the metastore closed it, else the loss naming the hop), ``refused`` (``conn``, ``error``: a
  connection that could not be forwarded; its status line says the same) and ``host_key_unchecked`` (``hop``,
  ``problem``, when strict checking is off).

The process runs paramiko with plain threads and never imports gevent.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from typing import Any

from waggle.tunnel.forward import Forwarder
from waggle.tunnel.spec import TunnelSpec


def main() -> int:
    logging.getLogger("paramiko").addHandler(logging.NullHandler())
    logging.getLogger("paramiko").propagate = False
    line = sys.stdin.readline()
    if not line:
        return 0
    spec = TunnelSpec.from_json(line)
    out = sys.stdout
    lock = threading.Lock()

    def emit(event: dict[str, Any]) -> None:
        with lock:
            out.write(json.dumps(event) + "\n")
            out.flush()

    try:
        forwarder = Forwarder(spec, emit)
    except OSError as exc:
        emit({"event": "fatal", "error": f"cannot listen on {spec.bind}: {exc.strerror or exc}"})
        return 1
    emit({"event": "listening", "port": forwarder.port})

    def exit_with_parent() -> None:
        sys.stdin.read()  # returns at EOF: the proxy is gone, or closed the tunnel
        os._exit(0)

    threading.Thread(target=exit_with_parent, name="stdin", daemon=True).start()
    threading.Thread(target=forwarder.connect_now, name="connect", daemon=True).start()
    forwarder.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
