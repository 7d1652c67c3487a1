"""Which REST error each failure is: the spec's ErrorModel, pyiceberg's exceptions, and a MetaException told apart
by waggle's own answer to the call that failed (a refusal, a member down, a write of unknown outcome)."""

from __future__ import annotations

import json

import pytest
from hive_metastore.ttypes import (
    AlreadyExistsException,
    InvalidOperationException,
    MetaException,
    NoSuchObjectException,
)
from pydantic import BaseModel, ValidationError
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
from waggle.rest.errors import RestError, bad_request, classify, forbidden, not_found, unauthorized


def _answer(outcome: str, metastore: str = "analytics") -> Answer:
    return Answer(raw=b"", outcome=outcome, metastore=metastore)


def _validation_error() -> ValidationError:
    class M(BaseModel):
        x: int

    try:
        M.model_validate({"x": "not a number"})
    except ValidationError as exc:
        return exc
    raise AssertionError("no validation error")


def test_the_body_is_the_specs_error_model():
    error = RestError(404, "NoSuchTableException", "table db.t does not exist")
    assert json.loads(error.body()) == {"error": {"message": "table db.t does not exist",
                                                  "type": "NoSuchTableException", "code": 404}}
    assert str(error) == "404 NoSuchTableException: table db.t does not exist"
    assert (bad_request("m").code, bad_request("m").type) == (400, "BadRequestException")
    assert (forbidden("m").code, forbidden("m").type) == (403, "ForbiddenException")
    assert (unauthorized("m").code, unauthorized("m").type) == (401, "NotAuthorizedException")
    assert not_found("NoSuchNamespaceException", "m") == RestError(404, "NoSuchNamespaceException", "m")


def test_a_rest_error_is_itself():
    error = forbidden("no")
    assert classify(error, _answer(Outcome.MEMBER_DOWN)) is error


@pytest.mark.parametrize("exc, code, kind", [
    (NoSuchTableError("Table does not exist: db.t"), 404, "NoSuchTableException"),
    (NoSuchIcebergTableError("db.t is not an Iceberg table"), 404, "NoSuchTableException"),
    (NoSuchPropertyException("no metadata_location"), 404, "NoSuchTableException"),
    (NoSuchNamespaceError("Database does not exist: db"), 404, "NoSuchNamespaceException"),
    (TableAlreadyExistsError("Table already exists: db.t"), 409, "AlreadyExistsException"),
    (NamespaceAlreadyExistsError("Database already exists: db"), 409, "AlreadyExistsException"),
    (NamespaceNotEmptyError("Database db is not empty"), 409, "NamespaceNotEmptyException"),
    (CommitFailedException("Requirement failed: current schema changed"), 409, "CommitFailedException"),
    (_validation_error(), 400, "BadRequestException"),
    (NotImplementedError("views"), 501, "UnsupportedOperationException"),
    (ValueError("bad value"), 400, "BadRequestException"),
])
@pytest.mark.parametrize("committing", [False, True])
def test_pyicebergs_exceptions_map_to_the_specs_codes_and_types(exc, code, kind, committing):
    error = classify(exc, None, committing=committing)
    assert (error.code, error.type) == (code, kind)
    assert error.message


def _wrapped(thrift: BaseException) -> Exception:
    """A thrift exception as pyiceberg raises it: chained behind one of its own."""
    try:
        try:
            raise thrift
        except type(thrift) as inner:
            raise RuntimeError("pyiceberg failed") from inner
    except RuntimeError as outer:
        return outer


DOWN = "metastore 'gone' is unavailable: connection refused"
REFUSED = "metastore 'analytics' is read-only: create_table is not allowed"


@pytest.mark.parametrize("outcome, code, kind", [
    (Outcome.REFUSED, 403, "ForbiddenException"),
    (Outcome.MEMBER_DOWN, 503, "ServiceUnavailableException"),
    (Outcome.UPSTREAM_ERROR, 503, "ServiceUnavailableException"),
    (Outcome.SHED, 503, "ServiceUnavailableException"),
])
@pytest.mark.parametrize("committing", [False, True])
@pytest.mark.parametrize("wrap", [False, True])
def test_a_meta_exception_waggle_wrote_is_told_apart_by_its_outcome_naming_the_member(outcome, code, kind,
                                                                                      committing, wrap):
    text = REFUSED if outcome == Outcome.REFUSED else DOWN
    thrift = MetaException(message=text)
    error = classify(_wrapped(thrift) if wrap else thrift, _answer(outcome), committing=committing)
    assert (error.code, error.type, error.message) == (code, kind, text)


