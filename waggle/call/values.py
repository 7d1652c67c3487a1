"""The values one call is made of: what arrived, what to do, and what to answer."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from thrift.Thrift import TMessageType

from waggle.config.model import MetastoreConfig, WireFormat
from waggle.hms.client_release import FRESH, ClientRelease
from waggle.hms.client_release import learn as learn_release
from waggle.hms.methods import METHODS, Access, MethodSpec, Txn
from waggle.hms.service import METHOD_IO, MethodIO
from waggle.hms.wire import Header
from waggle.routing.federation import Decision, Naming, Refused
from waggle.upstream.client import Identity

if TYPE_CHECKING:
    from waggle.copies.serve import Served
    from waggle.routing.links import Link
    from waggle.routing.table_links import TableLink
    from waggle.security.frontdoor import Authenticated


class MemberHealth(Protocol):
    """Which metastores are up when a call is planned (:class:`waggle.upstream.health.Health`, or a plain value)."""

    def is_up(self, name: str) -> bool: ...

    def down_message(self, name: str) -> str: ...


class Encoder(Protocol):
    """How an answer is encoded for the client (its wire format); encoding is pure."""

    def encode(self, name: str, mtype: int, seqid: int, obj: Any) -> bytes: ...

    def encode_application_error(self, name: str, seqid: int, kind: int, message: str) -> bytes: ...


@dataclass(slots=True)
class Session:
    """What one client connection remembers between its calls."""

    #: the identity from the connection's set_ugi, if any: every call travels upstream as this user
    identity: Identity | None = None
    #: who the connection proved to be (Kerberos or a token); then set_ugi cannot change ``identity``
    authenticated: Authenticated | None = None
    #: lock id -> the federated member that granted it, for the ids that cannot carry the member's slot (at or
    #: above 2**48, or of a metastore that has no slot): others name their member themselves (waggle.call.lock_ids)
    lock_owners: dict[int, MetastoreConfig] = field(default_factory=dict)
    #: the link whose tables the connection is dropping one by one (a stock DROP DATABASE ... CASCADE), if any
    cascading: str | None = None
    #: what its calls say about the client's Hive release: where it reads the errors waggle writes
    #: (:func:`waggle.hms.client_release.learn`, before each call is planned)
    release: ClientRelease = FRESH
    #: locks the connection was granted and has not released, and whether a transaction of its is open: then its
    #: reads are not answered from waggle's cache (a committer reads what it checks under its lock)
    locks_held: int = 0
    in_transaction: bool = False
    #: who the grants last saw the connection's calls come from: (user proven, set_ugi user), until when that
    #: holds, under which grants, and the caller (waggle.server.admission.caller)
    grants_caller: tuple[Any, float, Any, Any] | None = None

    @classmethod
    def of(cls, who: Authenticated | None) -> Session:
        """A new connection's session: a proven identity (Kerberos or a token) makes every call travel as this
        user, and set_ugi cannot change it."""
        session = cls()
        if who is not None:
            session.authenticated = who
            session.identity = (who.user, ())
        return session

    @property
    def may_remember(self) -> bool:
        """Whether the connection's reads may be answered from waggle's cache: no lock held, no transaction open,
        no link's cascade under way."""
        return not self.locks_held and not self.in_transaction and self.cascading is None

    def hold(self, spec: MethodSpec | None) -> None:
        """What a successful call leaves the connection holding: a lock until it is released, a transaction (and
        its locks) until it is committed or aborted."""
        if spec is None:
            return
        if spec.access is Access.LOCK:
            self.locks_held += 1
        elif spec.releases_lock:
            self.locks_held = max(0, self.locks_held - 1)
        if spec.txn is Txn.OPEN:
            self.in_transaction = True
        elif spec.txn is Txn.END:
            self.in_transaction = False
            self.locks_held = 0

    def learn(self, spec: MethodSpec | None, args: Any) -> None:
        """Learn what a call says about the client's release (where it reads waggle's errors)."""
        self.release = learn_release(self.release, spec, args)


@dataclass(slots=True)
class Call:
    """One client call as it arrived, in waggle's IDL. ``args`` is None for a method waggle's IDL does not have. A
    call that a release numbers apart from waggle's IDL is made waggle's, ``args`` and ``raw`` (see
    :attr:`~waggle.hms.service.MethodIO.arrives`)."""

    header: Header
    spec: MethodSpec | None
    io: MethodIO | None
    args: Any
    raw: bytes
    session: Session
    #: the client's wire format
    wire: WireFormat
    #: how many times the call was planned again because its metastore was lost (waggle.call.lost)
    attempt: int = 0

    def __post_init__(self) -> None:
        io = self.io
        if io is not None and io.arrives is not None and self.args is not None:
            self.args, self.raw = io.arrives(self.args, self.raw, self.wire.protocol)

    @property
    def name(self) -> str:
        return self.header.name

    @property
    def oneway(self) -> bool:
        return bool(self.header.mtype == TMessageType.ONEWAY)


