"""Issue 47, phase 1, over HTTP with a real OpenID Connect provider (npm oidc-provider on 127.0.0.1,
retriever/testing/oidc.py; `make oidc-provider` installs it): client-credentials JWTs with different
scopes and groups against `retriever serve --transport http` and `retriever deploy --mcp`, each an OAuth
2.1 resource server of its own URI. The protected resource metadata (RFC 9728) and the challenges; the
tokens a server must refuse (expired, another audience or issuer, alg none, HS256 with the public key,
an altered payload, another key, nbf ahead); tools/list and calls per principal through the official MCP
client; collections refused by name; a static hashed token beside OAuth; the audit line of each write,
no token in any log; security.visibility by the tokens' groups claim (test_visibility's planted documents,
on a second serve and deploy pair); and the issuer's key rotation picked up, last (it restarts the provider)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import BIN, copy_built
from retriever.api.registry import BY_NAME
from retriever.testing.net import free_port, wait_http
from retriever.testing.oidc import Client, Provider, forged, missing, parts

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

STATIC = "q7Lx-9c1e0b7a-ci-4d2fZ"  # a hashed static token beside OAuth (principal ci-indexer)
CLIENTS = [Client("reader", "read", ["team_a"]), Client("writer_a", "read write", ["team_a"]),
           Client("writer_b", "read write", ["team_b"]), Client("admin", "read write admin", ["ops"]),
           Client("writer_only", "write", ["team_a"]), Client("short", "read", ["team_a"], ttl=1),
           Client("hr", "read", ["hr"])]  # the group test_visibility's hidden documents name (acl)
ISSUED: list[str] = []  # every token a test used: none may appear in a server's log


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    p = Provider(tmp_path_factory.mktemp("oidc"), CLIENTS)
    yield p
    p.stop()


class Server:
    """`retriever serve --transport http --tools full` or `retriever deploy --mcp` on 127.0.0.1, an OAuth
    resource server for http://127.0.0.1:<port>/mcp with the provider's issuer (`oauth`: more of its settings)."""

    def __init__(self, kind: str, project: Path, provider: Provider, **oauth: Any) -> None:
        import hashlib

        self.kind, self.port = kind, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.resource = f"{self.url}/mcp"
        cfg = yaml.safe_load((project / "parameter.yaml").read_text())
        cfg["security"]["http"].update(
            oauth={"issuer": provider.issuer, "resource": self.resource, "read": ["default"], "write": [],
                   "groups": {"team_a": {"write": ["default"]}, "team_b": {"read": ["b"], "write": ["b"]},
                              "ops": {"read": ["*"], "write": ["*"]}},
                   "leeway": 0, "jwks_refetch": 2, **oauth},
            principals=[{"name": "ci-indexer", "scopes": ["read", "write"], "write": ["default"],
                         "token_sha256": [hashlib.sha256(STATIC.encode()).hexdigest()]}])
        config = project / f"{kind}.yaml"
        config.write_text(yaml.safe_dump(cfg))
        self.log_path = project / f"{kind}.log"
        args = [str(BIN / "retriever"), kind, "--config", str(config), "--port", str(self.port)]
        args += ["--transport", "http", "--tools", "full", "--init"] if kind == "serve" else ["--mcp"]
        env = {k: v for k, v in os.environ.items() if k != "RETRIEVER_HTTP_TOKENS"}
        self.proc = subprocess.Popen(args, stderr=self.log_path.open("w"), env=env)
        ready = f"{self.url}/mcp" if kind == "serve" else f"{self.url}/readyz"
        wait_http(ready, self.proc, lambda: self.log_path.read_text()[-3000:], any_status=kind == "serve")

    def token(self, provider: Provider, client: str, scope: str | None = None) -> str:
        token = provider.token(client, self.resource, scope)
        ISSUED.append(token)
        return token

    def knock(self, token: str | None) -> httpx.Response:
        """One authenticated request that does work: an MCP initialize, or a search."""
        auth = {"Authorization": f"Bearer {token}"} if token is not None else {}
        if self.kind == "deploy":
            return httpx.post(f"{self.url}/search", json={"query_list": ["earthquakes"], "top_k": 1}, headers=auth,
                              timeout=30)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        return httpx.post(f"{self.url}/mcp", json=init, timeout=30,
                          headers={**auth, "Accept": "application/json, text/event-stream"})

    def stop(self) -> str:
        self.proc.terminate()
        self.proc.wait(30)
        return self.log_path.read_text()


