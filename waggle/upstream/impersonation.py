"""Impersonation: callers' delegation tokens from one metastore, kept so that waggle can connect as each caller.

For a client's identity, waggle (a proxy user at the metastore) asks the metastore for that user's delegation
token, keeps it here (bounded, renewed after an hour), and connects with DIGEST-MD5
(:func:`waggle.upstream.handshake.secure`), so the metastore sees the caller. The pool owns one of these.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from waggle.common.logging import get_logger

log = get_logger("waggle.upstream")
#: seconds a kept impersonation token is used before waggle renews it
TOKEN_REFRESH_SECONDS = 3600.0
#: impersonation tokens kept per metastore (the least recently used is dropped)
MAX_TOKENS = 1000


class DelegationTokens:
    """Callers' delegation tokens from one metastore: at most :data:`MAX_TOKENS`, renewed after an hour."""

    def __init__(self, member: str, max_tokens: int = MAX_TOKENS, refresh_seconds: float = TOKEN_REFRESH_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.member = member
        self._tokens: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._max = max_tokens
        self._refresh = refresh_seconds
        self._clock = clock

    def __len__(self) -> int:
        return len(self._tokens)

    def get(self, user: str, fetch: Callable[[str], str], renew: Callable[[str], object]) -> str:
        """``user``'s token: kept, renewed when it is older than the refresh interval, or fetched."""
        now = self._clock()
        kept = self._tokens.get(user)
        if kept is not None:
            token, since = kept
            if now - since < self._refresh:
                self._tokens.move_to_end(user)
                return token
            try:
                renew(token)
                self._keep(user, token, now)
                return token
            except Exception as exc:  # a token that cannot be renewed is replaced
                log.info("impersonation.renew_failed", metastore=self.member, user=user, error=str(exc))
        token = fetch(user)
        self._keep(user, token, now)
        return token

    def drop(self, user: str) -> None:
        self._tokens.pop(user, None)

    def _keep(self, user: str, token: str, now: float) -> None:
        self._tokens[user] = (token, now)
        self._tokens.move_to_end(user)
        while len(self._tokens) > self._max:
            self._tokens.popitem(last=False)
