"""The reply cache as a value (waggle.cache.store): bounded in bytes, the oldest used dropped first, entries filed by
member, database and table so that a change drops exactly what it touches, and a reply that raced a drop never
stored. Pure: no clock of its own, no socket."""

from __future__ import annotations

from waggle.cache.store import ENTRY_OVERHEAD, Key, ReplyCache, Scope

#: each entry below costs exactly this many bytes: a body of BODY bytes, 4 bytes of arguments, the overhead
BODY = 296
SIZE = BODY + 4 + ENTRY_OVERHEAD  # 500
NOW = 1000.0


def key(n: int, member: str = "lake", user: str = "") -> Key:
    return Key(member, user, "bb", "get_table", f"a{n:03d}".encode())


def body(n: int) -> bytes:
    return f"{n:03d}".encode().ljust(BODY, b".")


def fill(cache: ReplyCache, n: int, scope: Scope) -> bool:
    return cache.put(key(n, scope.member), scope, body(n), cache.token(scope))


T1 = Scope("lake", "sales", "orders")
T2 = Scope("lake", "sales", "items")
DB = Scope("lake", "sales", None)
OTHER_DB = Scope("lake", "web", "clicks")
OTHER_MEMBER = Scope("sea", "sales", "orders")


# -- bounded in bytes ----------------------------------------------------------------------------------------------
def test_each_entry_counts_its_body_its_arguments_and_the_overhead() -> None:
    cache = ReplyCache(4 * SIZE)
    assert fill(cache, 1, T1)
    assert cache.bytes == SIZE == cache.member_bytes["lake"]
    assert fill(cache, 2, OTHER_MEMBER)
    assert cache.bytes == 2 * SIZE
    assert cache.member_bytes == {"lake": SIZE, "sea": SIZE}


def test_the_bound_holds_and_the_oldest_used_goes_first() -> None:
    cache = ReplyCache(4 * SIZE)
    for n in range(4):
        assert fill(cache, n, T1)
    assert len(cache) == 4 and cache.bytes == 4 * SIZE  # exactly at the bound: nothing dropped
    assert cache.count("lake").evictions == 0
    assert fill(cache, 4, T1)
    assert cache.bytes == 4 * SIZE <= cache.max_bytes
    assert cache.get(key(0), NOW) is None  # the oldest went
    assert [cache.get(key(n), NOW) for n in range(1, 5)] == [body(n) for n in range(1, 5)]
    assert cache.count("lake").evictions == 1
    assert cache.member_bytes["lake"] == 4 * SIZE


def test_a_get_makes_an_entry_the_newest_used() -> None:
    cache = ReplyCache(4 * SIZE)
    for n in range(4):
        fill(cache, n, T1)
    assert cache.get(key(0), NOW) == body(0)  # 0 is now the newest; 1 the oldest
    fill(cache, 4, T1)
    assert cache.get(key(1), NOW) is None
    assert cache.get(key(0), NOW) == body(0)
    fill(cache, 5, T1)  # 2 is the oldest now
    assert cache.get(key(2), NOW) is None
    assert cache.get(key(0), NOW) == body(0)


def test_an_entry_over_a_quarter_of_the_bound_is_not_stored() -> None:
    cache = ReplyCache(4 * SIZE)
    scope = T1
    assert cache.put(key(1), scope, body(1), cache.token(scope))  # exactly a quarter
    too_big = body(2) + b"x"  # one byte over a quarter
    assert not cache.put(key(2), scope, too_big, cache.token(scope))
    assert cache.get(key(2), NOW) is None
    assert len(cache) == 1 and cache.bytes == SIZE
    assert cache.get(key(1), NOW) == body(1)  # nothing was evicted to make room for it


def test_putting_a_key_again_replaces_its_entry_and_its_bytes() -> None:
    cache = ReplyCache(4 * SIZE)
    fill(cache, 1, T1)
    assert cache.put(key(1), T1, b"new", cache.token(T1))
    assert cache.get(key(1), NOW) == b"new"
    assert len(cache) == 1
    assert cache.bytes == cache.member_bytes["lake"] == 3 + 4 + ENTRY_OVERHEAD


# -- forgetting ----------------------------------------------------------------------------------------------------
def _four(cache: ReplyCache) -> None:
    fill(cache, 1, T1)
    fill(cache, 2, T2)
    fill(cache, 3, DB)
    fill(cache, 4, OTHER_DB)


def test_dropping_a_table_drops_its_entries_and_its_databases_database_wide_ones_only() -> None:
    cache = ReplyCache(100 * SIZE)
    _four(cache)
    fill(cache, 5, T1)
    fill(cache, 6, OTHER_MEMBER)
    assert cache.drop_table("lake", "sales", "orders", "write") == 3
    assert cache.get(key(1), NOW) is None and cache.get(key(5), NOW) is None  # the table's
    assert cache.get(key(3), NOW) is None  # its database's database-wide entry
    assert cache.get(key(2), NOW) == body(2)  # another table of the database
    assert cache.get(key(4), NOW) == body(4)  # another database
    assert cache.get(key(6, "sea"), NOW) == body(6)  # the same names in another member
    assert cache.bytes == 3 * SIZE
    assert cache.member_bytes == {"lake": 2 * SIZE, "sea": SIZE}
    counts = cache.count("lake")
    assert counts.dropped == {"write": 3} and counts.invalidations == {"write": 1}
    assert cache.count("sea").dropped == {}