@pytest.fixture(scope="module")
def project(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = copy_built(built_project, tmp_path_factory.mktemp("oauth") / "p").parent
    (folder / "index" / "collections" / "b").mkdir(parents=True)  # a second collection (empty) to list
    return folder


def windows(text: str, n: int) -> list[str]:
    return [text[i:i + n] for i in range(len(text) - n + 1)]


def leaked(log: str) -> list[str]:
    """What of a token a log holds: any 12 characters of a JWT's claims or signature, 6 of the static one."""
    found = [w for token in ISSUED for w in windows(token.partition(".")[2], 12) if w in log]
    return found + [w for w in windows(STATIC, 6) if w in log]


@pytest.fixture(scope="module")
def servers(project: Path, provider: Provider) -> Iterator[dict[str, Server]]:
    started = {kind: Server(kind, project, provider) for kind in ("serve", "deploy")}
    yield started
    logs = {kind: s.stop() for kind, s in started.items()}
    assert {kind: leaked(log)[:3] for kind, log in logs.items()} == {"serve": [], "deploy": []}


# ---- the protected resource metadata and the challenge ------------------------------------------

@pytest.mark.parametrize("kind", ["serve", "deploy"])
def test_the_metadata_is_served_without_a_token(servers: dict[str, Server], provider: Provider, kind: str) -> None:
    s = servers[kind]
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        reply = httpx.get(s.url + path, timeout=10)
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"resource": s.resource, "authorization_servers": [provider.issuer],
                                "scopes_supported": ["read", "write", "admin"], "bearer_methods_supported": ["header"],
                                "resource_name": "retriever"}


@pytest.mark.parametrize("kind", ["serve", "deploy"])
def test_a_401_names_the_resource_metadata(servers: dict[str, Server], kind: str) -> None:
    reply = servers[kind].knock(None)
    assert reply.status_code == 401
    assert f'resource_metadata="{servers[kind].url}/.well-known/oauth-protected-resource/mcp"' \
        in reply.headers["www-authenticate"]


# ---- tokens a resource server must refuse -----------------------------------------------------

@pytest.fixture(scope="module")
def expired(servers: dict[str, Server], provider: Provider) -> dict[str, str]:
    """A genuine token of each server (its client's tokens live 1 s), once it has expired."""
    tokens = {kind: s.token(provider, "short") for kind, s in servers.items()}
    time.sleep(max(0.0, parts(tokens["serve"])[1]["exp"] - time.time()) + 1.1)
    return tokens


def attack(case: str, servers: dict[str, Server], kind: str, provider: Provider, expired: dict[str, str]) -> str:
    other = "deploy" if kind == "serve" else "serve"
    genuine = servers[kind].token(provider, "reader")
    key = provider.private_jwk()
    made = {
        "expired": lambda: expired[kind],
        "wrong-audience": lambda: servers[other].token(provider, "reader"),
        "wrong-issuer": lambda: forged(genuine, "issuer-key", key, iss="http://127.0.0.1:1"),
        "alg-none": lambda: forged(genuine, "none", scope="read write admin"),
        "hs256-public-key": lambda: forged(genuine, "hs256-public", key),
        "payload-altered": lambda: forged(genuine, "altered", scope="read write admin"),
        "another-key": lambda: forged(genuine, "other-key", scope="read write admin"),
        "not-yet-valid": lambda: forged(genuine, "issuer-key", key, nbf=int(time.time()) + 600),
        "no-expiry": lambda: forged(genuine, "issuer-key", key, exp=None),
    }[case]()
    ISSUED.append(made)
    return made


REFUSED = {"expired": "expired", "wrong-audience": "(aud)", "wrong-issuer": "(iss)", "alg-none": "algorithm",
           "hs256-public-key": "algorithm", "payload-altered": "signature", "another-key": "signature",
           "not-yet-valid": "not valid yet", "no-expiry": "exp"}


