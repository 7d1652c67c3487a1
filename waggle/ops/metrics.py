"""Prometheus metrics, in waggle's own registry, served on the HTTP endpoint's ``/metrics``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)

METASTORE_UP = Gauge("waggle_metastore_up", "1 while the metastore answers health checks, else 0.",
                     ["metastore"], registry=REGISTRY)
TUNNEL_UP = Gauge("waggle_tunnel_up", "1 while every hop of the metastore's SSH tunnel is connected, else 0.",
                  ["metastore"], registry=REGISTRY)
TUNNEL_RECONNECTS = Counter("waggle_tunnel_reconnects", "Times the metastore's SSH tunnel was rebuilt after it "
                            "had been up.", ["metastore"], registry=REGISTRY)
