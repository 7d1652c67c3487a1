"""waggle's fixed timings, in one place: intervals, waits and backoffs that are not settings.

What an operator tunes is a setting (:mod:`waggle.config.settings`: ``fan-out-timeout``, ``down-member-retry``,
``status-polling-delay``, ``shutdown-delay``, ...). These are the rest: internal rhythms whose value follows
from how waggle works rather than from a deployment. All are in seconds. This module imports nothing, so the
SSH tunnel helper process can read it too.
"""

from __future__ import annotations

# -- configuration reload (waggle/reload.py, waggle/checks.py) ---------------------------------------------------
#: The configuration files are compared with what was last read at least this often, file events or not (for
#: file systems that send no events, such as some volume mounts).
RELOAD_POLL_SECONDS = 5.0
#: A rejected configuration edit is tried again this often (quietly while it fails the same way), since its
#: cause may be a file it names that appears later.
RELOAD_RETRY_SECONDS = 30.0
#: How long a running server waits for the ``waggle check`` process that vets a reload's tunnel files.
CHECK_SUBPROCESS_SECONDS = 60.0

# -- SSH tunnels (waggle/upstream/tunnel.py, waggle/tunnel/forward.py) ---------------------------------------------
#: Waits before restarting a tunnel helper that exited, by how many times it exited in a row (the last one
#: repeats).
TUNNEL_RESTART_DELAYS: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0)
#: A helper that ran at least this long before it exited starts the restart delays over.
TUNNEL_HELPER_STEADY_SECONDS = 60.0
#: How long a call waits for a tunnel helper that is starting to listen.
TUNNEL_STARTUP_WAIT = 10.0
#: Interval between SSH keepalives on every hop; the first hop's TCP_USER_TIMEOUT is four of them.
TUNNEL_KEEPALIVE_SECONDS = 15

# -- upstream calls (waggle/upstream/deadlines.py, waggle/upstream/compat.py) -------------------------------------
#: How often the watchdog looks for upstream calls past their read timeout: a late call is aborted at most this
#: much after its deadline.
DEADLINE_RESOLUTION_SECONDS = 0.1
#: After a catalog probe failed (the metastore unreachable), the next one waits this long.
PROBE_RETRY_SECONDS = 30.0
#: A fan-out waits this much longer than its slowest member's timeout before it leaves the late ones out.
FANOUT_JOIN_GRACE_SECONDS = 1.0

# -- the Thrift server (waggle/server/server.py) -------------------------------------------------------------------
#: How long a connection over ``max-connections`` has to send its first call (answered with the refusal) before
#: it is closed.
REFUSE_TIMEOUT = 5.0
#: While draining, how often the server looks for connections that became idle (they are closed at once).
DRAIN_POLL_SECONDS = 0.05
#: After the grace ran out, how long the connections still busy get to end once they are killed.
DRAIN_KILL_SECONDS = 1.0

# -- the HTTP endpoint (waggle/endpoint.py) --------------------------------------------------------------------------
#: How long the HTTP endpoint's open requests may take to finish when it stops.
ENDPOINT_STOP_SECONDS = 1.0

# -- event-loop lag (waggle/common/loop.py) -------------------------------------------------------------------------
#: How often the event loop's lag is measured (a timer that should fire this often, and how late it was).
LOOP_WATCH_INTERVAL = 0.25
#: A lag above this counts as the loop being blocked (``waggle_event_loop_blocked``).
LOOP_BLOCKED_SECONDS = 0.1
#: A lag above this is also logged (``loop.blocked``).
LOOP_REPORT_SECONDS = 1.0

# -- workers (waggle/workers/supervisor.py) ------------------------------------------------------------------------
#: Waits before starting again a worker that exited unasked, by how many times it exited in a row without having
#: served steadily (the last one repeats).
WORKER_RESTART_DELAYS: tuple[float, ...] = (0.1, 1.0, 2.0, 5.0, 10.0)
#: A worker that served at least this long before it exited starts the restart delays over.
WORKER_STEADY_SECONDS = 30.0
#: How long the supervisor waits for a new worker to listen.
WORKER_START_SECONDS = 60.0
#: How often the supervisor asks every worker's status unasked: a worker that dies loses the counts it made
#: since (its counters as last reported are kept).
WORKER_POLL_SECONDS = 10.0
#: How long ``/metrics``, ``/healthz`` and the admin API wait for each worker's status.
WORKER_STATUS_SECONDS = 2.0
#: how long a write through one worker waits for the other workers to forget what it names (cache), before it is
#: answered anyway (the notification log then makes them forget within a second)
WRITE_SPREAD_SECONDS = 1.0
