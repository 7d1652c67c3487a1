"""The plain relay, the core's first-class case: a call that goes to one member as it came, and whose reply comes
back as it went.

Most calls a federation sees are reads of a database whose member spells its names as the client does: the plan
would be "send these bytes to that member, relay its reply byte for byte", and building it (a
:class:`~waggle.call.values.Call`, :func:`~waggle.call.plan.plan`, a :class:`~waggle.call.values.Send`,
:func:`~waggle.call.finish.reply`) costs more than the relay itself. A :class:`Lane` decides that case without
them, and answers exactly what :func:`~waggle.call.plan.plan` would: it is asked only where the plan would be a
plain relayed ``Send`` (unchanged names and bytes, no bridge, no catalog filled, nothing rewritten in the reply),
and says None wherever it is not sure, so the call is planned in full.

What makes a call eligible comes from two places, never from a method's name:

- its entry in the method table (:class:`~waggle.hms.methods.MethodSpec`), and the routes snapshot, decided once
  per method and snapshot (:func:`lane_of`): a read routed by its database names (or to the primary), not
  oneway, that no capability answers itself (tokens, data connectors, links, identity, locks), under a snapshot
  without mapped tables, links or remote tables;
- per call, what the plan reads from the call and the members as they are now (:meth:`Lane.member`): the
  planner's decision for its names (remembered per snapshot, as the plan remembers it), the member's naming
  (names unchanged), its wire format (the client's), its health, its capabilities (no bridge for these
  arguments) and the catalog the call names (none a member without catalogs must be asked about or answered
  with).

Pure: no sockets, no waiting. The driver sends the call's bytes to the member and writes the reply's bytes back
when it is a success; any other reply (an exception, a declared error) is finished by the full core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, cast

from waggle.call.plan import member_args, send_plan
from waggle.call.values import Call, Kind, MemberHealth, Send
from waggle.config.model import CopyReads, MetastoreConfig, NotificationLog, WireFormat
from waggle.hms.fields import catalog_field
from waggle.hms.methods import Access, MethodSpec, Route
from waggle.hms.names import parse
from waggle.hms.rewrite import CALL_NAMES
from waggle.hms.service import MethodIO
from waggle.routes.snapshot import Capabilities
from waggle.routing.federation import Decision, Naming

if TYPE_CHECKING:
    from waggle.routes.snapshot import Routes


class Pick(NamedTuple):
    """What a call's names decide for good under a snapshot: where it goes and whether its names change."""

    member: MetastoreConfig
    caps: Capabilities
    #: a name is catalog-qualified (``@cat#db``): whether the member knows catalogs is asked per call
    qualified: bool
    #: the member spells the call's names differently: the request is sent in its names, the reply rewritten
    renamed: bool
    naming: Naming
    decision: Decision


