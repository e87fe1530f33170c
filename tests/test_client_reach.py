"""Issue 31, the high findings: what a client's call may reach in UltraRAG mode (where
security.client_endpoints is true). A key from the YAML or the environment travels only with the
URL from the same place; a model from a call is a local folder inside the roots or one the
operator lists, never with remote code; a write from a call never replaces a file this program
did not write; every path a call names is guarded, cache_dir included."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import MCP
from retriever import Retriever
from retriever.api.ultrarag import ultrarag_overrides
from retriever.config import load_config, validate_config
from retriever.errors import ForbiddenError
from retriever.mcp.server import build_server
from retriever.security.guard import FROM_CLIENT, check_client_config
from retriever.testing.embedding_servers import FakeServer
from retriever.testing.fake_web import FakeProvider, start, stop
from retriever.testing.json_server import JsonServer

KEY = "sk-OPERATOR-5e6f7a8b9c0d"  # the operator's, in the YAML or the environment
CLIENT_KEY = "sk-client-own-1a2b3c"
WEB_ENV = {"exa": "EXA_API_KEY", "tavily": "TAVILY_API_KEY", "zhipuai": "ZHIPUAI_API_KEY"}


class UltraRAG(MCP):
    """The in-memory MCP client of `serve --ultrarag` over `engine`."""

    def __init__(self, engine: Retriever) -> None:
        self.server = build_server(engine, ultrarag=True)


def ultrarag_engine(project: Path, **yaml_changes: Any) -> Retriever:
    """The engine `serve --ultrarag` makes of `project` (its folder the working directory)."""
    if yaml_changes:
        cfg = yaml.safe_load(project.read_text())
        for key, value in yaml_changes.items():
            cfg[key] = value
        project.write_text(yaml.safe_dump(cfg))
    cfg = load_config(project, ultrarag_overrides(project.parent, "faiss", []))
    assert cfg.security.client_endpoints
    engine = Retriever(cfg, project.parent)
    engine.ultrarag = True
    return engine


# ---- 1. a key travels only with the URL it was configured for ---------------------------------


@pytest.fixture
def embedding_server() -> Iterator[FakeServer]:
    server = FakeServer()
    yield server
    server.close()


@pytest.mark.parametrize("where", ["environment", "yaml"])
def test_an_embedding_url_from_a_call_gets_no_operator_key(project: Path, embedding_server: FakeServer,
                                                           monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    if where == "environment":
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("RETRIEVER_API_KEY", KEY)
        engine = ultrarag_engine(project)
    else:
        backend_configs = yaml.safe_load(project.read_text())["backend_configs"]
        backend_configs["openai"]["api_key"] = KEY
        engine = ultrarag_engine(project, backend_configs=backend_configs)
    mcp = UltraRAG(engine)
    mcp.ok("retriever_init", {"backend": "openai", "backend_configs": {"openai": {
        "base_url": embedding_server.url, "model_name": "fake"}}})
    assert embedding_server.requests, "the probe reached the client's server"
    assert all(KEY not in r.authorization for r in embedding_server.requests)


def test_an_embedding_url_from_a_call_gets_the_key_from_that_call(project: Path, embedding_server: FakeServer,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    mcp = UltraRAG(ultrarag_engine(project))
    mcp.ok("retriever_init", {"backend": "openai", "backend_configs": {"openai": {
        "base_url": embedding_server.url, "model_name": "fake", "api_key": CLIENT_KEY}}})
    assert {r.authorization for r in embedding_server.requests} == {f"Bearer {CLIENT_KEY}"}


def test_the_operators_embedding_url_still_gets_the_operators_key(project: Path, embedding_server: FakeServer,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    backend_configs = yaml.safe_load(project.read_text())["backend_configs"]
    backend_configs["openai"].update(base_url=embedding_server.url, model_name="fake")
    mcp = UltraRAG(ultrarag_engine(project, backend_configs=backend_configs))
    mcp.ok("retriever_init", {"backend": "openai"})  # the YAML's URL: the YAML's (environment's) key
    assert {r.authorization for r in embedding_server.requests} == {f"Bearer {KEY}"}


@pytest.mark.parametrize("provider", ["exa", "tavily", "zhipuai"])
@pytest.mark.parametrize("where", ["environment", "yaml"])
def test_a_web_url_from_a_call_gets_no_operator_key(project: Path, monkeypatch: pytest.MonkeyPatch, provider: str,
                                                    where: str) -> None:
    fake = start(FakeProvider(provider, KEY))  # it would answer the operator's key
    try:
        if where == "environment":
            monkeypatch.setenv(WEB_ENV[provider], KEY)
            engine = ultrarag_engine(project)
        else:
            engine = ultrarag_engine(project, websearch_backend_configs={provider: {"api_key": KEY}})
        text = UltraRAG(engine).error("retriever_websearch", {
            "query_list": ["q"], "websearch_backend": provider,
            "websearch_backend_configs": {provider: {"base_url": fake.base_url, "max_retries": 0}}})
        assert "api_key from the same call" in text and KEY not in text
        assert all(KEY not in json.dumps(r.headers) for r in fake.requests)
        assert fake.requests == []
    finally:
        stop(fake)


@pytest.mark.parametrize("provider", ["exa", "tavily", "zhipuai"])
def test_a_web_url_from_a_call_gets_the_key_from_that_call(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                           provider: str) -> None:
    monkeypatch.setenv(WEB_ENV[provider], KEY)
    fake = start(FakeProvider(provider, CLIENT_KEY))
    try:
        got = UltraRAG(ultrarag_engine(project)).ok("retriever_websearch", {
            "query_list": ["q"], "websearch_backend": provider, "top_k": 1,
            "websearch_backend_configs": {provider: {"base_url": fake.base_url, "api_key": CLIENT_KEY}}})
        assert got["errors"] == [None] and len(fake.requests) == 1
        assert KEY not in json.dumps(fake.requests[0].headers)
    finally:
        stop(fake)


class Recorder(JsonServer):
    """A deployed retriever's stand-in on 127.0.0.1: records each request's Authorization header."""

    def __init__(self) -> None:
        self.auth: list[str | None] = []
        super().__init__(lambda body, headers: self.auth.append(headers.get("Authorization"))
                         or {"ret_psg": [["p"] for _ in body["query_list"]]})


def test_a_deploy_url_from_a_call_gets_no_operator_token(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRIEVER_REMOTE_TOKEN", KEY)
    operator, client = Recorder(), Recorder()
    try:
        mcp = UltraRAG(ultrarag_engine(project, retriever_url=operator.url))
        assert mcp.ok("retriever_deploy_search", {"query_list": ["a"], "retriever_url": client.url})["ret_psg"]
        assert client.auth == [None]
        mcp.ok("retriever_deploy_search", {"query_list": ["a"]})  # the YAML's URL: the operator's token
        assert operator.auth == [f"Bearer {KEY}"]
    finally:
        operator.close()
        client.close()



# ---- 2. a model from a call: a local folder inside the roots, or a name the operator lists -----


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every attempt to resolve a host or open a connection, recorded and refused."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[:2])
        raise OSError("no network in this test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def test_a_hub_model_from_a_call_is_refused_before_any_download(project: Path, no_network: list[Any]) -> None:
    mcp = UltraRAG(ultrarag_engine(project))
    text = mcp.error("retriever_init", {"model_name_or_path": "someone/some-embedder",
                                        "backend_configs": {"sentence_transformers": {"trust_remote_code": True}}})
    assert "security.allowed_models" in text and "trust_remote_code" in text
    assert no_network == []


def test_a_hub_model_from_a_call_is_refused_without_remote_code_too(project: Path, no_network: list[Any]) -> None:
    text = UltraRAG(ultrarag_engine(project)).error("retriever_init", {"model_name_or_path": "someone/some-embedder"})
    assert "security.allowed_models" in text and "someone/some-embedder" in text
    assert no_network == []


REMOTE_CODE_ON = {"backend_configs": {"sentence_transformers": {"trust_remote_code": True}}}


@pytest.mark.parametrize("model", [
    pytest.param({}, id="the-yaml-s-model"),
    pytest.param({"model_name_or_path": "minilm"}, id="the-packaged-model-named"),
])
def test_remote_code_from_a_call_is_ignored_with_a_warning(project: Path, no_network: list[Any],
                                                           model: dict[str, Any]) -> None:
    """Issue 44: UltraRAG passes its parameter file's trust_remote_code: true. For a model the
    operator allows, the call's value is not honoured (the YAML's false stays) and the reply says so."""
    engine = ultrarag_engine(project)
    status = UltraRAG(engine).ok("retriever_init", {**REMOTE_CODE_ON, **model})
    assert engine.config.backend_configs.sentence_transformers.trust_remote_code is False
    (warning,) = [w for w in status["warnings"] if "trust_remote_code" in w]
    assert "ignored" in warning and "parameter.yaml" in warning
    assert no_network == []


def test_remote_code_from_a_call_is_ignored_for_a_listed_model() -> None:
    base = validate_config({"security": {"client_endpoints": True, "allowed_models": ["org/listed-model"]}}, "x")
    cfg = base.with_overrides({"model_name_or_path": "org/listed-model", **REMOTE_CODE_ON})
    token = FROM_CLIENT.set(True)
    try:
        warnings = check_client_config(base, cfg, None, http=False)
    finally:
        FROM_CLIENT.reset(token)
    assert cfg.backend_configs.sentence_transformers.trust_remote_code is False
    assert any("trust_remote_code" in w and "ignored" in w for w in warnings)


def test_remote_code_is_never_sent_for_a_folder_a_call_names(project: Path, no_network: list[Any]) -> None:
    """A model folder from a call (inside the roots, so loadable) with the call's remote code: refused."""
    folder = project.parent / "my-model"
    folder.mkdir()
    text = UltraRAG(ultrarag_engine(project)).error(
        "retriever_init", {"model_name_or_path": str(folder), **REMOTE_CODE_ON})
    assert "trust_remote_code" in text and "not from a tool call" in text


