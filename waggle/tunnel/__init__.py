"""SSH tunnels to federated metastores, built with paramiko, hop by hop.

paramiko is not supported inside gevent's monkey-patched world, so the proxy never runs it in its own process:
``waggle.upstream.tunnel`` starts ``python -m waggle.tunnel`` (this package, plain threads, no gevent) once per
tunnelled metastore and talks to it over a pipe. The sync, which does not use gevent, can run
:class:`~waggle.tunnel.forward.Forwarder` in its own process.

Nothing in this package imports gevent.
"""
