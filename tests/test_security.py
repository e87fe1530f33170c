"""Issue 10, one test per finding: what a hostile client could do before, refused now."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import BIN, MCP, copy_built, run_cli
from fastmcp import Client
from retriever import Retriever
from retriever.config import Config, load_config, validate_config
from retriever.errors import BusyError, ConfigError, CorpusError
from retriever.store.locks import collection_lock
from retriever.testing.embedding_servers import FakeServer
from retriever.testing.fake_web import FakeProvider, start, stop
from retriever.testing.net import free_port
from retriever.testing.projects import engine_for, write_project
from retriever.websearch import RetryPolicy, build_websearch
from retriever.websearch.base import run_queries

Q = "what causes earthquakes"
KEY = "sk-ENVSECRET45-0a1b2c3d4e5f"


def parts(secret: str, n: int = 6) -> list[str]:
    """Every n-character piece of a secret: none may appear anywhere."""
    return [secret[i : i + n] for i in range(len(secret) - n + 1)]


def leaks(text: str, secret: str) -> list[str]:
    return [p for p in parts(secret) if p in text]


# ---- 1. writing an index never deletes what it did not write ----------------------------------


def _foreign_folder(folder: Path) -> None:
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / ".venv").mkdir()
    (folder / ".env").write_text("SECRET=1\n")
    (folder / "data-notes.txt").write_text("mine\n")


def test_an_index_is_not_written_into_a_foreign_folder_from_the_cli(built_project: Path, tmp_path: Path) -> None:
    config = copy_built(built_project, tmp_path / "p")
    target = config.parent / "myproject"
    _foreign_folder(target)
    proc = run_cli("index", "--config", str(config), "--mode", "bm25", "--overwrite",
                   "--set", f"backend_configs.bm25.save_path={target}")
    assert proc.returncode == 2 and "holds no index of this program" in proc.stderr
    assert sorted(p.name for p in target.iterdir()) == [".env", ".git", ".venv", "data-notes.txt"]
    assert (target / ".git" / "HEAD").is_file()


def test_an_index_is_not_written_into_a_foreign_folder_from_a_tool(built_project: Path, tmp_path: Path) -> None:
    config = copy_built(built_project, tmp_path / "p")
    target = config.parent / "out" / "elsewhere"
    _foreign_folder(target)
    mcp = MCP(engine_for(config))
    mcp.ok("retriever_init")
    assert "holds no index of this program" in mcp.error("retriever_index", {"index_path": str(target),
                                                                             "overwrite": True})
    assert (target / ".env").is_file() and (target / ".git" / "HEAD").is_file()


def test_a_rebuild_removes_only_its_own_old_versions(built_project: Path, tmp_path: Path) -> None:
    config = copy_built(built_project, tmp_path / "p")
    folder = config.parent / "out" / "bm25"
    (folder / "notes.txt").write_text("the user's\n")
    (folder / ".keep").write_text("")
    crashed = folder / "data-20260101T000000-deadbeef"  # a version a crashed write left
    crashed.mkdir()
    old = json.loads((folder / "manifest.json").read_text())["data"]
    e = engine_for(config)
    e.init()
    e.bm25_index(overwrite=True, progress=False)
    names = {p.name for p in folder.iterdir()}
    assert {"notes.txt", ".keep", "manifest.json"} <= names
    assert old not in names and crashed.name not in names
    assert len([n for n in names if n.startswith("data-")]) == 1


# ---- 2. two processes on one collection lose no acknowledged add ------------------------------


def test_two_writers_on_one_collection_keep_both_adds(built_project: Path, tmp_path: Path) -> None:
    config = copy_built(built_project, tmp_path / "p")
    one, two = MCP(engine_for(config)), MCP(engine_for(config))
    one.ok("retriever_init")
    two.ok("retriever_init")
    assert one.ok("retriever_add", {"documents": [{"id": "X", "contents": "xylophone lessons"}]})["documents"] == 31
    assert two.ok("retriever_add", {"documents": [{"id": "Y", "contents": "yodel lessons"}]})["documents"] == 32
    fresh = engine_for(config)
    fresh.init()
    assert {"X", "Y"} <= set(fresh.session.collection.row_of)
    assert fresh.bm25_search("xylophone", 1)[0][0].id == "X" and fresh.search("yodel", 1, mode="dense")[0][0].id == "Y"


def test_a_second_writer_waits_then_gets_a_clear_error(tmp_path: Path) -> None:
    log = tmp_path / "docs"
    with collection_lock(log):
        child = subprocess.run(
            [str(BIN / "python"), "-c",
             "import sys; from pathlib import Path; from retriever.store.locks import collection_lock\n"
             "from retriever.errors import BusyError\n"
             f"try:\n with collection_lock(Path({str(log)!r}), wait=0.3): pass\n"
             "except BusyError as e: print(e); sys.exit(3)"],
            capture_output=True, text=True, timeout=60)
    assert child.returncode == 3 and "another process is writing" in child.stdout
    with collection_lock(log, wait=0.3):  # released: free again
        pass
    with pytest.raises(BusyError):
        with collection_lock(log), collection_lock(log, wait=0.1):
            pass


# ---- 3. tool arguments reach no path and no host outside what the operator allows -------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secrets" / "keys.jsonl"
    secret.parent.mkdir()
    secret.write_text(json.dumps({"id": "k", "contents": "password hunter2", "aws_key": "AKIA"}) + "\n")
    return secret


def test_a_corpus_outside_the_allowed_folders_is_refused(mcp_built: MCP, outside: Path) -> None:
    text = mcp_built.error("retriever_init", {"corpus_path": str(outside)})
    assert "outside the folders this server may use" in text and "hunter2" not in text


def test_a_symlink_out_of_the_project_is_outside(built_project: Path, tmp_path: Path, outside: Path) -> None:
    config = copy_built(built_project, tmp_path / "p")
    (config.parent / "link.jsonl").symlink_to(outside)
    assert "outside" in MCP(engine_for(config)).error("retriever_init", {"corpus_path": "link.jsonl"})


def test_allowed_paths_opens_a_folder(built_project: Path, tmp_path: Path, outside: Path) -> None:
    config = copy_built(built_project, tmp_path / "p")
    cfg = yaml.safe_load(config.read_text())
    cfg["security"] = {"allowed_paths": [str(outside.parent)]}
    config.write_text(yaml.safe_dump(cfg))
    status = MCP(engine_for(config)).ok("retriever_init", {"corpus_path": str(outside), "overwrite": True})
    assert status["corpus"]["documents"] == 1


def test_an_embedding_path_escaping_the_project_is_refused(built_project: Path, tmp_path: Path) -> None:
    config = copy_built(built_project, tmp_path / "p")
    mcp = MCP(engine_for(config))
    mcp.ok("retriever_init")
    text = mcp.error("retriever_embed", {"embedding_path": "out/../../escaped/x.npy", "overwrite": True})
    assert "outside the folders" in text and not (tmp_path / "escaped").exists()


@pytest.mark.parametrize("args", [
    pytest.param({"backend": "openai", "backend_configs": {"openai": {"base_url": "http://127.0.0.1:9/v1"}}},
                 id="openai-base-url"),
    pytest.param({"backend_configs": {"openai": {"api_key": "sk-client-key"}}}, id="openai-key"),
    pytest.param({"backend": "infinity", "backend_configs": {"infinity": {"url": "http://127.0.0.1:9"}}},
                 id="infinity-url"),
    pytest.param({"index_backend": "milvus", "index_backend_configs": {"milvus": {"uri": "http://127.0.0.1:9"}}},
                 id="milvus-uri"),
    pytest.param({"index_backend_configs": {"milvus": {"token": "root:Milvus"}}}, id="milvus-token"),
])
def test_endpoints_and_keys_never_come_from_a_tool_call(mcp_built: MCP, args: dict[str, Any]) -> None:
    text = mcp_built.error("retriever_init", args)
    assert "not from a tool call" in text and "sk-client-key" not in text and "root:Milvus" not in text


def test_the_server_sends_its_key_to_no_url_a_client_names(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer()
    try:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        mcp = MCP(engine_for(project))
        mcp.error("retriever_init", {"backend": "openai", "backend_configs": {"openai": {"base_url": server.url}}})
        assert server.requests == []
    finally:
        server.close()


def test_settings_that_equal_the_yaml_are_no_change(mcp_built: MCP, built_project: Path) -> None:
    cfg = load_config(built_project)
    mcp_built.ok("retriever_init", {"backend_configs": {"openai": {"base_url": cfg.backend_configs.openai.base_url}},
                                    "corpus_path": str(cfg.corpus_path)})


# ---- 4. HTTP: tokens, Host and Origin, and one client cannot re-init for all -----------------


def _status(url: str, headers: dict[str, str]) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.mark.parametrize("headers, status", [
    pytest.param({}, 401, id="no-token"),
    pytest.param({"authorization": "Bearer tok-wrong"}, 401, id="wrong-token"),
    pytest.param({"authorization": "Bearer tok-new-222", "origin": "http://evil.example"}, 403, id="evil-origin"),
    pytest.param({"authorization": "Bearer tok-new-222", "host": "evil.example"}, 403, id="rebinding-host"),
])
def test_http_refuses_without_token_or_from_a_foreign_origin(http_server: str, headers: dict, status: int) -> None:
    assert _status(http_server, headers) == status


def test_http_with_either_token_and_the_stock_client(http_server: str) -> None:
    async def run(token: str) -> tuple[Any, Any]:
        async with Client(http_server, auth=token, timeout=120) as client:
            hits = await client.call_tool("retriever_search", {"query_list": Q, "top_k": 1})
            init = await client.call_tool("retriever_init", {"collection_name": "other"}, raise_on_error=False)
            return hits, init

    for token in ("tok-old-111", "tok-new-222"):
        hits, init = asyncio.run(run(token))
        assert hits.structured_content["ret_ids"] == [["doc11"]]
        assert init.is_error and "serves every client" in init.content[0].text


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}}
SMALL_LIMIT = 65536  # under the MCP transport's own 4 MiB bound, so this server's bound is the one met


@pytest.fixture(scope="module")
def small_limit_server(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`retriever serve --transport http` with limits.max_request_bytes = SMALL_LIMIT."""
    from retriever.testing.net import wait_http

    port = free_port()
    log = (tmp_path_factory.mktemp("small") / "stderr.log").open("w+")
    env = {**os.environ, "RETRIEVER_HTTP_TOKENS": "tok-small-333"}
    proc = subprocess.Popen([str(BIN / "retriever"), "serve", "--config", str(built_project), "--transport", "http",
                             "--port", str(port), "--set", f"limits.max_request_bytes={SMALL_LIMIT}"],
                            stderr=log, env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_http(url, proc, lambda: log.seek(0) or log.read()[-3000:], timeout=120, any_status=True)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.parametrize(("body", "status"), [
    pytest.param(json.dumps(INITIALIZE).encode(), 200, id="within-the-limit"),
    pytest.param(b" " * (SMALL_LIMIT + 1), 413, id="over-the-limit"),
])
def test_http_holds_a_chunked_body_to_the_limit(small_limit_server: str, body: bytes, status: int) -> None:
    import httpx

    def pieces() -> Any:  # an iterator: httpx sends it chunked, with no Content-Length
        for at in range(0, len(body), 4096):
            yield body[at:at + 4096]

    r = httpx.post(small_limit_server, content=pieces(), timeout=60, headers={
        "authorization": "Bearer tok-small-333", "content-type": "application/json",
        "accept": "application/json, text/event-stream"})
    assert r.request.headers["transfer-encoding"] == "chunked"
    assert r.status_code == status, r.text[:300]


def test_http_refuses_to_bind_off_loopback_without_tokens(built_project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RETRIEVER_HTTP_TOKENS"}
    proc = subprocess.run([str(BIN / "retriever"), "serve", "--config", str(built_project), "--transport", "http",
                           "--host", "0.0.0.0", "--port", str(free_port())],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "set bearer tokens first" in proc.stderr


# ---- 5. no key leaks, not even in part --------------------------------------------------------


def test_a_key_across_the_cut_of_an_error_body_does_not_leak(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("RETRIEVER_API_KEY", KEY)
    server = FakeServer()
    try:
        cfg = yaml.safe_load(project.read_text())
        cfg.update(backend="openai")
        cfg["backend_configs"]["openai"].update(base_url=server.url, model_name="fake", max_retries=0)
        project.write_text(yaml.safe_dump(cfg))
        mcp = MCP(engine_for(project))
        mcp.ok("retriever_init")
        for pad in range(270, 300, 3):  # the key starts just before, at and after the 300-character cut
            server.behaviour = lambda r, pad=pad: (500, {"error": {"message": "x" * pad + r.authorization}})
            text = mcp.error("retriever_embed", {"overwrite": True})
            assert "HTTP 500" in text and not leaks(text, KEY), text
        assert not leaks(caplog.text, KEY)
    finally:
        server.close()


@pytest.mark.parametrize("provider", ["exa", "tavily", "zhipuai"])
def test_a_web_key_across_the_cut_does_not_leak(provider: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake = start(FakeProvider(provider, KEY, echo_key=True))
    try:
        cfg = Config.model_validate({"websearch_backend_configs": {provider: {
            "api_key": KEY, "base_url": fake.base_url, "max_retries": 0, "timeout": 5}}})
        seen = []
        for pad in range(260, 300, 4):
            fake.pad = pad
            fake.plan[f"q{pad}"] = [400]
            searcher, key = build_websearch(cfg, provider)
            seen += asyncio.run(run_queries(searcher, [f"q{pad}"], 3, 1, RetryPolicy(0, 0.0), key))
            asyncio.run(searcher.aclose())
        assert all(r.error for r in seen)
        assert not leaks(repr(seen) + caplog.text, KEY)
    finally:
        stop(fake)


def test_a_section_given_as_a_string_does_not_echo_it() -> None:
    with pytest.raises(ConfigError) as err:
        validate_config({"backend_configs": {"openai": "sk-ARGSECRET999"}}, "x.yaml")
    assert "sk-ARGSECRET999" not in str(err.value) and "backend_configs.openai" in str(err.value)


# ---- 6. bounded work --------------------------------------------------------------------------


def _limits(built_project: Path, tmp_path: Path, **limits: Any) -> Path:
    config = copy_built(built_project, tmp_path / "p")
    cfg = yaml.safe_load(config.read_text())
    cfg["limits"] = limits
    config.write_text(yaml.safe_dump(cfg))
    return config


def test_too_many_queries_or_results_are_refused(built_project: Path, tmp_path: Path) -> None:
    mcp = MCP(engine_for(_limits(built_project, tmp_path, max_queries=50, max_results=200, max_request_bytes=4096)))
    mcp.ok("retriever_init")
    assert "limits.max_queries" in mcp.error("bm25_search", {"query_list": [Q] * 51})
    assert "limits.max_results" in mcp.error("retriever_search", {"query_list": [Q] * 50, "top_k": 5})
    assert "limits.max_results" in mcp.error("retriever_hybrid_search", {"query_list": [Q], "top_k": 5})
    assert "max_request_bytes" in mcp.error("bm25_search", {"query_list": ["x" * 5000]})
    assert mcp.ok("bm25_search", {"query_list": [Q] * 40, "top_k": 5})["ret_ids"][0][0] == "doc11"


def test_a_cancelled_call_stops_its_queued_work(built: Retriever, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    server = MCP(built).server
    async def run() -> None:
        async with Client(server) as client:
            with pytest.raises(Exception):  # noqa: B017 - the client's timeout error, whatever its class
                await client.call_tool("retriever_search", {"query_list": [f"{Q} {i}" for i in range(6000)],
                                                            "return_text": False}, timeout=1.0)
            await asyncio.sleep(3)  # the worker reaches its next chunk and stops
            t = time.perf_counter()
            hits = await client.call_tool("bm25_search", {"query_list": Q, "top_k": 1})
            assert hits.structured_content["ret_ids"] == [["doc11"]] and time.perf_counter() - t < 30

    asyncio.run(run())
    for _ in range(600):  # the worker stops at its next chunk; on a loaded machine that may take a while
        done = re.search(r"cancelled by the caller after (\d+) of 6000 queries", caplog.text)
        if done:
            break
        time.sleep(0.1)
    assert done and int(done.group(1)) < 6000, caplog.text


# ---- 7. to 10. ----------------------------------------------------------------------------------


@pytest.mark.parametrize("args, name", [
    pytest.param({"score_threshold": float("nan")}, "score_threshold", id="nan-threshold"),
    pytest.param({"rrf_k": 1e308}, "rrf_k", id="huge-rrf-k"),
    pytest.param({"vector_weight": float("nan")}, "vector_weight", id="nan-weight"),
    pytest.param({"score_threshold": float("inf")}, "score_threshold", id="inf-threshold"),
])
def test_non_finite_numbers_are_refused(mcp_built: MCP, args: dict[str, Any], name: str) -> None:
    # Sent as the server receives them (a JSON text with NaN / Infinity): the stock client's own
    # serialiser would turn NaN into null before it left.
    async def call() -> str:
        with pytest.raises(Exception) as err:
            await mcp_built.server.call_tool("retriever_hybrid_search", {"query_list": Q, **args})
        return str(err.value)

    text = asyncio.run(call())
    assert name in text and ("finite" in text or "less than or equal" in text), text


def test_a_non_finite_threshold_is_refused_by_the_engine(built: Retriever) -> None:
    with pytest.raises(Exception, match="score_threshold must be a finite number"):
        built.bm25_search(Q, 3, score_threshold=float("nan"))


def test_a_collection_name_with_a_newline_is_refused(mcp_built: MCP, built_project: Path) -> None:
    assert "collection names use only" in mcp_built.error("retriever_init", {"collection_name": "abc\n"})
    assert not any("\n" in p.name for p in built_project.parent.rglob("*"))


def test_a_non_utf8_corpus_names_the_file_and_line(tmp_path: Path) -> None:
    corpus = tmp_path / "latin1.jsonl"
    corpus.write_bytes(b'{"id": "a", "contents": "fine"}\n{"id": "b", "contents": "caf\xe9"}\n')
    with pytest.raises(CorpusError, match=r"corpus.jsonl:2: not UTF-8 \(byte 0xe9"):
        engine_for(write_project(tmp_path / "p", corpus=corpus)).init()


KILLED_BEFORE_RENAME = """
import os, signal, sys
from pathlib import Path
from retriever import Retriever
from retriever.config import load_config

real = os.replace
def replace(src, dst):  # SIGKILL at the rename of a temporary into `target`: its temporary is left behind
    if str(src).endswith(".tmp") and Path(dst).name == sys.argv[2]:
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst)
os.replace = replace
config = Path(sys.argv[1])
engine = Retriever(load_config(config), config.parent)
engine.init()
engine.embed(overwrite=True, progress=False)
"""


@pytest.mark.parametrize("target", [
    pytest.param("embedding.npy.json", id="the-manifest"),
    pytest.param(".embedding.npy.partial.json", id="the-progress-record"),
])
def test_an_embed_killed_before_its_rename_leaves_nothing_after_the_next(built_project: Path, tmp_path: Path,
                                                                         target: str) -> None:
    config = copy_built(built_project, tmp_path / "p")
    out = config.parent / "out"
    killed = subprocess.run([str(BIN / "python"), "-c", KILLED_BEFORE_RENAME, str(config), target],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    leftovers = list(out.glob(f".{target}.*.tmp"))
    assert len(leftovers) == 1, sorted(p.name for p in out.iterdir())
    (out / ".unrelated.tmp").write_text("not ours")
    e = engine_for(config)
    e.init()
    e.embed(overwrite=True, progress=False)
    assert not leftovers[0].exists() and (out / ".unrelated.tmp").exists()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_mcp_body_over_the_sdk_s_bound_is_told_why(http_server: str, chunked: bool) -> None:
    """limits.max_request_bytes is 16 MiB, but the MCP SDK answers a bare 413 past its own 4 MiB:
    a 5 MiB call got that, unexplained. The guard holds MCP paths to the SDK's bound and says so."""
    import httpx
    from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE
    from retriever.security.http_guard import MCP_SDK_BODY_BYTES

    assert MCP_SDK_BODY_BYTES == DEFAULT_MAX_REQUEST_BODY_SIZE  # the SDK's own, still
    body = json.dumps({**INITIALIZE, "params": {**INITIALIZE["params"], "pad": "x" * (5 << 20)}}).encode()
    content: Any = (body[at:at + 65536] for at in range(0, len(body), 65536)) if chunked else body
    r = httpx.post(http_server, content=content, timeout=60, headers={
        "authorization": "Bearer tok-old-111", "content-type": "application/json",
        "accept": "application/json, text/event-stream"})
    assert r.status_code == 413 and "the MCP SDK's bound for MCP over HTTP" in r.text, r.text[:300]