@pytest.mark.parametrize("model", ["minilm", "", "sentence-transformers/all-MiniLM-L6-v2"])
def test_the_packaged_model_may_be_named_by_a_call(project: Path, no_network: list[Any], model: str) -> None:
    status = UltraRAG(ultrarag_engine(project)).ok("retriever_init", {"model_name_or_path": model})
    assert status["dimension"] == 384 and no_network == []


def test_a_name_the_operator_lists_may_come_from_a_call() -> None:
    base = validate_config({"security": {"client_endpoints": True, "allowed_models": ["org/listed-model"]}}, "x")
    token = FROM_CLIENT.set(True)
    try:
        check_client_config(base, base.with_overrides({"model_name_or_path": "org/listed-model"}), None, http=False)
        with pytest.raises(ForbiddenError, match="security.allowed_models"):
            check_client_config(base, base.with_overrides({"model_name_or_path": "org/other-model"}), None,
                                http=False)
    finally:
        FROM_CLIENT.reset(token)


def test_a_model_folder_outside_the_roots_is_refused(project: Path, tmp_path: Path, no_network: list[Any]) -> None:
    folder = tmp_path / "elsewhere" / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    text = UltraRAG(ultrarag_engine(project)).error("retriever_init", {"model_name_or_path": str(folder)})
    assert "outside the folders this server may use" in text


