"""Shared fixtures: a project folder with a parameter.yaml, engines and an in-memory MCP client.

Everything is real: the packaged MiniLM, FAISS, bm25s, fastmcp's client and server.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from retriever import Retriever
from retriever.mcp.server import build_server
from retriever.testing.milvus_server import ServerError, running_milvus_server
from retriever.testing.projects import ROOT, engine_for, write_project

BIN = Path(sys.executable).parent


def copy_built(built_project: Path, dest: Path) -> Path:
    """A private copy of a built project (its corpus, indexes and parameter.yaml)."""
    shutil.copytree(built_project.parent, dest)
    return dest / "parameter.yaml"


def run_and_kill(target: Any, config: Path, delay: float) -> None:
    """Run `target(config, ready)` in a fresh process, wait until it sets `ready`, let it work
    for `delay` seconds, then SIGKILL it: a crash at an arbitrary point."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=target, args=(str(config), ready))
    proc.start()
    assert ready.wait(120), "the writer never got ready"
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()


def pytest_configure(config: pytest.Config) -> None:
    """The suite's process runs for half an hour and builds hundreds of engines: glibc's malloc is
    bounded as for `serve` (memory.bound_malloc). Tests that ran `main()` in process used to do it
    for the rest of the suite; batch commands keep glibc's defaults since issue 42."""
    from retriever.memory import bound_malloc

    bound_malloc()


SLOW_TESTS = set((Path(__file__).with_name("slow_tests.txt")).read_text().split())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests measured at 1.2 s or more in the fast tier (tests/slow_tests.txt, written by
    scripts/tiers.py from a --durations=0 run) are slow: `make test-fast` leaves them to `make test`."""
    for item in items:
        if item.nodeid.split("[")[0] in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "proj")


@pytest.fixture
def engine(project: Path) -> Retriever:
    return engine_for(project)


@pytest.fixture(scope="session")
def built_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample corpus with dense and BM25 indexes built once for the session (read-only use)."""
    path = write_project(tmp_path_factory.mktemp("built"))
    e = engine_for(path)
    e.init()
    e.embed(progress=False)
    e.index()
    e.bm25_index(progress=False)
    return path


@pytest.fixture
def built(built_project: Path) -> Retriever:
    e = engine_for(built_project)
    e.init()
    return e


class MCP:
    """A real fastmcp Client over an in-memory transport, driven synchronously."""

    def __init__(self, engine: Retriever) -> None:
        self.server = build_server(engine, profile="full")

    def call(self, tool: str, args: dict[str, Any] | None = None) -> Any:
        async def run() -> Any:
            async with Client(self.server) as client:
                return await client.call_tool(tool, args or {}, raise_on_error=False)

        return asyncio.run(run())

    def ok(self, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self.call(tool, args)
        assert not result.is_error, result.content[0].text
        text = json.loads(result.content[0].text)  # every reply's JSON; a small one is structured content too
        assert result.structured_content in (None, text)
        return text  # type: ignore[no-any-return]

    def error(self, tool: str, args: dict[str, Any] | None = None) -> str:
        result = self.call(tool, args)
        assert result.is_error, f"{tool} should have failed: {result.structured_content}"
        return result.content[0].text


@pytest.fixture
def mcp(engine: Retriever) -> MCP:
    return MCP(engine)


@pytest.fixture
def mcp_built(built: Retriever) -> MCP:
    return MCP(built)


def run_cli(*args: str, cwd: Path = ROOT, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "retriever"), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def cli_json(*args: str, cwd: Path = ROOT) -> Any:
    proc = run_cli(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def http_server(built_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`retriever serve --transport http` on the built project, with two bearer tokens (rotation)."""
    from retriever.testing.net import free_port, wait_http

    port = free_port()
    log = (tmp_path_factory.mktemp("http") / "stderr.log").open("w+")
    env = {**os.environ, "RETRIEVER_HTTP_TOKENS": "tok-old-111,tok-new-222"}
    proc = subprocess.Popen([str(BIN / "retriever"), "serve", "--config", str(built_project), "--tools", "full", "--transport",
                             "http", "--port", str(port), "--init"], stderr=log, env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_http(url, proc, lambda: log.seek(0) or log.read()[-3000:], timeout=120, any_status=True)  # 401: it answers
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
    log.seek(0)
    assert "tok-old-111" not in log.read()


@pytest.fixture(scope="session")
def milvus_server_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """http://127.0.0.1:19530 of a fresh milvus-server with its data in a temporary folder
    (retriever.testing.milvus_server): the `milvus_server` tests' server, one per session."""
    try:
        server = running_milvus_server(tmp_path_factory.mktemp("milvus-server"))
        uri = server.__enter__()
    except ServerError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield uri
    finally:
        server.__exit__(None, None, None)


COLLECT_ABOVE = 1536 << 20  # bytes of RSS past which a finished test's garbage is collected at once


@pytest.fixture(autouse=True)
def _bounded_memory(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test's engines hold a model each (~150 MB); a FastMCP server is freed only by the cycle
    collector, which runs rarely, so the servers' engines pile up (the suite reached 13 GB). Past
    COLLECT_ABOVE a finished test's garbage is collected and the heap trimmed. RETRIEVER_TEST_RSS=<file>
    also logs each test's id and this process's RSS after it (MiB)."""
    import gc

    import psutil

    yield
    process = psutil.Process()
    if process.memory_info().rss > COLLECT_ABOVE:
        gc.collect()
        from retriever.memory import trim_heap

        trim_heap()
    out = os.environ.get("RETRIEVER_TEST_RSS")
    if out:
        with open(out, "a") as f:
            f.write(f"{process.memory_info().rss >> 20}\t{request.node.nodeid}\n")


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A test that runs the command line in process (`main([...])`) installs a root handler on the
    stderr pytest captured for it; a later test's log line would meet that closed stream
    ("--- Logging error --- I/O operation on closed file"). The root logger goes back as it was."""
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True)
def _query_gates_emptied() -> Iterator[None]:
    """Hybrid's query gates (search/signals.py) remember a collection's recent queries for the
    whole process; the session's shared collections (built_project) would carry one test's
    queries into the next. Each test starts with none."""
    yield
    from retriever.session import forget_learned

    forget_learned()
