"""The Iceberg pointer guard on the Thrift door: an alter of a table (``alter_table`` and its variants, see
:attr:`~waggle.hms.methods.MethodSpec.pointer_guard`) reads the member's table first, in the call's identity
through the member's pool, and is refused when it would erase or roll back an Iceberg table's
``metadata_location`` (the decision: :mod:`waggle.call.pointer_guard`); otherwise it is sent as planned. A handler
of :data:`waggle.server.own.HANDLERS`.

Where the call carries an environment context (``alter_table_with_environment_context``, ``alter_table_req``),
an Iceberg table's alter is sent with the metastore's own check (``expected_parameter_key=metadata_location``,
``expected_parameter_value=`` the pointer read here, unless the client set one): a commit landing between the read
and the alter fails the alter on a metastore that knows the check (Hive 2.3.10, 4.x). ``alter_table`` and
``alter_table_with_cascade`` carry no context: between the guard's read and the alter an Iceberg commit may land,
and the alter then overwrites it as it would without waggle (the window is one round trip; an Iceberg-aware
client takes Iceberg's lock and sends the context, and a client that does neither is what the guard catches
whenever the table moved before its alter arrived).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from waggle.call import finish, lost
from waggle.call import pointer_guard as rule
from waggle.call.values import Answer, Outcome, Send
from waggle.hms.bridges import MethodMissing
from waggle.hms.gen.hive_metastore.ttypes import NoSuchObjectException
from waggle.hms.service import METHOD_IO
from waggle.hms.specs import raised
from waggle.upstream import compat
from waggle.upstream.client import UpstreamError
from waggle.upstream.pool import Overloaded

if TYPE_CHECKING:
    from waggle.server.desk import Desk


def guarded_alter(desk: Desk, step: Send) -> Answer:
    """Read the table the alter changes (by the member's names), then refuse the alter or send it."""
    call = step.call
    assert call.spec is not None and call.spec.pointer_guard is not None
    guard = call.spec.pointer_guard
    if rule.new_parameters(step.args, guard) is None or not desk.context.health.is_up(step.metastore):
        return desk.send(step)  # no table to guard (the metastore refuses it), or answered as down
    pool = desk.pool(step.metastore)
    db, table = rule.named(call.args, guard)

    def failed(why: object, outcome: Outcome = Outcome.UPSTREAM_ERROR, **fields: object) -> Answer:
        return desk.fail(call, f"{call.name} failed: waggle's Iceberg pointer guard could not read table "
                               f"'{db}.{table}' from metastore '{pool.name}' before the alter (nothing was "
                               f"altered): {why}", outcome, pool.name, **fields)

    try:
        result = compat.Bridged(pool, desk.session.identity, call.header.seqid).call(
            guard.reads, METHOD_IO[guard.reads].args(req=rule.read_request(step.args, guard)))
    except (MethodMissing, compat.ApplicationError) as exc:
        return failed(exc)
    except UpstreamError as exc:  # the member's health learns of it as of any call's (see waggle.call.lost)
        health = desk.context.health
        if lost.gone(call, exc):
            health.found_down(pool.name, exc.detail)
        else:
            health.call_failed(pool.name, exc)
        return failed(exc, Outcome.SHED if isinstance(exc, Overloaded) else Outcome.UPSTREAM_ERROR,
                      error=exc.detail)
    error = raised(result)
    if isinstance(error, NoSuchObjectException):
        return desk.send(step)  # no such table: the metastore answers the alter as it does
    if error is not None:
        return failed(f"{type(error).__name__}: {getattr(error, 'message', error)}")
    parameters = result.success.table.parameters if result.success and result.success.table else None
    why = rule.why_refused(parameters, rule.new_parameters(step.args, guard))
    current = rule.pointer(parameters)
    if why is not None:
        assert current is not None
        return finish.refused(call, rule.refusal(call.name, db, table, pool.name, current, why), desk.wire,
                              pool.name)
    if current is not None:
        checked = rule.with_expectation(step.args, guard, current)
        if checked is not None:
            step = step._replace(args=checked, raw=None)
    return desk.send(step)
