"""The files a tunnel reads, loaded with paramiko: private keys and known_hosts.

The forwarder (:mod:`waggle.tunnel.forward`) loads them when it connects; :func:`check_files` is what
``waggle check`` runs for each tunnel. Errors say what is wrong with a file and name its path, never its content.
This module imports paramiko, so the proxy process never imports it (only the tunnel helper and ``waggle check``).
"""

from __future__ import annotations

import paramiko

from waggle.tunnel.spec import TunnelSpec


def describe(exc: BaseException) -> str:
    """Why an SSH step or a file read failed, in a few words (the OS's reason when there is one)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, EOFError):
        return "the host closed the connection"
    return str(exc) or type(exc).__name__


def read_private_key(path: str) -> paramiko.PKey:
    """Load one private key file. Raises ``ValueError`` saying what is wrong with it (never its content)."""
    try:
        return paramiko.PKey.from_path(path)
    except OSError as exc:
        raise ValueError(f"'{path}' cannot be read: {describe(exc)}") from None
    except (paramiko.PasswordRequiredException, TypeError):  # TypeError: an encrypted legacy PEM key
        raise ValueError(f"'{path}' is protected by a passphrase, which waggle does not support") from None
    except (paramiko.SSHException, ValueError, IndexError) as exc:
        raise ValueError(f"'{path}' is not a private key waggle can use: {exc}") from None


class KnownHostsUnreadable(ValueError):
    """The known_hosts file is missing or unreadable (rather than malformed)."""


def read_known_hosts(path: str) -> paramiko.HostKeys:
    """Load a known_hosts file. Raises ``ValueError`` saying what is wrong with it (:class:`KnownHostsUnreadable`
    when it cannot be read at all)."""
    known = paramiko.HostKeys()
    try:
        known.load(path)
    except OSError as exc:
        raise KnownHostsUnreadable(f"'{path}' cannot be read: {describe(exc)}") from None
    except (paramiko.SSHException, ValueError, IndexError) as exc:  # InvalidHostKey is an SSHException
        raise ValueError(f"'{path}' is not a known_hosts file waggle can read: {exc}") from None
    return known


def check_files(spec: TunnelSpec) -> list[str]:
    """Problems with the files a tunnel reads, as ``waggle check`` reports them (nothing is connected)."""
    where = f"metastore '{spec.member}': metastore-tunnel"
    problems = []
    for path in spec.private_keys:
        try:
            read_private_key(path)
        except ValueError as exc:
            problems.append(f"{where}.private-keys: {exc}")
    try:
        known = read_known_hosts(spec.known_hosts)
    except ValueError as exc:
        if spec.strict or not isinstance(exc, KnownHostsUnreadable):
            problems.append(f"{where}.known-hosts: {exc}"
                            + (" (strict-host-key-checking is on)" if spec.strict else ""))
        return problems
    if spec.strict:
        for i, hop in enumerate(spec.hops):
            if known.lookup(hop.known_hosts_name) is None:
                problems.append(f"{where}.known-hosts: '{spec.known_hosts}' has no key for {spec.hop_label(i)}, "
                                f"written '{hop.known_hosts_name}'; with strict-host-key-checking that hop is "
                                "refused")
    return problems
