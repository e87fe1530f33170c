"""The openai backend against a local server speaking the OpenAI /embeddings wire format, driven
by the real `openai` client: retries, failures, checks of every answer, the API key."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from retriever.config import Config, load_config
from retriever.embedders import build_embedder
from retriever.errors import ConfigError, EmbeddingServerError, IndexMismatchError, NotYetSupportedError
from retriever.testing.embedding_servers import FakeServer, fake_vector
from retriever.testing.net import free_port
from retriever.testing.projects import engine_for, write_project

KEY = "sk-test-9f8e7d6c5b4a-secret"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def config(url: str, **openai: Any) -> Config:
    section = {"model_name": "fake-model", "base_url": url, "max_retries": 0, "timeout": 5, **openai}
    return Config.model_validate({"backend": "openai", "backend_configs": {"openai": section}})


def expected(texts: list[str], dim: int = 8) -> np.ndarray:
    v = np.asarray([fake_vector(t, dim) for t in texts], dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_dimension_is_probed_once_and_vectors_come_back_in_order(server: FakeServer) -> None:
    emb = build_embedder(config(server.url, batch_size=3, concurrency=4))
    assert emb.dimension == 8 and len(server.requests) == 1
    texts = [f"passage number {i}" for i in range(10)]
    np.testing.assert_allclose(emb.encode_passages(texts), expected(texts), rtol=1e-6)
    assert sorted(len(r.texts) for r in server.requests[1:]) == [1, 3, 3, 3]
    assert all(r.model == "fake-model" for r in server.requests)


def test_requests_run_concurrently_up_to_the_limit() -> None:
    server = FakeServer(delay=0.2)
    try:
        emb = build_embedder(config(server.url, batch_size=1, concurrency=3))
        emb.encode_passages([f"t{i}" for i in range(9)])
        assert server.max_in_flight == 3
    finally:
        server.close()


def test_429_then_success_is_retried(server: FakeServer) -> None:
    server.behaviour = lambda r: (429, {"error": {"message": "slow down"}}) if r.number in (1, 2) else None
    emb = build_embedder(config(server.url, max_retries=3))
    texts = ["alpha", "beta"]
    np.testing.assert_allclose(emb.encode_passages(texts), expected(texts), rtol=1e-6)
    assert len(server.requests) == 4  # probe, 429, 429, success


def test_500_forever_fails_naming_the_server_and_status(server: FakeServer) -> None:
    emb = build_embedder(config(server.url, max_retries=2))
    server.behaviour = lambda r: (500, {"error": {"message": "model crashed"}})
    with pytest.raises(EmbeddingServerError) as err:
        emb.encode_passages(["alpha"])
    assert server.url in str(err.value) and "HTTP 500" in str(err.value) and "model crashed" in str(err.value)
    assert "after 2 retries" in str(err.value)
    assert len(server.requests) == 1 + 3


def test_a_failing_batch_fails_the_whole_call(server: FakeServer) -> None:
    emb = build_embedder(config(server.url, batch_size=2, concurrency=2))
    server.behaviour = lambda r: (503, {"error": "busy"}) if "t5" in r.texts else None
    with pytest.raises(EmbeddingServerError, match="HTTP 503"):
        emb.encode_passages([f"t{i}" for i in range(8)])


def test_server_down_is_an_error_naming_the_server() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(EmbeddingServerError, match="could not be reached") as err:
        build_embedder(config(url, max_retries=1))
    assert url in str(err.value)


def test_slow_server_times_out() -> None:
    server = FakeServer(delay=1.5)
    try:
        with pytest.raises(EmbeddingServerError, match=r"did not answer within 0.3 s"):
            build_embedder(config(server.url, timeout=0.3))
    finally:
        server.close()


@pytest.mark.parametrize(
    "reply, message",
    [
        pytest.param(lambda s, r: (200, s.answer(r.texts[:-1], r.model)), "returned 2 vectors for 3 texts",
                     id="too-few"),
        pytest.param(lambda s, r: (200, s.answer(r.texts + ["extra"], r.model)), "returned 4 vectors for 3 texts",
                     id="too-many"),
        pytest.param(lambda s, r: (200, s.answer(r.texts, r.model, dim=7)), "dimension [7], expected 8",
                     id="wrong-dimension"),
    ],
)
def test_wrong_answers_are_refused(server: FakeServer, reply: Any, message: str) -> None:
    emb = build_embedder(config(server.url))
    server.behaviour = lambda r: reply(server, r)
    with pytest.raises(EmbeddingServerError, match=message.replace("[", r"\[").replace("]", r"\]")):
        emb.encode_passages(["a", "b", "c"])


@pytest.mark.parametrize("source", ["yaml", "RETRIEVER_API_KEY", "OPENAI_API_KEY"])
def test_api_key_is_sent_but_never_logged_or_shown(
    server: FakeServer, source: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    for name in ("RETRIEVER_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    if source != "yaml":
        monkeypatch.setenv(source, KEY)
    caplog.set_level(logging.DEBUG)
    cfg = config(server.url, **({"api_key": KEY} if source == "yaml" else {}))
    emb = build_embedder(cfg)
    assert server.requests[0].authorization == f"Bearer {KEY}"
    server.behaviour = lambda r: (401, {"error": {"message": f"bad key {r.authorization}"}})
    with pytest.raises(EmbeddingServerError) as err:
        emb.encode_queries(["q"], "")
    assert "HTTP 401" in str(err.value) and "after" not in str(err.value)  # 401 is not retried
    shown = [str(err.value), repr(cfg), str(cfg.model_dump()), caplog.text, *capfd.readouterr()]
    assert not [s for s in shown if KEY in s]


def test_query_instruction_is_prepended_once_and_prompt_names_warned(server: FakeServer) -> None:
    emb = build_embedder(config(server.url))
    assert any("prompt names" in w for w in emb.warnings)
    emb.encode_queries(["what is x", "query: already"], "query: ")
    assert server.requests[-1].texts == ["query: what is x", "query: already"]
    emb.encode_passages(["query: a passage"])
    assert server.requests[-1].texts == ["query: a passage"]


def test_infinity_without_url_says_how_to_start_a_server() -> None:
    with pytest.raises(NotYetSupportedError, match="set backend_configs.infinity.url"):
        build_embedder(Config.model_validate({"backend": "infinity"}))


def test_unknown_key_in_the_openai_section_is_refused(tmp_path: Path) -> None:
    path = write_project(tmp_path, backend="openai")
    cfg = yaml.safe_load(path.read_text())
    cfg["backend_configs"]["openai"] = {"model_nam": "x"}
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="backend_configs.openai.model_nam.*model_name"):
        load_config(path)


def _served(tmp: Path, url: str, model: str) -> Path:
    return write_project(tmp, backend="openai", backend_configs={
        "openai": {"model_name": model, "base_url": url, "max_retries": 0},
        "bm25": {"save_path": "out/bm25"},
    })


@pytest.mark.parametrize("model, dim, message", [
    pytest.param("fake-b", 8, "model: saved 'fake-a', now 'fake-b'", id="other-model"),
    pytest.param("fake-a", 16, "dimension: saved 8, now 16", id="other-dimension"),
])
def test_an_index_of_another_model_or_dimension_is_refused(tmp_path: Path, model: str, dim: int, message: str) -> None:
    first, second = FakeServer(dim=8), FakeServer(dim=dim)
    try:
        path = _served(tmp_path / "p", first.url, "fake-a")
        e = engine_for(path)
        assert e.init()["dimension"] == 8
        e.embed(progress=False)
        e.index()
        assert e.search("volcano", top_k=3, mode="dense")[0]
        path = _served(tmp_path / "p", second.url, model)
        with pytest.raises(IndexMismatchError, match=message):
            engine_for(path).init()
    finally:
        first.close()
        second.close()

