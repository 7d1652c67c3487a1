"""How Hive and Hadoop write values in configuration, and what they mean: durations, protection levels, service
principals with ``_HOST`` and Hive releases.

Pure functions of text, raising ``ValueError`` for a value they do not accept. The configuration parsers read
with them; the rooms that act on the values (:mod:`waggle.security.gss`, :mod:`waggle.security.principals`,
:mod:`waggle.hms.bridges`) take them from here, so this room depends on none of those.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable

# -- durations ----------------------------------------------------------------------------------------------------
_SOCKET_TIMEOUT_UNITS_MS = {"ms": 1, "msec": 1, "s": 1000, "sec": 1000, "m": 60000, "min": 60000}
_LIFETIME_UNITS_MS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def timeout_ms(value: str) -> int:
    """Hive's time values such as ``600``, ``600s`` or ``5000ms`` (seconds when no unit), in milliseconds: the
    spelling of ``hive.metastore.client.socket.timeout``."""
    m = re.fullmatch(r"\s*(\d+)\s*(ms|msec|s|sec|m|min)?\s*", value.lower())
    if not m:
        raise ValueError(value)
    return int(m.group(1)) * _SOCKET_TIMEOUT_UNITS_MS[m.group(2) or "s"]


def duration_ms(text: str) -> int:
    """Hive's time values for token lifetimes: ``86400000`` (ms), ``600s``, ``1d``."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not m or (m.group(2) and m.group(2) not in _LIFETIME_UNITS_MS):
        raise ValueError(text)
    return int(m.group(1)) * _LIFETIME_UNITS_MS[m.group(2) or "ms"]


def staleness_seconds(text: str) -> int:
    """An age such as ``600`` (seconds), ``600s``, ``15m``, ``2h`` or ``1d``, in seconds."""
    m = re.fullmatch(r"\s*(\d+)\s*(s|m|h|d)?\s*", text.lower())
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2) or "s"]


# -- protection levels (hadoop.rpc.protection) ---------------------------------------------------------------------
#: QOP names (Hive's ``hadoop.rpc.protection`` values map onto them) and their security-layer bits
QOP_BITS = {"auth": 1, "auth-int": 2, "auth-conf": 4}
RPC_PROTECTION = {"authentication": "auth", "integrity": "auth-int", "privacy": "auth-conf"}


def parse_qop(text: str) -> tuple[str, ...]:
    """``auth,auth-int`` or Hive's ``authentication,integrity,privacy``: the QOPs in the order given."""
    out: list[str] = []
    for part in text.split(","):
        word = part.strip().lower()
        if not word:
            continue
        qop = RPC_PROTECTION.get(word, word)
        if qop not in QOP_BITS:
            raise ValueError(f"'{part.strip()}' is not a protection level (auth, auth-int, auth-conf, or "
                             f"authentication, integrity, privacy)")
        if qop not in out:
            out.append(qop)
    if not out:
        raise ValueError("no protection level given")
    return tuple(out)


# -- service principals ------------------------------------------------------------------------------------------
HOST_PATTERN = "_HOST"


def expand_host(principal_text: str, host: str | None, local_hostname: Callable[[], str] | None = None) -> str:
    """Replace ``_HOST`` in ``service/_HOST@REALM`` by ``host``, lower-cased; other principals are unchanged.

    An empty host or ``0.0.0.0`` (listening on every address) means this machine's canonical name, from
    ``local_hostname`` (default :func:`socket.getfqdn`).
    """
    components = re.split(r"[/@]", principal_text)
    while components and components[-1] == "":  # Java's String.split drops trailing empty strings
        components.pop()
    if len(components) != 3 or components[1] != HOST_PATTERN:
        return principal_text
    if not host or host == "0.0.0.0":
        host = (local_hostname or socket.getfqdn)()
    return f"{components[0]}/{host.lower()}@{components[2]}"


# -- Hive releases -------------------------------------------------------------------------------------------------
Version = tuple[int, ...]

#: The oldest metastore release waggle serves.
OLDEST = (2, 3, 0)

_VERSION = re.compile(r"\d+(\.\d+){0,3}")


def parse_version(text: str | None) -> Version | None:
    """``"2.3.10"`` -> ``(2, 3, 10)``; ``"4"`` -> ``(4, 0, 0)``; None for no hint. ValueError when malformed or
    older than Hive 2.3 (the oldest metastore waggle serves)."""
    if text is None or str(text).strip() == "":
        return None
    text = str(text).strip()
    if not _VERSION.fullmatch(text):
        raise ValueError(f"expected a Hive version such as 2.3, 3.1.3 or 4.0.1, got {text!r}")
    version = (*(int(p) for p in text.split(".")), 0, 0)[:3]
    if version < OLDEST:
        raise ValueError(f"Hive {text} is older than 2.3, the oldest metastore release waggle supports")
    return version
