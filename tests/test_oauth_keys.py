"""Issue 47: the OAuth verifier's cache of the issuer's keys (security/oauth.py: jwks_ttl, jwks_refetch, timeout)
against a real OpenID provider of this module's own (npm oidc-provider, retriever/testing/oidc.py), since the
last test stops it: test_oauth's shared provider and servers are left alone. The keys are fetched again once
jwks_ttl has passed, and not before (the provider's count of JWKS requests); an issuer that stops answering,
refusing connections and then accepting them without a word: a token whose key is cached is still let in, a
token naming a key the issuer never published gets 401, a server that never had the keys 503, each within a
bound set by oauth.timeout, and no token reaches a reply or a log. Key rotation: test_oauth."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import copy_built
from retriever.testing.oidc import Client, Provider, missing, parts
from test_oauth import ISSUED, Server, leaked

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

TTL = 3.0  # oauth.jwks_ttl here: long enough for the four knocks made within it on a busy machine
REFETCH = 1.0  # oauth.jwks_refetch
TIMEOUT = 2.0  # oauth.timeout: each request to the issuer
BOUND = 2 * TIMEOUT + 3  # the longest a refused or admitted request may take while the issuer is silent


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    p = Provider(tmp_path_factory.mktemp("oidc-keys"), [Client("reader", "read", ["team_a"])])
    yield p
    p.stop()


@pytest.fixture(scope="module")
def servers(built_project: Path, provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        dict[str, Server]]:
    """`serve --transport http` and `deploy --mcp` with short key cache settings; the deploy service is sent
    nothing before its issuer stops answering (it never gets the keys)."""
    folder = copy_built(built_project, tmp_path_factory.mktemp("oauth-keys") / "p").parent
    started = {kind: Server(kind, folder, provider, jwks_ttl=TTL, jwks_refetch=REFETCH, timeout=TIMEOUT)
               for kind in ("serve", "deploy")}
    yield started
    logs = {kind: s.stop() for kind, s in started.items()}
    assert {kind: leaked(log)[:3] for kind, log in logs.items()} == {"serve": [], "deploy": []}


def timed(knock: Any, token: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    reply = knock(token)
    return reply, time.monotonic() - started


def test_the_keys_are_fetched_again_once_jwks_ttl_has_passed(servers: dict[str, Server], provider: Provider) -> None:
    s = servers["serve"]
    token = s.token(provider, "reader")
    assert provider.jwks_hits() == 0
    started = time.monotonic()
    for _ in range(4):
        assert s.knock(token).status_code == 200
    assert provider.jwks_hits() == 1  # the first request fetched them; the others used the cache
    assert time.monotonic() - started < TTL, "the machine was too slow to knock within jwks_ttl"
    time.sleep(TTL + 0.5)
    for _ in range(3):
        assert s.knock(token).status_code == 200
    assert provider.jwks_hits() == 2  # fetched again once, after jwks_ttl


def _unknown_kid(token: str) -> str:
    """`token`'s claims signed by a key the issuer never published, under a kid it never used."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(parts(token)[1], stranger, algorithm="RS256", headers={"kid": "never-published-kid"})
    ISSUED.append(forged)
    return forged


@contextlib.contextmanager
def silent(port: int) -> Iterator[None]:
    """A socket on the issuer's port that takes connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        yield


@contextlib.contextmanager
def trickling(port: int) -> Iterator[None]:
    """An issuer on `port` that answers every request with 200 headers and then one byte every half second
    (each read within any per-read timeout, the whole never)."""
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
                while not stop.wait(0.5):
                    conn.sendall(b" ")
            except OSError:  # the server gave up and closed
                pass

    def accept(listener: socket.socket) -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # closed on leaving
                return
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        threading.Thread(target=accept, args=(listener,), daemon=True).start()
        try:
            yield
        finally:
            stop.set()
            listener.shutdown(socket.SHUT_RDWR)


def _check_refusals(servers: dict[str, Server], cached: str, unknown: str, first: str) -> dict[str, float]:
    """The three answers while the issuer cannot be reached, each checked; how long each took."""
    serve, deploy = servers["serve"], servers["deploy"]
    time.sleep(max(TTL, REFETCH) + 0.2)  # the cache has expired, and an unknown kid may fetch again
    admitted, took_cached = timed(serve.knock, cached)
    assert admitted.status_code == 200, admitted.text  # the fetch failed: the keys it has serve on
    time.sleep(REFETCH + 0.2)  # the failed fetch counts as one: the next is allowed after jwks_refetch
    refused, took_unknown = timed(serve.knock, unknown)
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"] == ("the access token is refused: the token names a key the issuer does not "
                                       "publish")
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    down, took_first = timed(deploy.knock, first)
    assert down.status_code == 503, down.text
    assert down.json()["error"] == "the token issuer's keys cannot be fetched now; try again shortly"
    assert down.headers["retry-after"] == "5"
    for reply in (admitted, refused, down):
        assert leaked(reply.text) == [] and all(t not in str(reply.headers) for t in (cached, unknown, first))
    return {"cached": took_cached, "unknown kid": took_unknown, "first fetch": took_first}


def test_an_issuer_that_stops_answering_leaves_cached_keys_and_refuses_the_rest_in_bounded_time(
        servers: dict[str, Server], provider: Provider) -> None:
    """Last: it stops the provider. Refused connections, a silent issuer, then one that answers a byte at a time
    (each fetch waits at most oauth.timeout per request to the issuer, in all)."""
    serve, deploy = servers["serve"], servers["deploy"]
    cached = serve.token(provider, "reader")
    assert serve.knock(cached).status_code == 200
    unknown = _unknown_kid(cached)
    assert parts(unknown)[0]["kid"] != parts(cached)[0]["kid"]
    first = deploy.token(provider, "reader")
    provider.stop()
    took = {"refused": _check_refusals(servers, cached, unknown, first)}
    assert all(t < BOUND for t in took["refused"].values()), took
    with silent(provider.port):
        took["silent"] = _check_refusals(servers, cached, unknown, first)
    assert all(t < BOUND for t in took["silent"].values()), took
    with trickling(provider.port):
        took["trickling"] = _check_refusals(servers, cached, unknown, first)
    assert all(t < BOUND for t in took["trickling"].values()), took
    # each asked the silent and the trickling issuer (its requests waited oauth.timeout), then answered
    assert min(*took["silent"].values(), *took["trickling"].values()) >= TIMEOUT * 0.9, took
    logs = {kind: s.log_path.read_text() for kind, s in servers.items()}
    tried = [line.rsplit(": ", 1)[1] for line in logs["serve"].splitlines() if "keys cannot be fetched" in line]
    assert tried == ["ConnectError"] * 2 + [f"no whole answer within {TIMEOUT:g} s"] * 4, tried  # jwks_ttl's, the kid's
    assert "keys cannot be fetched: no discovery document" in logs["deploy"]
    assert {kind: leaked(log)[:3] for kind, log in logs.items()} == {"serve": [], "deploy": []}
    assert all(" 500 " not in log and "Traceback" not in log for log in logs.values())
