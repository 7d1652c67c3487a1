"""SASL DIGEST-MD5 for delegation tokens: RFC 2831's example, our client and server, puresasl, bad input."""

from __future__ import annotations

import base64

import pytest
from puresasl.client import SASLClient
from puresasl.mechanisms import DigestMD5Mechanism, SASLProtocolException

from waggle.security.digest import DigestClient, DigestError, DigestInputs, DigestServer, parse_directives
from waggle.security.tokens import TokenAuthority, TokenError, decode_token

USERS = {"alice": b"s3cret", "zoë": "pässwörd".encode()}


def lookup(name: str) -> bytes | None:
    return USERS.get(name)


def test_rfc_2831_example() -> None:
    inputs = DigestInputs(
        username=b"chris",
        realm=b"elwood.innosoft.com",
        password=b"secret",
        nonce=b"OA6MG9tEQGm2hh",
        cnonce=b"OA6MHXh6VqTrRk",
        nc=b"00000001",
        qop=b"auth",
        digest_uri=b"imap/elwood.innosoft.com",
        authzid=None,
    )
    assert inputs.response() == b"d388dad90d4bbd760a152321f2143af7"
    assert inputs.response(server=True) == b"ea40f60335c427b5527b84dbabcdfffd"
    assert "secret" not in repr(inputs)


@pytest.mark.parametrize(("user", "service", "host"), [("alice", "null", "default"), ("zoë", "hive", "HMS.example")])
def test_our_client_against_our_server(user: str, service: str, host: str) -> None:
    server = DigestServer(lookup)
    client = DigestClient(user, USERS[user], service, host)
    challenge = server.challenge()
    assert b'qop="auth"' in challenge and b"algorithm=md5-sess" in challenge and b"charset=utf-8" in challenge
    final = server.respond(client.respond(challenge))
    assert final.startswith(b"rspauth=")
    client.verify(final)
    assert client.complete and server.complete and server.username == user
    assert "s3cret" not in repr(client) and "s3cret" not in repr(server)


def test_puresasl_client_against_our_server() -> None:
    server = DigestServer(lookup)
    client = SASLClient("default", "null", mechanism="DIGEST-MD5", username="alice", password="s3cret")
    response = client.process(server.challenge())
    assert b'digest-uri="null/default"' in response
    final = server.respond(response)
    client.process(final)  # raises if our rspauth were wrong
    assert client.complete and server.username == "alice"


def test_puresasl_rejects_a_wrong_rspauth_from_us() -> None:
    server = DigestServer(lambda name: b"other")
    client = SASLClient("default", "null", mechanism="DIGEST-MD5", username="alice", password="s3cret")
    with pytest.raises(DigestError, match="wrong response"):
        server.respond(client.process(server.challenge()))


def test_our_client_meets_puresasls_expectations() -> None:
    """puresasl, given our nonce, cnonce and count, computes the same response and accepts the same rspauth."""
    server = DigestServer(lookup)
    ours = DigestClient("alice", b"s3cret")
    challenge = server.challenge()
    response = ours.respond(challenge)
    sent = {k: v[0] for k, v in parse_directives(response, "r").items()}
    final = server.respond(response)

    sasl = SASLClient("default", "null", mechanism="DIGEST-MD5", username="alice", password="s3cret")
    mech = sasl._chosen_mech
    assert isinstance(mech, DigestMD5Mechanism)
    mech.process(challenge)
    mech.cnonce, mech.nc = sent["cnonce"], 1
    mech._digest_uri = sent["digest-uri"]
    assert mech.gen_hash(b"AUTHENTICATE:" + sent["digest-uri"]) == sent["response"]
    mech.authenticate_server(parse_directives(final, "f")["rspauth"][0])
    with pytest.raises(SASLProtocolException):
        mech.authenticate_server(b"0" * 32)


def test_hive_token_exchange() -> None:
    """As Hive does it: username base64(identifier), password base64(token password)."""
    authority = TokenAuthority({1: b"k" * 32})
    token, identifier = authority.issue("alice", "hive", "", 1_700_000_000_000)
    decoded = decode_token(token)

    def token_lookup(name: str) -> bytes | None:
        try:
            return base64.b64encode(authority.password_for(base64.b64decode(name, validate=True)))
        except (TokenError, ValueError):
            return None

    server = DigestServer(token_lookup)
    client = DigestClient(base64.b64encode(decoded.identifier).decode(), base64.b64encode(decoded.password))
    client.verify(server.respond(client.respond(server.challenge())))
    assert base64.b64decode(server.username) == identifier.to_bytes()

    stranger = DigestServer(token_lookup)
    with pytest.raises(DigestError, match="unknown user"):
        stranger.respond(DigestClient("bm90IGEgdG9rZW4=", b"x").respond(stranger.challenge()))


