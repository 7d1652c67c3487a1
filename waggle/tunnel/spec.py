"""What one tunnel needs, as plain data: the hops, the key and known-hosts paths, and where it forwards to.

A :class:`TunnelSpec` travels to the helper process as one JSON line. It carries file paths, never key
material, and this module never imports paramiko: the proxy process imports it. The files themselves are read
by :mod:`waggle.tunnel.keys`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

from waggle.config.model import MetastoreConfig

#: Where OpenSSH keeps the user's known hosts; used when ``known-hosts`` is not set.
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


@dataclass(frozen=True, slots=True)
class Hop:
    user: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def known_hosts_name(self) -> str:
        """The host's name as OpenSSH writes it in known_hosts: ``host``, or ``[host]:port`` off port 22."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


@dataclass(frozen=True, slots=True)
class TunnelSpec:
    member: str
    hops: tuple[Hop, ...]
    private_keys: tuple[str, ...]
    known_hosts: str
    strict: bool
    timeout_ms: int  # per hop: TCP connect, SSH handshake, authentication and channel opening; 0 means none
    targets: tuple[tuple[str, int], ...]  # the metastore's URIs, tried in order from the last hop
    bind: str  # the local address the forwarded port listens on

    @property
    def connect_host(self) -> str:
        """Where a client on this machine connects to reach the forwarded port."""
        return "127.0.0.1" if self.bind in ("", "0.0.0.0", "::") else self.bind

    def hop_label(self, index: int) -> str:
        return f"hop {index + 1} ({self.hops[index]})"

    @property
    def timeout(self) -> float | None:
        return self.timeout_ms / 1000.0 if self.timeout_ms > 0 else None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TunnelSpec:
        d = json.loads(text)  # asdict's output: the tuples came back as lists
        return cls(**{**d, "hops": tuple(Hop(**h) for h in d["hops"]), "private_keys": tuple(d["private_keys"]),
                      "targets": tuple((h, p) for h, p in d["targets"])})


def spec_for(member: MetastoreConfig) -> TunnelSpec:
    """The tunnel of a metastore whose configuration has ``metastore-tunnel``."""
    t = member.tunnel
    assert t is not None, member.name
    return TunnelSpec(
        member=member.name,
        hops=tuple(Hop(user, host, t.port) for user, host in t.route),
        private_keys=tuple(os.path.expanduser(k) for k in t.private_keys),
        known_hosts=os.path.expanduser(t.known_hosts or DEFAULT_KNOWN_HOSTS),
        strict=t.strict_host_key_checking,
        timeout_ms=t.timeout_ms,
        targets=tuple((u.host, u.port) for u in member.uris),
        bind=t.localhost,
    )