# ---- 3. a write from a call never replaces a file this program did not write -------------------


@pytest.mark.parametrize("overwrite", [True, False])
def test_embed_from_a_call_leaves_an_operators_npy_alone(project: Path, overwrite: bool) -> None:
    theirs = project.parent / "data" / "operator_vectors.npy"
    theirs.parent.mkdir()
    np.save(theirs, np.arange(12, dtype=np.float32).reshape(3, 4))
    before = theirs.read_bytes()
    mcp = UltraRAG(ultrarag_engine(project))
    mcp.ok("retriever_init")
    text = mcp.error("retriever_embed", {"embedding_path": "data/operator_vectors.npy", "overwrite": overwrite})
    assert "this server did not write" in text if overwrite else "exists" in text
    assert theirs.read_bytes() == before
    assert not (theirs.parent / "operator_vectors.npy.json").exists()


def test_embed_from_a_call_may_replace_its_own_npy(project: Path) -> None:
    mcp = UltraRAG(ultrarag_engine(project))
    mcp.ok("retriever_init")
    mcp.ok("retriever_embed", {"embedding_path": "data/vectors.npy"})
    mcp.ok("retriever_embed", {"embedding_path": "data/vectors.npy", "overwrite": True})


def _pdf(path: Path, pages: int = 2) -> Path:
    from PIL import Image

    sheets = [Image.new("RGB", (100, 140), c) for c in ("red", "green", "blue")[:pages]]
    path.parent.mkdir(parents=True, exist_ok=True)
    sheets[0].save(path, save_all=True, append_images=sheets[1:], resolution=72)
    return path