class Kind(enum.Enum):
    """What the driver does with a plan. The kinds waggle answers itself (identity, tokens, links, data
    connectors) each have a handler in :data:`waggle.server.own.HANDLERS`."""

    REFUSE = "refuse"  # answer with ``refusal``; nothing is sent upstream
    DOWN = "down"  # the metastore is down: answer with ``refusal`` (its down message); nothing is sent
    SEND = "send"  # send to ``metastore`` (relayed, or rewritten), then :func:`waggle.call.finish.reply`
    BRIDGE = "bridge"  # answer through the method's bridge on ``metastore``
    FANOUT = "fanout"  # send to every member in ``jobs``, then :func:`waggle.call.merge.merge`
    IDENTITY = "identity"  # take the call's identity for the connection; the primary answers
    TOKENS = "tokens"  # waggle's token service answers (a Kerberos front door); see MethodSpec.token
    LINK = "link"  # a link is created (the remote checked, then the primary) or dropped (in the primary only)
    CONNECTORS = "connectors"  # waggle answers a Hive 4 data-connector call (remote databases enabled)
    COPY = "copy"  # sent to the primary about a copy (read-from-copies), its reply made the source's
    PAIRED = "paired"  # the member and the primary's copy are asked at once; the source's partitions get the
    # copy's storage (read-from-copies: prefer)
    LOG = "log"  # waggle answers a notification-log call from the merged log (notification-log: federated)
    POINTER_GUARD = "pointer guard"  # an alter of a table that may be Iceberg's: the member's table is read first,
    # and the alter refused if it would erase or roll back metadata_location, else sent (MethodSpec.pointer_guard)


class Outcome(enum.StrEnum):
    """How a call ended, as its log line (``outcome=``) and the metrics say it: these strings are the ones the
    docs and dashboards name. A metastore's reply that is a declared exception is recorded by the exception's
    class name instead (:func:`waggle.call.finish.outcome`)."""

    OK = "ok"
    SENT = "sent"  # a oneway call, sent
    REFUSED = "refused"  # refused by waggle before anything was sent
    SHED = "shed"  # over a limit: waggle's (limits.*) or a metastore's pool
    MEMBER_DOWN = "member_down"
    UPSTREAM_ERROR = "upstream_error"
    UNKNOWN_OUTCOME = "unknown_outcome"  # a write whose metastore was lost after the request left
    NO_EQUIVALENT = "no_equivalent"  # a member lacks the method and what its bridge needs
    BRIDGE_ERROR = "bridge_error"  # a defect in a bridge
    BRIDGE = "bridge"  # answered through the bridge instead (never recorded: the bridge's answer is)
    APPLICATION_ERROR = "application_error"  # a TApplicationException from the metastore
    EXCEPTION = "exception"  # an exception the method does not declare
    CLIENT_GONE = "client_gone"


#: a method's name -> its method table entry and its IDL (None, None: a method waggle's IDL does not have)
Entry = tuple[MethodSpec | None, MethodIO | None]
ENTRIES: Mapping[str, Entry] = {name: (METHODS.get(name), METHOD_IO.get(name)) for name in {*METHODS, *METHOD_IO}}
NO_ENTRY: Entry = (None, None)


#: a call's outcome -> the kind of error counted in waggle_call_errors_total (None: not an error; any outcome
#: not listed is an exception the metastore answered with)
ERROR_KINDS: Mapping[str, str | None] = {
    Outcome.OK: None, Outcome.SENT: None, Outcome.MEMBER_DOWN: "upstream", Outcome.UPSTREAM_ERROR: "upstream",
    Outcome.NO_EQUIVALENT: "upstream", Outcome.BRIDGE_ERROR: "upstream", Outcome.UNKNOWN_OUTCOME: "upstream",
    Outcome.SHED: "shed", Outcome.REFUSED: "refused", Outcome.CLIENT_GONE: "client",
}


@dataclass(frozen=True, slots=True)
class NeedCatalogs:
    """Planning needs to know whether these metastores understand catalogs: ask them, then plan again."""

    members: tuple[str, ...]
    #: ask in parallel within the fan-out timeout (a fan-out); else ask the one member and wait for it
    bounded: bool = False


@dataclass(frozen=True, slots=True)
class Learned:
    """What was looked up for one call before it was planned again (whatever the answers were)."""

    #: members asked whether they understand catalogs
    catalogs: frozenset[str] = frozenset()
    #: data connectors read from the primary
    connectors: frozenset[str] = frozenset()
    #: (database, table) names looked up in the primary
    tables: frozenset[tuple[str, str]] = frozenset()

    def after(self, need: NeedCatalogs | NeedLinks) -> Learned:
        """What is known once ``need`` was looked up too."""
        if isinstance(need, NeedCatalogs):
            return Learned(self.catalogs | set(need.members), self.connectors, self.tables)
        return Learned(self.catalogs, self.connectors | set(need.connectors), self.tables | set(need.tables))


@dataclass(frozen=True, slots=True)
class NeedLinks:
    """Planning needs to know whether these names are links (or what these data connectors are): look them up
    in the primary, then plan again."""

    names: tuple[str, ...]
    connectors: tuple[str, ...] = ()
    #: (database, table) names that may be remote tables
    tables: tuple[tuple[str, str], ...] = ()


