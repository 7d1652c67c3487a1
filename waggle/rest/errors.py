"""Errors as the Iceberg REST spec models them (``ErrorModel``: message, type, code), and which error each
failure is.

Clients read the code first and the type second (Iceberg's Java ``ErrorHandlers``, pyiceberg's
``_handle_non_200_response``): 404 with ``NoSuchTableException`` or ``NoSuchNamespaceException``; 409
``CommitFailedException`` for a commit that lost (the client retries it on fresh metadata) and
``AlreadyExistsException`` otherwise; 500, 502 or 504 on a commit mean its outcome is unknown. A ``MetaException``
from the call path is told apart by what waggle's driver wrote for it (:attr:`waggle.rest.loopback.Loopback.last`):
a refusal is 403, a member that is down or failing 503, both naming the metastore as the Thrift error does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hive_metastore.ttypes import (
    AlreadyExistsException,
    InvalidOperationException,
    MetaException,
    NoSuchObjectException,
)
from pydantic import ValidationError
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchIcebergTableError,
    NoSuchNamespaceError,
    NoSuchPropertyException,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from thrift.Thrift import TApplicationException

from waggle.call.values import Answer, Outcome


@dataclass(frozen=True, slots=True)
class RestError(Exception):
    """One error answer: the HTTP status, the spec's ``type`` and a message for people."""

    code: int
    type: str
    message: str

    def body(self) -> bytes:
        return json.dumps({"error": {"message": self.message, "type": self.type, "code": self.code}}).encode()

    def __str__(self) -> str:
        return f"{self.code} {self.type}: {self.message}"


def bad_request(message: str) -> RestError:
    return RestError(400, "BadRequestException", message)


def not_found(what: str, message: str) -> RestError:
    return RestError(404, what, message)


def forbidden(message: str) -> RestError:
    return RestError(403, "ForbiddenException", message)


def unauthorized(message: str) -> RestError:
    return RestError(401, "NotAuthorizedException", message)


_BY_TYPE: tuple[tuple[type[BaseException], int, str], ...] = (
    (NoSuchIcebergTableError, 404, "NoSuchTableException"),
    (NoSuchTableError, 404, "NoSuchTableException"),
    (NoSuchPropertyException, 404, "NoSuchTableException"),  # a Hive table that is not Iceberg's
    (NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
    (TableAlreadyExistsError, 409, "AlreadyExistsException"),
    (NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
    (NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
    (CommitFailedException, 409, "CommitFailedException"),
    (ValidationError, 400, "BadRequestException"),
    (NotImplementedError, 501, "UnsupportedOperationException"),
)

#: what waggle's own answer to a call says about a MetaException: (code, type) before any other reading
_BY_OUTCOME: dict[str, tuple[int, str]] = {
    Outcome.REFUSED: (403, "ForbiddenException"),
    Outcome.MEMBER_DOWN: (503, "ServiceUnavailableException"),
    Outcome.UPSTREAM_ERROR: (503, "ServiceUnavailableException"),
    Outcome.SHED: (503, "ServiceUnavailableException"),
    Outcome.UNKNOWN_OUTCOME: (500, "CommitStateUnknownException"),
}


def _meta(exc: BaseException | None) -> BaseException | None:
    """The Thrift exception behind ``exc`` (pyiceberg wraps some of them), if any. A method that declares no
    MetaException (``lock``, ``check_lock``) gets waggle's refusals and down answers as a TApplicationException."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, (MetaException, NoSuchObjectException, AlreadyExistsException,
                            InvalidOperationException, TApplicationException)):
            found: BaseException = exc
            return found
        exc = exc.__cause__
        seen += 1
    return None


def _text(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    return str(message) if message else str(exc) or type(exc).__name__


def classify(exc: BaseException, last: Answer | None, committing: bool = False) -> RestError:
    """The REST error for ``exc``, raised while answering a request; ``last``: waggle's own answer to the call
    that failed, if it wrote one (a refusal, a member down); ``committing``: whether the request was a commit,
    whose unexplained failures leave its outcome unknown."""
    if isinstance(exc, RestError):
        return exc
    thrift = _meta(exc)
    # an object the grants hide is answered as missing (404), as its metastore would, not as a refusal
    if thrift is not None and last is not None and last.outcome in _BY_OUTCOME and \
            not isinstance(thrift, NoSuchObjectException):
        code, kind = _BY_OUTCOME[last.outcome]
        if kind == "CommitStateUnknownException" and not committing:
            code, kind = 503, "ServiceUnavailableException"
        return RestError(code, kind, _text(thrift))
    for cls, code, kind in _BY_TYPE:
        if isinstance(exc, cls):
            return RestError(code, kind, _text(exc))
    if isinstance(thrift, NoSuchObjectException):
        return RestError(404, "NoSuchTableException" if committing else "NoSuchNamespaceException", _text(thrift))
    if isinstance(thrift, AlreadyExistsException):
        return RestError(409, "AlreadyExistsException", _text(thrift))
    if isinstance(thrift, InvalidOperationException):
        return bad_request(_text(thrift))
    if isinstance(thrift, MetaException):
        # the member's own refusal of a write under the lock: nothing changed, the client may retry
        if committing:
            return RestError(409, "CommitFailedException", _text(thrift))
        return RestError(500, "ServiceFailureException", _text(thrift))
    if isinstance(exc, ValueError):
        return bad_request(_text(exc))
    if committing:
        return RestError(500, "CommitStateUnknownException", f"the commit's outcome is unknown: {_text(exc)}")
    return RestError(500, "ServiceFailureException", _text(exc))
