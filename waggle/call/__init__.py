"""The per-call core: what to do with one client call, decided without I/O (in the spirit of h11).

:mod:`.values` holds the values a call is made of (:class:`~.values.Call`, the plans :class:`~.values.Send`,
:class:`~.values.Refusal` and :class:`~.values.FanOut`, and :class:`~.values.Answer`); :func:`.plan.plan`
decides a call from the method table, the routes snapshot (:class:`waggle.routes.snapshot.Routes`: the planner,
each member's capabilities, the links) and the members' health; remote databases are planned in their own room
(:mod:`waggle.remotes.planning`), asked as routing is. :mod:`.finish` turns a metastore's reply (or a bridge's
result, or a refusal) into the bytes the client gets, and returns what the call leaves behind
(:class:`~.values.Settled`) for the driver to apply; :mod:`.merge` plans and merges fan-outs. Nothing here
touches a socket or changes a call's arguments: facts that need I/O (does this metastore understand catalogs?
is this name a link?) are asked for with :class:`~.values.NeedCatalogs` and :class:`~.values.NeedLinks`, and
the driver (:mod:`waggle.server.driver`) resolves them and plans again with what it learned
(:class:`~.values.Learned`). The calls waggle answers itself are handled by the table in
:mod:`waggle.server.own`.
"""