@pytest.mark.parametrize("kind", ["serve", "deploy"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_token_is_refused_with_401(servers: dict[str, Server], provider: Provider, expired: dict[str, str],
                                         kind: str, case: str) -> None:
    reply = servers[kind].knock(attack(case, servers, kind, provider, expired))
    assert reply.status_code == 401, reply.text
    challenge = reply.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge and "resource_metadata=" in challenge
    assert REFUSED[case] in reply.json()["error"], reply.json()


@pytest.mark.parametrize("kind", ["serve", "deploy"])
def test_a_genuine_token_and_a_static_hashed_one_are_let_in(servers: dict[str, Server], provider: Provider,
                                                            kind: str) -> None:
    assert servers[kind].knock(servers[kind].token(provider, "reader")).status_code == 200
    assert servers[kind].knock(STATIC).status_code == 200
    assert servers[kind].knock("q7Lx-9c1e0b7a-ci-WRONG").status_code == 401


# ---- the official MCP client, per principal -----------------------------------------------------

async def _session(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    import httpx2
    from mcp.client.client import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http, \
            SDKClient(streamable_http_client(url, http_client=http)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        replies: list[dict[str, Any]] = []
        for name, arguments in calls:
            try:
                result = await asyncio.wait_for(client.call_tool(name, arguments), 60)
            except Exception as e:  # noqa: BLE001 - a refusal the client raises (the 403 scope challenge)
                replies.append({"error": True, "raised": type(e).__name__, "text": str(e)})
                continue
            replies.append({"error": result.is_error, "text": "".join(getattr(c, "text", "") for c in result.content)})
        return {"tools": names, "calls": replies}


def session(server: Server, token: str, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return asyncio.run(_session(server.resource, token, list(calls)))


def test_tools_list_follows_each_principal_s_scopes(servers: dict[str, Server], provider: Provider) -> None:
    s = servers["serve"]
    listed = {c: session(s, s.token(provider, c))["tools"] for c in ("reader", "writer_a", "admin", "writer_only")}
    everything = listed["admin"]
    for client, scopes in (("reader", {"read"}), ("writer_a", {"read", "write"}), ("writer_only", {"write"})):
        assert listed[client] == {n for n in everything if BY_NAME[n].scope in scopes}, client
    assert "search" in listed["reader"] and "add_documents" not in listed["reader"]
    assert "add_documents" in listed["writer_a"] and "retriever_init" not in listed["writer_a"]
    assert "retriever_init" in everything and "search" not in listed["writer_only"]


def test_a_reader_cannot_write(servers: dict[str, Server], provider: Provider) -> None:
    """The 403 scope challenge (below) reaches the official client's caller as MCPError with the refusal."""
    s = servers["serve"]
    out = session(s, s.token(provider, "reader"), ("add_documents", {"documents": [{"id": "r", "contents": "x"}]}),
                  ("retriever_init", {}), ("search", {"query": "earthquakes", "top_k": 1}))
    assert [c.get("raised") for c in out["calls"]] == ["MCPError", "MCPError", None], out["calls"]
    assert "needs the scope 'write'" in out["calls"][0]["text"] and "reader" in out["calls"][0]["text"]
    assert "needs the scope 'admin'" in out["calls"][1]["text"]
    assert not out["calls"][2]["error"]  # the session goes on


# ---- the scope challenge of MCP over HTTP (403, as the MCP authorization spec asks) -------------------

@pytest.mark.parametrize(("kind", "client", "tool", "scope"), [
    pytest.param("serve", "reader", "add_documents", "write", id="serve-reader-writes"),
    pytest.param("serve", "writer_a", "retriever_init", "admin", id="serve-writer-inits"),
    pytest.param("serve", None, "retriever_init", "admin", id="serve-static-token-inits"),
    pytest.param("deploy", "writer_only", "search", "read", id="deploy-writer-only-searches"),
])
def test_a_call_outside_the_token_s_scopes_is_a_403_challenge(servers: dict[str, Server], provider: Provider,
                                                                kind: str, client: str | None, tool: str,
                                                                scope: str) -> None:
    """A raw JSON-RPC tools/call after initialize: 403, `WWW-Authenticate` with insufficient_scope, the exact scope
    the tool needs and the resource metadata's URL (the 401's), the refusal as a JSON-RPC error of the request's id.
    For OAuth tokens and for the static hashed token (ci-indexer: read, write) beside them."""
    from test_principals import mcp_posts, tools_call

    s = servers[kind]
    token = STATIC if client is None else s.token(provider, client)
    args = {"documents": [{"id": "ch", "contents": "x"}]} if tool == "add_documents" else \
        {"query": "earthquakes"} if tool == "search" else {}
    (refused,) = mcp_posts(s.resource, token, tools_call(5, tool, args))
    assert refused.status_code == 403, refused.text
    assert refused.headers["www-authenticate"] == (
        f'Bearer realm="retriever", resource_metadata="{s.url}/.well-known/oauth-protected-resource/mcp", '
        f'error="insufficient_scope", scope="{scope}"')
    assert refused.json()["id"] == 5 and f"{tool} needs the scope {scope!r}" in refused.json()["error"]["message"]


def test_a_writer_of_b_cannot_write_the_default_collection_a_writer_of_it_can(servers: dict[str, Server],
                                                                             provider: Provider) -> None:
    s = servers["serve"]
    doc = {"documents": [{"id": "oauth-doc-1", "contents": "Basalt herons count the tide tables."}]}
    refused = session(s, s.token(provider, "writer_b"), ("add_documents", doc))["calls"][0]
    assert refused["error"] and "writer_b may not write the collection 'default'" in refused["text"]
    done = session(s, s.token(provider, "writer_a"), ("add_documents", doc), ("search", {"query": "basalt herons"}))
    assert not done["calls"][0]["error"], done["calls"][0]["text"]
    assert json.loads(done["calls"][0]["text"])["added"] == 1
    assert "oauth-doc-1" in done["calls"][1]["text"]
    static = session(s, STATIC, ("delete_documents", {"ids": ["oauth-doc-1"]}))["calls"][0]
    assert not static["error"] and json.loads(static["text"])["deleted"] == 1
    audit = [json.loads(line.split("retriever.audit: ", 1)[1]) for line in s.log_path.read_text().splitlines()
             if "retriever.audit: " in line]
    assert [(a["principal"], a["source"], a["tool"], a["collections"], a["outcome"]) for a in audit[-3:]] == [
        ("writer_b", "oauth", "add_documents", ["default"], "refused"),
        ("writer_a", "oauth", "add_documents", ["default"], "done"),
        ("ci-indexer", "token", "delete_documents", ["default"], "done")]
    assert audit[-2]["added"] == 1 and audit[-1]["deleted"] == 1
    assert "Basalt herons" not in s.log_path.read_text()


def test_a_collection_without_a_read_grant_is_refused_by_name(servers: dict[str, Server], provider: Provider) -> None:
    s = servers["serve"]
    out = session(s, s.token(provider, "reader"), ("search", {"query": "earthquakes", "collection": "b"}),
                  ("retriever_fanout_search", {"query_list": ["earthquakes"], "collections": ["", "b"]}),
                  ("search", {"query": "earthquakes"}))
    assert [c["error"] for c in out["calls"]] == [True, True, False]
    assert all("reader may not read the collection 'b'" in c["text"] for c in out["calls"][:2])


class _Kept:
    """The official client's token storage, in memory: the token it starts with, and those it gets."""

    def __init__(self, tokens: Any) -> None:
        self.tokens, self.client = tokens, None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, info: Any) -> None:
        self.client = info


async def _stepping_up(s: Server, provider: Provider, client: str, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """The official client with its OAuth client-credentials provider, starting from a `read` token of `client`:
    each call's outcome, and the scopes of the token it holds at the end."""
    import httpx2
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
    from mcp.client.client import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import OAuthToken

    kept = _Kept(OAuthToken(access_token=s.token(provider, client, "read"), token_type="Bearer", scope="read",
                            expires_in=300))
    auth = ClientCredentialsOAuthProvider(s.resource, kept, client, provider.clients[client].client_secret,
                                          token_endpoint_auth_method="client_secret_post", scope="read",
                                          issuer=provider.issuer)
    replies: list[dict[str, Any]] = []
    async with httpx2.AsyncClient(auth=auth, timeout=60) as http, \
            SDKClient(streamable_http_client(s.resource, http_client=http)) as sdk:
        for name, arguments in calls:
            result = await sdk.call_tool(name, arguments)
            replies.append({"error": result.is_error, "text": "".join(getattr(c, "text", "") for c in result.content)})
    ISSUED.append(kept.tokens.access_token)
    return {"calls": replies, "scope": kept.tokens.scope}


def test_the_official_oauth_client_steps_up_on_the_challenge(servers: dict[str, Server], provider: Provider) -> None:
    """mcp's ClientCredentialsOAuthProvider reads the 403's scope and asks the issuer for `read write` (its
    step-up): writer_a, whose client may have write, gets it and its write is retried and done; the reader,
    whose client may not, is refused by the issuer (invalid_scope) and the client raises at once (an
    OAuthTokenError that ends its session: a clear failure, not a hang)."""
    s = servers["serve"]
    doc = {"documents": [{"id": "step-up-1", "contents": "Granite stairs of the step-up"}]}
    done = asyncio.run(asyncio.wait_for(_stepping_up(s, provider, "writer_a", ("add_documents", doc),
                                                     ("delete_documents", {"ids": ["step-up-1"]})), 60))
    assert [c["error"] for c in done["calls"]] == [False, False], done
    assert json.loads(done["calls"][0]["text"])["added"] == 1 and done["scope"] == "read write"
    started = time.monotonic()
    with pytest.raises(BaseException) as raised:  # noqa: PT011 - the client's own exception, in its task group
        asyncio.run(asyncio.wait_for(_stepping_up(s, provider, "reader", ("add_documents", doc)), 60))
    assert time.monotonic() - started < 30
    found = raised.value.exceptions if isinstance(raised.value, BaseExceptionGroup) else (raised.value,)
    assert [type(e).__name__ for e in found] == ["OAuthTokenError"], found
    assert "invalid_scope" in str(found[0])


# ---- the deploy service ---------------------------------------------------------------------------

def test_the_deploy_service_follows_the_scopes_and_grants(servers: dict[str, Server], provider: Provider) -> None:
    s = servers["deploy"]
    reader = {"Authorization": f"Bearer {s.token(provider, 'reader')}"}
    writer_only = {"Authorization": f"Bearer {s.token(provider, 'writer_only')}"}
    search = {"query_list": ["earthquakes"], "top_k": 2}
    ok = httpx.post(f"{s.url}/search", json=search, headers=reader, timeout=30)
    assert ok.status_code == 200 and len(ok.json()["ret_psg"][0]) == 2
    assert httpx.post(f"{s.url}/tools/bm25_search", json=search, headers=reader, timeout=30).status_code == 200
    for route, body in (("/search", search), ("/tools/retriever_search", search), ("/metrics", None)):
        no_read = httpx.request("GET" if body is None else "POST", s.url + route, json=body, headers=writer_only,
                                timeout=30)
        assert no_read.status_code == 403, (route, no_read.text)
        assert 'error="insufficient_scope"' in no_read.headers["www-authenticate"]
        assert 'scope="read"' in no_read.headers["www-authenticate"] and "writer_only" in no_read.json()["error"]
    other = httpx.post(f"{s.url}/search", json={**search, "collection_name": "b"}, headers=reader, timeout=30)
    assert other.status_code == 403 and "reader may not read the collection 'b'" in other.json()["error"]
    admin = {"Authorization": f"Bearer {s.token(provider, 'admin')}"}
    listings = {who: httpx.post(f"{s.url}/tools/retriever_list_collections", json={}, headers=h, timeout=30).json()
                for who, h in (("reader", reader), ("admin", admin))}
    assert [[c["name"] for c in listings[w]["collections"]] for w in ("admin", "reader")] == [["", "b"], [""]]
    mcp = session(s, s.token(provider, "reader"), ("search", {"query": "earthquakes", "top_k": 1}))
    assert "search" in mcp["tools"] and not mcp["calls"][0]["error"]
    assert session(s, s.token(provider, "writer_only"))["tools"] == set()  # its MCP tools all read


def test_no_token_reaches_a_log(servers: dict[str, Server]) -> None:
    """After every refusal, write and audit line above: the servers' stderr holds audit lines and
    refusals' reasons, and no token, nor any part of one (the teardown looks again after the rotation)."""
    logs = {kind: s.log_path.read_text() for kind, s in servers.items()}
    assert "retriever.audit" in logs["serve"] and "refused an access token" in logs["deploy"]
    assert len(ISSUED) > 20
    assert {kind: leaked(log)[:3] for kind, log in logs.items()} == {"serve": [], "deploy": []}


# ---- document-level visibility: the token's groups claim decides what it sees ---------------------

@pytest.fixture(scope="module")
def hiding(built_project: Path, provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        dict[str, Server]]:
    """serve and deploy over test_visibility's project: security.visibility on (field acl), a document
    hidden from all but group hr planted as the best match, a hidden neighbour chunk and parent."""
    from test_visibility import visibility_project

    folder = visibility_project(built_project, tmp_path_factory.mktemp("oauth-vis") / "p").parent
    started = {kind: Server(kind, folder, provider) for kind in ("serve", "deploy")}
    yield started
    logs = {kind: s.stop() for kind, s in started.items()}
    assert {kind: leaked(log)[:3] for kind, log in logs.items()} == {"serve": [], "deploy": []}


def test_a_token_whose_groups_exclude_a_document_never_gets_it_over_mcp(hiding: dict[str, Server],
                                                                        provider: Provider) -> None:
    """Every read tool listed to the reader (groups [team_a]), in each case test_visibility calls it, over
    `serve --transport http` with the official client: no hidden document; hr's token (groups [hr]) gets
    them through every document tool."""
    from test_visibility import CASES, WEB, leaks

    s = hiding["serve"]
    names = session(s, s.token(provider, "reader"))["tools"] - WEB
    assert {"search", "get_document", "retriever_get_neighbors", "retriever_search"} <= names
    calls = [(name, args) for name in sorted(names) for args in CASES[name][0]]
    got = {who: session(s, s.token(provider, who), *calls)["calls"] for who in ("reader", "hr")}
    assert [(name, leaks(c["text"])) for (name, _), c in zip(calls, got["reader"]) if leaks(c["text"])] == []
    shown = {name: False for name, _ in calls if CASES[name][1]}
    for (name, _), c in zip(calls, got["hr"]):
        if name in shown:
            shown[name] = shown[name] or bool(leaks(c["text"]))
    assert shown == {name: True for name in shown}


def test_a_token_whose_groups_exclude_a_document_never_gets_it_from_deploy(hiding: dict[str, Server],
                                                                           provider: Provider) -> None:
    from test_visibility import MODES, Q, leaks

    s = hiding["deploy"]
    auth = {who: {"Authorization": f"Bearer {s.token(provider, who)}"} for who in ("reader", "hr")}
    for who, hidden in (("reader", False), ("hr", True)):
        for mode in MODES:
            r = httpx.post(f"{s.url}/search", json={"query_list": [Q], "top_k": 3, "mode": mode}, headers=auth[who],
                           timeout=30)
            assert r.status_code == 200 and (r.json()["ret_ids"][0][0] == "hb-1") is hidden, (who, mode, r.text)
            assert bool(leaks(r.text)) is hidden, (who, mode)
        doc = httpx.post(f"{s.url}/tools/get_document", json={"ids": ["hb-1"]}, headers=auth[who], timeout=30)
        assert doc.status_code == 200 and bool(leaks(doc.text)) is hidden, (who, doc.text)
    mcp = session(s, s.token(provider, "reader"), ("search", {"query": Q, "top_k": 3}))  # the mounted /mcp
    assert not mcp["calls"][0]["error"] and leaks(mcp["calls"][0]["text"]) == []


# ---- last: the issuer's key rotation (restarts the provider) -------------------------------------

def test_the_issuer_s_key_rotation_is_picked_up(servers: dict[str, Server], provider: Provider) -> None:
    s = servers["serve"]
    before = s.token(provider, "reader")
    assert s.knock(before).status_code == 200
    old_kid = parts(before)[0]["kid"]
    time.sleep(2.1)  # oauth.jwks_refetch: the server may fetch the keys again
    provider.rotate()
    after = s.token(provider, "reader")
    assert parts(after)[0]["kid"] != old_kid
    assert s.knock(after).status_code == 200  # an unknown kid: the keys fetched again, the new one found
    assert provider.jwks_hits() == 1
    for _ in range(3):  # the old key is gone from the issuer; unknown kids within jwks_refetch fetch nothing
        refused = s.knock(before)
        assert refused.status_code == 401 and "a key the issuer does not publish" in refused.json()["error"]
    assert provider.jwks_hits() == 1
    assert servers["deploy"].knock(servers["deploy"].token(provider, "reader")).status_code == 200
