"""An SSH channel closed after its session broke: the forwarding thread goes on to close the client's side."""

from __future__ import annotations

import socket

import paramiko
import pytest

from waggle.tunnel.forward import close_channel


def _broken_session_channel() -> tuple[paramiko.Channel, paramiko.Transport]:
    """A real paramiko channel on a transport whose socket is closed: sending its close raises EOFError."""
    ours, theirs = socket.socketpair()
    transport = paramiko.Transport(ours)
    channel = paramiko.Channel(0)
    channel._set_transport(transport)
    channel.active = True
    transport.active = True
    transport.clear_to_send.set()  # keys exchanged, as on a session that was up
    theirs.close()
    ours.close()
    return channel, transport


def test_paramiko_raises_when_the_session_is_gone_and_close_channel_does_not() -> None:
    channel, _transport = _broken_session_channel()
    with pytest.raises((EOFError, OSError)):
        channel.close()
    channel, _transport = _broken_session_channel()
    close_channel(channel)  # no exception
    assert channel.closed