class Lane:
    """How calls of one method are relayed plainly under one routes snapshot (see the module's notes)."""

    __slots__ = ("_chosen", "bridge", "catalog_fields", "io", "name", "routes", "spec")

    #: names remembered per lane (they are the clients')
    LIMIT = 4096

    def __init__(self, routes: Routes, spec: MethodSpec, io: MethodIO) -> None:
        self.routes = routes
        self.spec = spec
        self.io = io
        self.name = spec.name
        #: the method has a bridge: each call asks the member's capabilities whether it needs it
        self.bridge = spec.bridge is not None
        self.catalog_fields = spec.catalog_fields
        #: what the names of a call decide for good under this snapshot (a read's decision depends on the method
        #: and its names alone): its member, that member's capabilities, and whether a name is catalog-qualified;
        #: None where the names alone rule the lane out
        self._chosen: dict[tuple[str, ...], Pick | None] = {}

    def choose(self, args: Any, health: MemberHealth, client: WireFormat) -> Pick | None:
        """The member a call with ``args`` goes to, by a client speaking ``client``, as it came or in the member's
        names (:attr:`Pick.renamed`); None when the call needs the full plan (or is answered without a
        metastore: refused, or its member down)."""
        names = CALL_NAMES.names_in(args)
        key = tuple(names)
        chosen = self._chosen.get(key, _UNDECIDED)
        if chosen is _UNDECIDED:
            chosen = self._choose(names)
            if len(self._chosen) >= self.LIMIT:
                self._chosen = {}
            self._chosen[key] = chosen
        if chosen is None:
            return None
        choice = cast("Pick", chosen)
        member, caps = choice.member, choice.caps
        wire = member.wire
        if not (wire is client or wire == client):
            return None
        if caps.catalogs is not True and (choice.qualified or (self.catalog_fields and
                                                               catalog_field(args, self.catalog_fields) is not None)):
            return None  # a catalog to ask about, refuse, strip or fill: the plan decides
        if self.bridge and caps.bridges(self.name, args):
            return None
        if not health.is_up(member.name):
            return None  # answered as down by the plan, without waiting
        return choice

    def _choose(self, names: list[str]) -> Pick | None:
        routes = self.routes
        decision = routes.memo.reads.decide(routes.planner, self.spec, names)
        if decision.refusal is not None or decision.link is not None:
            return None
        member = decision.member
        if member.read_from_copies is CopyReads.PREFER and routes.copies.serve(member) and \
                _copied(routes, member, names):
            return None  # its reads may be answered from copies: planned in full
        caps = routes.caps.get(member.name)
        naming = routes.planner.naming(member)
        if caps is None or (not naming.identity) != decision.rewrite_request:
            return None
        return Pick(member, caps, any(name.startswith("@") for name in names), decision.rewrite_request, naming,
                      decision)

    def send(self, call: Call, choice: Pick, health: MemberHealth) -> Send:
        """The plan :func:`~waggle.call.plan.plan` makes of ``call`` when :meth:`choose` made ``choice`` for it,
        made by the same function: a relayed ``Send`` (what the full core finishes a reply with when it is not a
        plain success), or one in the member's names (what the driver sends, and the core finishes)."""
        routes = self.routes
        if choice.renamed:
            args, raw = member_args(routes, choice.naming, call.args), None
        else:
            args, raw = call.args, call.raw
        step = send_plan(Kind.SEND, call, routes, health, member=choice.member, naming=choice.naming,
                         decision=choice.decision, args=args, raw=raw)
        assert isinstance(step, Send), "the lane chose a member that is up"
        return step

def _copied(routes: Routes, member: MetastoreConfig, names: list[str]) -> bool:
    """Whether a database these names reach has copies of the member's tables (or may: a name not plain)."""
    naming = routes.planner.naming(member)
    for name in names:
        db = parse(naming.to_member(name)).db
        if db is None or routes.copies.database(member.name, db):
            return True
    return False


def lane_of(routes: Routes, spec: MethodSpec | None, io: MethodIO | None) -> Lane | None:
    """The lane of a method under ``routes``, or None when its calls are always planned in full."""
    if spec is None or io is None or io.result is None:
        return None  # unknown to waggle's IDL, or oneway (nothing to relay back)
    if spec.access is not Access.READ or spec.route not in (Route.DATABASE, Route.PRIMARY):
        return None  # writes consult the whitelist; fan-outs merge; locks and identities are remembered
    if spec.lock_components or spec.lock_id or spec.granted_lock or spec.releases_lock or spec.shown_lock_ids:
        return None  # lock ids a member shows carry its slot (waggle.call.lock_ids)
    if spec.pointer_guard is not None:
        return None  # the Iceberg pointer guard reads the table first (a write, but never bypassed)
    if routes.mapped_tables or routes.registry is not None or routes.links or routes.tables:
        return None  # tables hidden, or links, remote tables and data connectors that may stand for any name
    if spec.token is not None and routes.config.server.security.answers_tokens:
        return None  # waggle's token service answers it
    if spec.log is not None and routes.config.server.notification_log is NotificationLog.FEDERATED:
        return None  # waggle answers it from the merged log
    return Lane(routes, spec, io)


def lane_for(routes: Routes, name: str, spec: MethodSpec | None, io: MethodIO | None) -> Lane | None:
    """The lane of method ``name`` under ``routes``, decided once per method and snapshot (remembered in the
    snapshot's :class:`~waggle.routes.memo.Memo`)."""
    lanes = routes.memo.lanes.of(routes)
    lane = lanes.get(name, _UNDECIDED)
    if lane is _UNDECIDED:
        lane = lane_of(routes, spec, io)
        if spec is not None:  # client-chosen names of unknown methods are not remembered
            lanes[name] = lane
    return cast("Lane | None", lane)


_UNDECIDED = object()