@pytest.mark.parametrize("overwrite", [True, False])
def test_an_image_corpus_from_a_call_does_not_replace_the_yamls_corpus(project: Path, overwrite: bool) -> None:
    _pdf(project.parent / "pdfs" / "report.pdf")
    corpus = load_config(project).corpus_path
    assert corpus is not None and corpus.is_file()
    before = corpus.read_bytes()
    text = UltraRAG(ultrarag_engine(project)).error("retriever_build_image_corpus", {
        "parse_file_path": "pdfs", "image_corpus_save_path": str(corpus), "overwrite": overwrite})
    assert "this server did not write" in text if overwrite else "exists" in text
    assert corpus.read_bytes() == before
    assert not (project.parent / "image").exists()  # no page rendered either


def test_an_image_corpus_from_a_call_does_not_replace_an_operators_page(project: Path) -> None:
    _pdf(project.parent / "pdfs" / "report.pdf")
    page = project.parent / "pages" / "image" / "report" / "page_0.jpg"
    page.parent.mkdir(parents=True)
    page.write_bytes(b"the operator's picture")
    text = UltraRAG(ultrarag_engine(project)).error("retriever_build_image_corpus", {
        "parse_file_path": "pdfs", "image_corpus_save_path": "pages/c.jsonl", "overwrite": True})
    assert "this server did not write" in text
    assert page.read_bytes() == b"the operator's picture" and not (page.parent / "page_1.jpg").exists()


def test_an_image_corpus_from_a_call_may_be_rebuilt(project: Path) -> None:
    _pdf(project.parent / "pdfs" / "report.pdf")
    mcp = UltraRAG(ultrarag_engine(project))
    args = {"parse_file_path": "pdfs", "image_corpus_save_path": "pages/c.jsonl", "overwrite": True}
    assert mcp.ok("retriever_build_image_corpus", args)["images"] == 2
    _pdf(project.parent / "pdfs" / "report.pdf", 3)
    assert mcp.ok("retriever_build_image_corpus", args)["images"] == 3


# ---- 4. every path a call names is guarded: the embedding cache too -----------------------------


def test_a_cache_dir_from_a_call_outside_the_roots_is_refused(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "cache"
    text = UltraRAG(ultrarag_engine(project)).error(
        "retriever_init", {"backend_configs": {"sentence_transformers": {"cache_dir": str(outside)}}})
    assert "backend_configs.sentence_transformers.cache_dir" in text and "outside the folders" in text
    assert not outside.parent.exists()  # no export, no lock file


def test_a_milvus_server_uri_from_a_call_gets_no_operator_token(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """MILVUS_TOKEN is the operator's: a server URI from a call (UltraRAG's mode lets calls set URLs)
    without a token of its own is refused before anything connects; with its own token, or a Lite
    file, the rule does not apply."""
    from retriever.testing.projects import write_project

    monkeypatch.setenv("MILVUS_TOKEN", "root:operator-secret")
    base = load_config(write_project(tmp_path / "p"), {"security": {"client_endpoints": True}})
    call = {"index_backend": "milvus", "index_backend_configs": {"milvus": {"uri": "http://127.0.0.1:9/"}}}
    token = FROM_CLIENT.set(True)
    try:
        with pytest.raises(ForbiddenError, match="never the operator's MILVUS_TOKEN"):
            check_client_config(base, base.with_overrides(call, tmp_path / "p"), tmp_path / "p", http=False)
        own = {**call, "index_backend_configs": {"milvus": {"uri": "http://127.0.0.1:9/", "token": "u:p"}}}
        check_client_config(base, base.with_overrides(own, tmp_path / "p"), tmp_path / "p", http=False)
    finally:
        FROM_CLIENT.reset(token)