class Send(NamedTuple):
    """A call for one metastore: sent to it (Kind.SEND, Kind.BRIDGE), or answered by waggle, which may send it on
    (Kind.LINK, Kind.IDENTITY, Kind.TOKENS, Kind.CONNECTORS, Kind.POINTER_GUARD). Immutable, as every plan: made
    once, never patched (a tuple: as cheap to make as a slotted class, on the path of every relayed call)."""

    kind: Kind
    call: Call
    #: the metastore that answers, and its configuration; the driver sends through the routes' pool of that name
    metastore: str
    member: MetastoreConfig
    #: the arguments to send and answer for: the call's own, or a copy the plan changed (never changed in place)
    args: Any
    #: the request to send: raw bytes when it travels unchanged, else None (encode ``args``)
    raw: bytes | None = None
    naming: Naming | None = None
    decision: Decision | None = None
    #: the call is answered through the method's bridge (decided when the plan is made: Kind.BRIDGE, or a
    #: self-answered kind's call sent on)
    bridge: bool = False
    #: the limits its reply is decoded within (upstream-limits)
    limits: Any = None
    #: the catalog to put into the reply's empty catalog fields (the metastore has none)
    fill: str | None = None
    #: the reply needs names rewritten, tables filtered or catalogs filled
    rewrite_reply: bool = False
    #: the reply may stream to the client while it arrives (unchanged, same wire format, unframed)
    stream: bool = False
    #: the call names a link (a reply describing its database says so), or creates or drops one (Kind.LINK)
    link: Link | None = None
    #: the call names a remote table (requests and replies carry its remote and local names), or makes or
    #: drops one (Kind.LINK)
    table_link: TableLink | None = None
    #: the primary answers from a copy of the member's table: the reply is made the source's
    copy: Served | None = None
    #: the slot of the federated member whose reply shows lock ids (they are shown with it); None: as they are
    lock_slot: int | None = None

    @property
    def wire(self) -> WireFormat:
        """The wire format of the metastore."""
        return self.member.wire


class Refusal(NamedTuple):
    """A call answered with an error before anything reached a metastore: refused (Kind.REFUSE), or for a
    metastore that is down (Kind.DOWN)."""

    kind: Kind
    call: Call
    #: the metastore the call was for (which may be gone)
    metastore: str
    #: the answer's text, and how it is raised
    refusal: str
    refused_as: Refused = Refused.META
    #: counted but not logged (a catalog the metastore cannot have)
    quiet: bool = False
    #: a method waggle's IDL does not have, naming a database it routes: the database, and whose it is
    unknown_method: bool = False
    foreign: str | None = None
    decision: Decision | None = None


class FanOut(NamedTuple):
    """A call asked of several metastores (Kind.FANOUT), whose answers merge (:mod:`waggle.call.merge`)."""

    call: Call
    #: (naming, args) per member asked, and the merge's own facts
    jobs: Sequence[tuple[Naming, Any]]
    facts: Any

    @property
    def kind(self) -> Kind:
        return Kind.FANOUT

    @property
    def metastore(self) -> str:
        return "*"


class Paired(NamedTuple):
    """A read of partitions asked of the member (``source``) and of the primary's copy (``copy``) at once: the
    source's partitions, with the copy's storage where the copy holds them (:mod:`waggle.copies.serve`)."""

    call: Call
    source: Send
    copy: Send

    @property
    def kind(self) -> Kind:
        return Kind.PAIRED

    @property
    def metastore(self) -> str:
        return self.source.metastore


#: what :func:`waggle.call.plan.plan` decides, one shape per kind of work
Plan = Send | Refusal | FanOut | Paired


@dataclass(frozen=True, slots=True)
class Settled:
    """What a successful call leaves behind, as values: the driver applies them to the connection and the
    runtime (the core changes neither)."""

    #: (member, database): a database created through waggle, for the member's whitelist
    created: tuple[str, str] | None = None
    #: (lock id, member): a lock a federated member granted whose id cannot carry the member's slot; later calls
    #: of this connection carrying the id go there
    granted: tuple[int, MetastoreConfig] | None = None
    #: a lock id a federated member released
    released: int | None = None


@dataclass(slots=True)
class Answer:
    """What the client gets, and how the call is recorded."""

    raw: bytes | None  # the message to write (None: nothing, a oneway call)
    outcome: str  # an Outcome, or the class name of a declared exception the metastore answered with
    metastore: str  # the member that answered ("*" for a fan-out, "-" when none was chosen)
    fields: dict[str, Any] = field(default_factory=dict)  # more for the log line (error, bridge, omitted ...)
    #: the reply was UNKNOWN_METHOD for a method with a bridge: the pool learns it, and the bridge answers
    bridge_instead: bool = False
    #: a refusal's reason and whether it is logged at info (MetaException refusals and unknown methods)
    reason: str | None = None
    loud: bool = False
    #: False: not counted or logged (a set_ugi refused for its size)
    record: bool = True
    #: what the call leaves behind, for the driver to apply (None: nothing)
    settled: Settled | None = None


#: a name as the member spells it -> as the client sees it
NameFn = Callable[[str], str]