def test_dropping_a_database_drops_all_its_entries_only() -> None:
    cache = ReplyCache(100 * SIZE)
    _four(cache)
    fill(cache, 6, OTHER_MEMBER)
    assert cache.drop_database("lake", "sales", "event") == 3
    assert [cache.get(key(n), NOW) for n in (1, 2, 3)] == [None, None, None]
    assert cache.get(key(4), NOW) == body(4)
    assert cache.get(key(6, "sea"), NOW) == body(6)
    assert cache.member_bytes["lake"] == SIZE
    assert cache.count("lake").dropped == {"event": 3}


def test_dropping_a_member_drops_all_its_entries_only() -> None:
    cache = ReplyCache(100 * SIZE)
    _four(cache)
    fill(cache, 6, OTHER_MEMBER)
    assert cache.drop_member("lake", "gap") == 4
    assert len(cache) == 1 and cache.bytes == SIZE
    assert cache.member_bytes == {"lake": 0, "sea": SIZE}
    assert cache.get(key(6, "sea"), NOW) == body(6)
    counts = cache.count("lake")
    assert counts.dropped == {"gap": 4} and counts.invalidations == {"gap": 1}
    assert cache.drop_member("lake", "gap") == 0  # nothing left to drop
    assert counts.dropped == {"gap": 4}


def test_dropped_entries_can_be_stored_again() -> None:
    cache = ReplyCache(100 * SIZE)
    _four(cache)
    cache.drop_table("lake", "sales", "orders", "write")
    assert fill(cache, 1, T1)
    assert cache.get(key(1), NOW) == body(1)
    cache.drop_member("lake", "admin")
    assert fill(cache, 1, T1) and fill(cache, 3, DB)
    assert len(cache) == 2


# -- a reply that raced a change -----------------------------------------------------------------------------------
def test_a_reply_whose_table_changed_after_its_token_is_refused() -> None:
    cache = ReplyCache(100 * SIZE)
    token = cache.token(T1)
    cache.drop_table("lake", "sales", "orders", "write")
    assert not cache.put(key(1), T1, body(1), token)
    assert cache.get(key(1), NOW) is None and cache.bytes == 0
    assert cache.put(key(1), T1, body(1), cache.token(T1))  # a token taken after the drop is fine


def test_any_change_in_the_database_or_member_refuses_a_reply_fetched_before_it() -> None:
    cache = ReplyCache(100 * SIZE)
    token = cache.token(T1)
    cache.drop_table("lake", "sales", "items", "write")  # another table of the database: still refused
    assert not cache.put(key(1), T1, body(1), token)
    token = cache.token(DB)
    cache.drop_database("lake", "sales", "event")
    assert not cache.put(key(3), DB, body(3), token)
    token = cache.token(T1)
    cache.drop_member("lake", "unreadable")
    assert not cache.put(key(1), T1, body(1), token)
    assert len(cache) == 0


def test_changes_elsewhere_do_not_refuse_a_reply() -> None:
    cache = ReplyCache(100 * SIZE)
    token = cache.token(T1)
    cache.drop_database("lake", "web", "event")  # another database
    cache.drop_member("sea", "gap")  # another member
    cache.drop_table("sea", "sales", "orders", "write")
    assert cache.put(key(1), T1, body(1), token)


# -- expiry and counts ---------------------------------------------------------------------------------------------
def test_an_expired_entry_is_not_answered_and_goes() -> None:
    cache = ReplyCache(100 * SIZE)
    assert cache.put(key(1), T1, body(1), cache.token(T1), expires=NOW + 60)
    assert cache.put(key(2), T1, body(2), cache.token(T1))  # no expiry
    assert cache.get(key(1), NOW + 59.9) == body(1)
    assert cache.get(key(1), NOW + 60) is None
    assert len(cache) == 1 and cache.bytes == SIZE == cache.member_bytes["lake"]
    assert cache.get(key(2), NOW + 1e9) == body(2)
    counts = cache.count("lake")
    assert (counts.hits, counts.misses) == (2, 1)


def test_hits_and_misses_are_counted_per_member() -> None:
    cache = ReplyCache(100 * SIZE)
    fill(cache, 1, T1)
    fill(cache, 6, OTHER_MEMBER)
    cache.get(key(1), NOW)
    cache.get(key(1), NOW)
    cache.get(key(2), NOW)
    cache.get(key(6, "sea"), NOW)
    cache.get(key(7, "sea"), NOW)
    cache.get(key(8, "sea"), NOW)
    lake, sea = cache.count("lake"), cache.count("sea")
    assert (lake.hits, lake.misses, sea.hits, sea.misses) == (2, 1, 1, 2)
    assert cache.get(Key("lake", "ann", "bb", "get_table", b"a001"), NOW) is None  # another user: another key


def test_invalidations_count_each_drop_by_cause() -> None:
    cache = ReplyCache(100 * SIZE)
    _four(cache)
    cache.drop_table("lake", "web", "clicks", "event")
    fill(cache, 4, OTHER_DB)
    cache.drop_table("lake", "web", "clicks", "event")
    cache.drop_table("lake", "sales", "orders", "write")
    counts = cache.count("lake")
    assert counts.invalidations == {"event": 2, "write": 1}
    assert counts.dropped == {"event": 2, "write": 2}
