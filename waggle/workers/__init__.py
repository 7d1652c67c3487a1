"""Several serving processes on one port: a supervisor, its workers, and what they share.

``waggle serve`` with ``workers`` above 1 runs :mod:`waggle.workers.supervisor` in the process it starts. The
supervisor loads and validates the configuration once, owns the HTTP endpoint, the reloader, the SSH tunnels and
the health checks, and runs N worker processes (:mod:`waggle.workers.worker`) that each serve the Thrift port
(SO_REUSEPORT) with their own client connections and upstream pools. They talk over one control channel each
(:mod:`waggle.workers.channel`) and share one page of memory, the pod's count of client connections
(:mod:`waggle.server.budget`).
"""
