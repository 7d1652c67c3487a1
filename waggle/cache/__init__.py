"""Replies waggle remembers, and what keeps them true: each member's notification log (``cache: events``), a
time to live (``cache: ttl``), and the writes that pass through waggle. See the Caching guide."""
