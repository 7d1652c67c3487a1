"""The Iceberg REST port's WSGI application: one declarative table of routes, each with its operation.

Every route exists with the config's ``prefix`` (``/v1/{prefix}/namespaces``) and without it (the whole
federation). A request is: token checked (:mod:`waggle.rest.tokens`), routed (werkzeug's routing), scoped (the
prefix: one member or all), answered by its operation over a catalog of its own (:mod:`waggle.rest.catalog`),
and recorded once: the metrics by route, member and status, and one log line per commit. Errors are the spec's
``ErrorModel`` (:mod:`waggle.rest.errors`). A token never reaches a log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.hms.methods import METHODS
from waggle.rest import operations as op
from waggle.rest.catalog import FederatedCatalog
from waggle.rest.errors import RestError, bad_request, classify, forbidden, not_found, unauthorized
from waggle.rest.tokens import TokenRefused, Tokens
from waggle.routing.federation import Refused
from waggle.security.frontdoor import Authenticated

if TYPE_CHECKING:
    from waggle.server.context import ServerContext

log = get_logger("waggle.rest")

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_JSON = "application/json"


@dataclass(slots=True)
class Ask:
    """One request as its operation sees it."""

    catalog: FederatedCatalog
    scope: op.Scope
    path: dict[str, str]
    request: Request
    purge_allowed: bool
    #: the member the request's namespace belongs to, for metrics and the commit log (set as it is learned)
    member: str = "-"
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def json(self) -> dict[str, Any]:
        return op.body(self.request.get_data(cache=True))


def _ns(a: Ask) -> str:
    return a.path["namespace"]


class RouteSpec(NamedTuple):
    """One route of the port."""

    #: the metrics' ``route`` label and the docs' name
    name: str
    method: str
    #: below ``/v1/{prefix}`` (and ``/v1``)
    path: str
    run: Callable[[Ask], Any]
    #: a table commit: logged once, counted by outcome, and an unexplained failure leaves its outcome unknown
    commit: bool = False
    #: the HMS method whose access rules the route's writes need: checked before anything is done, since a table's
    #: files are written before its metastore is asked, and a refusal must leave none behind
    access: str | None = None


def _purge(a: Ask) -> bool:
    return a.request.args.get("purgeRequested", "false").lower() == "true"


_ALTER = "alter_table_with_environment_context"

#: the routes, in the order the docs list them
ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec("list_namespaces", "GET", "/namespaces",
              lambda a: op.list_namespaces(a.catalog, a.scope, a.request.args.get("parent"))),
    RouteSpec("create_namespace", "POST", "/namespaces", lambda a: op.create_namespace(a.catalog, a.scope, a.json),
              access="create_database"),
    RouteSpec("load_namespace", "GET", "/namespaces/<namespace>",
              lambda a: op.load_namespace(a.catalog, a.scope, _ns(a))),
    RouteSpec("namespace_exists", "HEAD", "/namespaces/<namespace>",
              lambda a: op.load_namespace(a.catalog, a.scope, _ns(a)) and None),
    RouteSpec("drop_namespace", "DELETE", "/namespaces/<namespace>",
              lambda a: op.drop_namespace(a.catalog, a.scope, _ns(a)), access="drop_database"),
    RouteSpec("update_namespace_properties", "POST", "/namespaces/<namespace>/properties",
              lambda a: op.update_properties(a.catalog, a.scope, _ns(a), a.json), access="alter_database"),
    RouteSpec("list_tables", "GET", "/namespaces/<namespace>/tables",
              lambda a: op.list_tables(a.catalog, a.scope, _ns(a))),
    RouteSpec("create_table", "POST", "/namespaces/<namespace>/tables",
              lambda a: op.create_table(a.catalog, a.scope, _ns(a), a.json), True, "create_table"),
    RouteSpec("load_table", "GET", "/namespaces/<namespace>/tables/<table>",
              lambda a: op.load_table(a.catalog, a.scope, _ns(a), a.path["table"])),
    RouteSpec("table_exists", "HEAD", "/namespaces/<namespace>/tables/<table>",
              lambda a: op.table_exists(a.catalog, a.scope, _ns(a), a.path["table"])),
    RouteSpec("commit_table", "POST", "/namespaces/<namespace>/tables/<table>",
              lambda a: op.commit_table(a.catalog, a.scope, _ns(a), a.path["table"], a.json), True, _ALTER),
    RouteSpec("drop_table", "DELETE", "/namespaces/<namespace>/tables/<table>",
              lambda a: op.drop_table(a.catalog, a.scope, _ns(a), a.path["table"], _purge(a), a.purge_allowed),
              True, "drop_table"),
    RouteSpec("report_metrics", "POST", "/namespaces/<namespace>/tables/<table>/metrics", lambda a: None),
    RouteSpec("register_table", "POST", "/namespaces/<namespace>/register",
              lambda a: op.register_table(a.catalog, a.scope, _ns(a), a.json), True, "create_table"),
    RouteSpec("rename_table", "POST", "/tables/rename", lambda a: op.rename_table(a.catalog, a.scope, a.json),
              True, _ALTER),
    RouteSpec("commit_transaction", "POST", "/transactions/commit",
              lambda a: op.commit_transaction(a.catalog, a.scope, a.json), True, _ALTER),
)

#: what ``GET /v1/config`` lists as served (Iceberg's ``Endpoint`` strings)
ENDPOINTS = sorted({f"{r.method} /v1/{{prefix}}{r.path.replace('<', '{').replace('>', '}')}" for r in ROUTES})


def _rules() -> Map:
    rules = [Rule("/v1/config", endpoint="config", methods=["GET"]),
             Rule("/v1/oauth/tokens", endpoint="token", methods=["POST"])]
    # werkzeug answers HEAD with a GET rule of the same path too: the HEAD rules go first, so they are their own
    for r in sorted(ROUTES, key=lambda r: r.method != "HEAD"):
        rules.append(Rule(f"/v1/<prefix>{r.path}", endpoint=r.name, methods=[r.method]))
        rules.append(Rule(f"/v1{r.path}", endpoint=r.name, methods=[r.method]))
    return Map(rules, strict_slashes=False, merge_slashes=False)


_OPERATIONS = {r.name: r for r in ROUTES}


class RestApp:
    """The WSGI application of one serving process."""

    def __init__(self, context: ServerContext, tokens: Callable[[], Tokens | None], needs_token: Callable[[], bool],
                 call_timeout: Callable[[], float]) -> None:
        """``tokens``: the token authority now (None: no clients); ``needs_token``: whether every request needs a
        token (clients or Kerberos configured); ``call_timeout``: how long one metastore call through waggle may
        take, in seconds."""
        self.context = context
        self._tokens = tokens
        self._needs_token = needs_token
        self._call_timeout = call_timeout
        self._map = _rules()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ)
        started = time.perf_counter()
        route, member, response = "-", "-", None
        try:
            adapter = self._map.bind_to_environ(environ)
            try:
                route, path = adapter.match()
            except NotFound:
                raise not_found("NotFoundException", f"no such route: {request.method} {request.path}") from None
            except MethodNotAllowed:
                raise RestError(405, "MethodNotAllowedException",
                                f"{request.method} is not allowed on {request.path}") from None
            if route == "token":
                response = self._token(request)
            else:
                who = self._who(request)
                if route == "config":
                    response = self._config(request)
                else:
                    # known before the operation runs, so that its errors are counted under the member too
                    member = self._member(dict(path), request)
                    response, member = self._operation(route, dict(path), request, who)
        except RestError as exc:
            response = Response(exc.body(), exc.code, content_type=_JSON)
        except Exception as exc:
            log.exception("rest.failed", route=route, error=str(exc))
            response = Response(RestError(500, "ServiceFailureException", f"waggle failed: {exc}").body(), 500,
                                content_type=_JSON)
        metrics.REST_REQUESTS.labels(route, member, str(response.status_code)).inc()
        metrics.REST_SECONDS.labels(route).observe(time.perf_counter() - started)
        return response(environ, start_response)  # type: ignore[no-any-return, arg-type]

    # -- who asks ----------------------------------------------------------------------------------------------
    def _who(self, request: Request) -> Authenticated | None:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        tokens = self._tokens()
        if scheme.lower() == "bearer" and token and tokens is not None:
            try:
                bearer = tokens.check(token.strip(), int(time.time()))
            except TokenRefused as exc:
                raise unauthorized(str(exc)) from None
            return Authenticated(user=bearer.user, principal=f"iceberg-rest:{bearer.client}", mechanism="OAUTH2")
        if self._needs_token():
            raise unauthorized("this catalog needs a bearer token: get one from /v1/oauth/tokens with a client id "
                               "and secret of iceberg-rest.clients")
        return None

    def _token(self, request: Request) -> Response:
        form = request.form
        tokens = self._tokens()
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        if request.authorization is not None and request.authorization.type == "basic":
            client_id = request.authorization.username or client_id
            secret = request.authorization.password or secret
        if form.get("grant_type") != "client_credentials":
            return _oauth_error(400, "unsupported_grant_type", "only grant_type=client_credentials is served")
        if tokens is None:
            return _oauth_error(401, "invalid_client", "no clients are configured (iceberg-rest.clients)")
        try:
            token, bearer = tokens.grant(client_id, secret, int(time.time()))
        except TokenRefused as exc:
            log.warning("rest.token_refused", client=client_id, reason=str(exc))
            return _oauth_error(401, "invalid_client", str(exc))
        log.info("rest.token_granted", client=bearer.client, user=bearer.user)
        return Response(json.dumps({"access_token": token, "token_type": "bearer", "expires_in": tokens.lifetime,
                                    "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}),
                        200, content_type=_JSON, headers={"Cache-Control": "no-store"})

    # -- what is asked ------------------------------------------------------------------------------------------
    def _config(self, request: Request) -> Response:
        warehouse = request.args.get("warehouse") or ""
        names = [m.name for m in self.context.config.federation.members]
        if warehouse and warehouse not in names and warehouse != op.EVERYWHERE:
            raise bad_request(f"warehouse {warehouse!r} is not a metastore of this federation: use one of "
                              f"{', '.join(names)}, or none (or {op.EVERYWHERE!r}) for all of them")
        prefix = warehouse or op.EVERYWHERE
        return Response(json.dumps({"defaults": {}, "overrides": {"prefix": prefix}, "endpoints": ENDPOINTS}),
                        200, content_type=_JSON)

    def _owner(self, database: str) -> str | None:
        found = self.context.routes.planner.lookup(database)
        return found.target.member.name if found is not None and found.target is not None else None

    def _scope(self, prefix: str | None) -> op.Scope:
        if prefix is None or prefix == op.EVERYWHERE:
            return op.Scope(None, self._owner)
        if prefix not in {m.name for m in self.context.routes.config.federation.members}:
            raise not_found("NotFoundException", f"no metastore {prefix!r} in this federation (the prefix)")
        return op.Scope(prefix, self._owner)

    def _member(self, path: dict[str, str], request: Request) -> str:
        """The member a request is about: its path's namespace's, or (a rename, a transaction) its body's first
        table's; ``-`` when none is known."""
        namespace = path.get("namespace")
        if namespace is None:
            named = _tables(request)
            namespace = named[0].partition(".")[0] if named else None
        return (self._owner(namespace) if namespace else None) or "-"

    def _operation(self, route: str, path: dict[str, str], request: Request, who: Authenticated | None
                   ) -> tuple[Response, str]:
        spec = _OPERATIONS[route]
        commit = spec.commit
        scope = self._scope(path.pop("prefix", None))
        catalog = FederatedCatalog(self.context, who, self._call_timeout())
        ask = Ask(catalog, scope, path, request, self.context.config.server.iceberg_rest.allow_purge)
        ask.member = self._member(path, request)
        try:
            if spec.access is not None:
                self._may_write(spec.access, path, request, who)
            result = spec.run(ask)
        except Exception as exc:
            latest = catalog.latest
            error = classify(exc, latest.last if latest is not None else None, committing=commit)
            if commit:
                self._committed(route, ask, who, error.type)
            raise error from None
        if commit:
            self._committed(route, ask, who, "committed")
        if result is None:
            return Response(status=204), ask.member
        data = result if isinstance(result, bytes) else json.dumps(result).encode()
        return Response(data, 200, content_type=_JSON), ask.member

    def _may_write(self, method: str, path: dict[str, str], request: Request, who: Authenticated | None) -> None:
        """Refuse (403, naming the metastore and its rule, or the grant) a write that ``access-control-type`` or
        the caller's grants do not allow on any database or table the request names, as the Thrift port refuses
        it: before anything is sent or written."""
        namespace = path.get("namespace")
        if namespace:
            tables = [(namespace, path.get("table") or _body_name(request))]
        else:
            tables = [(t.partition(".")[0], t.partition(".")[2]) for t in _tables(request, destinations=True)]
        routes = self.context.routes
        spec = METHODS[method]
        for database in dict.fromkeys(db for db, _ in tables):
            decision = routes.planner.decide(spec, [database], created=self.context.created)
            if decision.refusal is not None and decision.refused_as is Refused.META:
                raise forbidden(decision.refusal)
        grants = self.context.grants
        if grants is not None:
            caller = grants.caller(who.user if who is not None else None, None)
            for db, table in dict.fromkeys(tables):
                refused = grants.admit_object(caller, spec, db, table if table and table != "-" else None, "rest")
                if refused is not None:
                    raise forbidden(refused.message)

    @staticmethod
    def _committed(route: str, ask: Ask, who: Authenticated | None, outcome: str) -> None:
        short = {"committed": "committed", "CommitFailedException": "conflict",
                 "CommitStateUnknownException": "unknown"}.get(outcome, "failed")
        metrics.REST_COMMITS.labels(ask.member, short).inc()
        if "namespace" in ask.path:  # a create or a register names its table in its body
            table = f"{ask.path['namespace']}.{ask.path.get('table') or _body_name(ask.request)}"
        else:  # a rename or a transaction: the tables its body names
            table = ",".join(_tables(ask.request)) or "-"
        log.info("rest.commit", route=route, table=table, metastore=ask.member, outcome=short,
                 error=None if short == "committed" else outcome, user=who.user if who is not None else None)


def _tables(request: Request, destinations: bool = False) -> list[str]:
    """``db.table`` of each table a rename (its source; its destination too with ``destinations``) or a
    transaction names in its body, as far as it reads."""
    try:
        data = json.loads(request.get_data(cache=True) or b"{}")
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    named = [data.get("source")] if "source" in data else data.get("table-changes")
    if destinations and "destination" in data:
        named = [data.get("source"), data.get("destination")]
    if not isinstance(named, list):
        return []
    found = []
    for item in named:
        ident = item.get("identifier", item) if isinstance(item, dict) else None
        namespace = ident.get("namespace") if isinstance(ident, dict) else None
        if isinstance(namespace, list) and namespace and isinstance(ident, dict):
            found.append(f"{'.'.join(map(str, namespace))}.{ident.get('name', '-')}")
    return found


def _body_name(request: Request) -> str:
    try:
        data = json.loads(request.get_data(cache=True) or b"{}")
    except ValueError:
        return "-"
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else "-"


def _oauth_error(code: int, error: str, description: str) -> Response:
    return Response(json.dumps({"error": error, "error_description": description}), code, content_type=_JSON)