def exchange(**edits: bytes) -> tuple[DigestServer, bytes]:
    """A server and a genuine response from alice, with directives replaced (an empty value removes one)."""
    server = DigestServer(lookup)
    response = DigestClient("alice", b"s3cret").respond(server.challenge())
    directives = {k: v[0] for k, v in parse_directives(response, "r").items()}
    for name, value in edits.items():
        if value:
            directives[name] = value
        else:
            directives.pop(name)
    quoted = {"username", "realm", "nonce", "cnonce", "digest-uri", "authzid"}
    return server, b",".join(k.encode() + b"=" + (b'"' + v + b'"' if k in quoted else v) for k, v in directives.items())


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ({"username": b"bob"}, "unknown user 'bob'"),
        ({"nonce": b"AAAA"}, "wrong nonce"),
        ({"nc": b"00000002"}, "replayed"),
        ({"nc": b"1"}, "nc must be 8 hex digits"),
        ({"response": b"0" * 32}, "wrong response"),
        ({"response": b"xyz"}, "32 hex digits"),
        ({"digest-uri": b"hive/elsewhere"}, "wrong response"),  # the uri is part of the hash
        ({"realm": b"EVIL"}, "realm 'EVIL' is not 'default'"),
        ({"qop": b"auth-conf"}, "was not offered"),
        ({"charset": b"latin-2"}, "unsupported charset"),
        ({"cnonce": b""}, "missing 'cnonce'"),
        ({"username": b""}, "missing 'username'"),
        ({"authzid": b"root"}, "may not act as 'root'"),
    ],
)
def test_server_refuses(edits: dict[str, bytes], message: str) -> None:
    server, response = exchange(**edits)
    with pytest.raises(DigestError, match=message):
        server.respond(response)
    assert not server.complete
    with pytest.raises(DigestError, match="already failed"):
        server.respond(response)
    with pytest.raises(DigestError, match="no user"):
        _ = server.username


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (b'username="alice', "unterminated"),
        (b"username", "expected '='"),
        (b"=x", "directive name"),
        (b'username="a" nonce="b"', "expected ','"),
        (b'username="a",username="b"', "more than once"),
        (b"username=,nonce=x", "has no value"),
        (b"x" * 5000, "more than 4096"),
    ],
)
def test_server_refuses_bad_syntax(response: bytes, message: str) -> None:
    server = DigestServer(lookup)
    server.challenge()
    with pytest.raises(DigestError, match=message):
        server.respond(response)


def test_a_replayed_response_fails_against_a_new_challenge() -> None:
    server = DigestServer(lookup)
    response = DigestClient("alice", b"s3cret").respond(server.challenge())
    server.respond(response)
    again = DigestServer(lookup)
    again.challenge()
    with pytest.raises(DigestError, match="wrong nonce"):
        again.respond(response)


def test_server_order_of_calls() -> None:
    server = DigestServer(lookup)
    with pytest.raises(DigestError, match="before challenge"):
        server.respond(b"")
    server.challenge()
    with pytest.raises(DigestError, match="twice"):
        server.challenge()


def test_parser_accepts_rfc_lists() -> None:
    parsed = parse_directives(b' , realm="a\\"b" ,, realm=c , Nonce = "x,y"  ,', "c", frozenset({"realm"}))
    assert parsed == {"realm": [b'a"b', b"c"], "nonce": [b"x,y"]}


def test_client_answers_a_realmless_challenge_and_escapes_quotes() -> None:
    users = {'we"ird\\': b"pw"}
    server = DigestServer(users.get, realm="")
    client = DigestClient('we"ird\\', b"pw")
    client.verify(server.respond(client.respond(server.challenge())))
    assert server.username == 'we"ird\\'


@pytest.mark.parametrize(
    ("challenge", "message"),
    [
        (b'realm="r",qop="auth",algorithm=md5-sess', "missing 'nonce'"),
        (b'nonce="n",qop="auth"', "missing 'algorithm'"),
        (b'nonce="n",qop="auth",algorithm=md5', "unsupported algorithm"),
        (b'nonce="n",qop="auth-conf",algorithm=md5-sess', "does not offer qop 'auth'"),
        (b'nonce="n",nonce="m",algorithm=md5-sess', "more than once"),
    ],
)
def test_client_refuses_challenges(challenge: bytes, message: str) -> None:
    with pytest.raises(DigestError, match=message):
        DigestClient("alice", b"s3cret").respond(challenge)


def test_client_refuses_a_wrong_rspauth() -> None:
    server = DigestServer(lambda name: b"s3cret")
    client = DigestClient("alice", b"s3cret")
    final = server.respond(client.respond(server.challenge()))
    with pytest.raises(DigestError, match="wrong rspauth"):
        client.verify(b"rspauth=" + b"0" * 32)
    with pytest.raises(DigestError, match="missing 'rspauth'"):
        client.verify(b"")
    client.verify(final)
    assert client.complete


def test_challenge_uses_the_given_randomness() -> None:
    server = DigestServer(lookup, random_bytes=lambda n: b"\x00" * n)
    assert b'nonce="' + base64.b64encode(bytes(24)) + b'"' in server.challenge()
