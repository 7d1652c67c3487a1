"""The per-call core: what to do with one client call, decided without I/O (in the spirit of h11).

:mod:`.values` holds the values a call is made of (:class:`~.values.Call`, :class:`~.values.Plan`,
:class:`~.values.Answer`); :func:`.plan.plan` decides a call from the method table, the routes and what is
known about each metastore; :mod:`.finish` turns a metastore's reply (or a bridge's result, or a refusal)
into the bytes the client gets; :mod:`.merge` plans and merges fan-outs. Nothing here touches a socket:
facts that need I/O (does this metastore understand catalogs?) are asked for with
:class:`~.values.NeedCatalogs`, and the driver (:mod:`waggle.server.driver`) resolves them and plans again.
"""
