"""The ground floor: what every room may use, and which uses no room above it.

Structured logging (:mod:`.logging`), Prometheus metrics (:mod:`.metrics`), the resizable limiter behind load
shedding (:mod:`.limiter`) and the event-loop lag sampler (:mod:`.loop`).
"""
