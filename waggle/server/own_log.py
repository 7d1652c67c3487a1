"""The notification-log calls waggle answers from the federation's merged log (``notification-log:
federated``): the newest id, the events after an id (with the request's filters), and their count. A handler of
:data:`waggle.server.own.HANDLERS`; the log itself is :mod:`waggle.events`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from waggle.call import finish
from waggle.call.values import Answer, Outcome, Send
from waggle.common import metrics
from waggle.events.store import JournalError
from waggle.hms.gen.hive_metastore.ttypes import (
    CurrentNotificationEventId,
    NotificationEventResponse,
    NotificationEventsCountResponse,
)
from waggle.hms.methods import LogOp
from waggle.server import admission
from waggle.upstream.client import UpstreamError

if TYPE_CHECKING:
    from waggle.server.desk import Desk


def merged_log(desk: Desk, step: Send) -> Answer:
    """Answer a log call from the merged log; a member it needs and cannot reach fails it, naming the member."""
    call = step.call
    assert call.spec is not None and call.spec.log is not None
    log, op, args = desk.context.notification_log, call.spec.log, call.args
    visible = _visible(desk)
    value: Any
    try:
        if op is LogOp.CURRENT:
            value = CurrentNotificationEventId(eventId=log.current())
        elif op is LogOp.NEXT:
            request = args.rqst
            keep = _filter(request.eventTypeSkipList, request.dbName, request.tableNames, visible)
            value = NotificationEventResponse(events=log.events(int(request.lastEvent or 0),
                                                                int(request.maxEvents or 0), keep))
        else:
            request = args.rqst
            upto = request.toEventId if request.toEventId and request.toEventId > 0 else None
            count = log.count(int(request.fromEventId or 0), upto,
                              _filter(None, request.dbName, request.tableNames, visible), request.limit)
            value = NotificationEventsCountResponse(eventsCount=count)
    except UpstreamError as exc:
        return finish.failure(call.header, call.io, f"{call.name} failed: the merged notification log needs "
                              f"{exc}", desk.wire, outcome=Outcome.UPSTREAM_ERROR, metastore=exc.member,
                              error=exc.detail)
    except JournalError as exc:
        return finish.failure(call.header, call.io, f"{call.name} failed: the merged notification log's journal "
                              f"in the primary cannot be read: {exc}", desk.wire, outcome=Outcome.UPSTREAM_ERROR,
                              metastore=step.metastore)
    return finish.answered(call, value, desk.wire, "waggle")


def _visible(desk: Desk) -> Callable[[str, str | None], bool] | None:
    """Whether the caller may see a database (or table), under the grants (None: no grants, everything)."""
    grants = desk.context.grants
    if grants is None:
        return None
    who = admission.caller(grants, desk.session)
    return lambda db, table: grants.sees(who, db, table)


def _filter(skip: list[str] | None, db: str | None, tables: list[str] | None,
            visible: Callable[[str, str | None], bool] | None = None) -> Callable[[Any], bool]:
    """What a request keeps: not a skipped type; of its database (waggle's name) and tables, when it names them;
    what the caller may see, under the grants (an event of a hidden database or table is left out)."""
    skipped = frozenset(t.upper() for t in skip or ())
    wanted_db = db.lower() if db else None
    wanted_tables = frozenset(t.lower() for t in tables or ()) or None

    def keep(event: Any) -> bool:
        if event.eventType and event.eventType.upper() in skipped:
            return False
        if wanted_db is not None and (event.dbName or "").lower() != wanted_db:
            return False
        if wanted_tables is not None and (event.tableName or "").lower() not in wanted_tables:
            return False
        if visible is not None and event.dbName and not visible(event.dbName, event.tableName or None):
            metrics.ACCESS_FILTERED.labels("events").inc()
            return False
        return True

    return keep
