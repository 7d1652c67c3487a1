"""One member's part of a fan-out, as the fan-out's I/O (:mod:`waggle.upstream.fanout`) leaves it for the merge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from waggle.routing.federation import Naming
    from waggle.upstream.pool import UpstreamPool


@dataclass(slots=True)
class Outcome:
    """One member's part of a fan-out: its decoded result, or why it is left out."""

    pool: UpstreamPool
    naming: Naming
    result: Any = None
    error: str | None = None
    #: the member's reply as it came, when the client can take it as it is (asked alone, in the client's protocol)
    raw: bytes | None = None