def test_a_write_of_unknown_outcome_is_commit_state_unknown_when_committing_and_unavailable_otherwise():
    thrift = MetaException(message="metastore 'ops' was lost after the write was sent")
    committed = classify(thrift, _answer(Outcome.UNKNOWN_OUTCOME), committing=True)
    assert (committed.code, committed.type) == (500, "CommitStateUnknownException")
    assert "'ops'" in committed.message
    read = classify(thrift, _answer(Outcome.UNKNOWN_OUTCOME), committing=False)
    assert (read.code, read.type) == (503, "ServiceUnavailableException")


@pytest.mark.parametrize("outcome", [Outcome.OK, "MetaException", Outcome.EXCEPTION])
def test_a_meta_exception_the_member_itself_answered_is_a_conflict_when_committing_else_a_failure(outcome):
    thrift = MetaException(message="the member said no")
    last = _answer(outcome)
    committing = classify(thrift, last, committing=True)
    assert (committing.code, committing.type, committing.message) == (409, "CommitFailedException",
                                                                       "the member said no")
    reading = classify(thrift, last, committing=False)
    assert (reading.code, reading.type) == (500, "ServiceFailureException")
    assert classify(thrift, None, committing=True).type == "CommitFailedException"


def test_an_outcome_without_a_thrift_exception_is_not_read():
    # waggle's answer says member_down, but what failed is pyiceberg's own NoSuchTableError: 404
    error = classify(NoSuchTableError("Table does not exist: gone_x.t"), _answer(Outcome.MEMBER_DOWN))
    assert (error.code, error.type) == (404, "NoSuchTableException")


def test_thrift_exceptions_the_member_answered():
    missing = NoSuchObjectException(message="db.t not found")
    assert (classify(missing, None, committing=True).code, classify(missing, None, committing=True).type) == \
        (404, "NoSuchTableException")
    assert classify(missing, None).type == "NoSuchNamespaceException"
    exists = classify(AlreadyExistsException(message="t exists"), None)
    assert (exists.code, exists.type, exists.message) == (409, "AlreadyExistsException", "t exists")
    invalid = classify(_wrapped(InvalidOperationException(message="bad rename")), None, committing=True)
    assert (invalid.code, invalid.type, invalid.message) == (400, "BadRequestException", "bad rename")


def test_anything_else_is_a_server_failure_or_on_a_commit_an_unknown_outcome():
    failure = classify(RuntimeError("socket closed"), None)
    assert (failure.code, failure.type, failure.message) == (500, "ServiceFailureException", "socket closed")
    unknown = classify(RuntimeError("socket closed"), None, committing=True)
    assert (unknown.code, unknown.type) == (500, "CommitStateUnknownException")
    assert "socket closed" in unknown.message and "unknown" in unknown.message
    assert classify(RuntimeError(), None).message == "RuntimeError"  # never an empty message


@pytest.mark.parametrize("outcome, code, kind", [
    (Outcome.MEMBER_DOWN, 503, "ServiceUnavailableException"),
    (Outcome.REFUSED, 403, "ForbiddenException"),
])
def test_a_lock_refused_or_down_comes_as_an_application_exception_and_is_told_apart_the_same(outcome, code, kind):
    """``lock`` declares no MetaException: waggle's answer is a TApplicationException saying the same."""
    thrift = TApplicationException(TApplicationException.INTERNAL_ERROR, "metastore 'lake' is unavailable")
    error = classify(thrift, _answer(outcome, "lake"), committing=True)
    assert (error.code, error.type, error.message) == (code, kind, "metastore 'lake' is unavailable")
    # one the member itself raised (no answer of waggle's) stays an unknown outcome on a commit
    assert classify(thrift, None, committing=True).type == "CommitStateUnknownException"
