"""Image corpora (`is_multimodal`) through the MCP client: init, embed, index, text search over
images, persistence, filters, add and delete, collections, Milvus Lite, PDF pages, and errors that
name the corpus line. The model is a tiny CLIP built at test time (retriever.testing.images)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import numpy as np
import pytest
from conftest import MCP
from retriever.testing.images import draw, image_project, reference_vectors, tiny_clip
from retriever.testing.projects import engine_for

QUERIES = ["a red square", "something green on noise"]


@pytest.fixture(scope="session")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_clip(tmp_path_factory.mktemp("clip") / "tiny-clip")


@pytest.fixture
def project(tmp_path: Path, clip: Path) -> Path:
    return image_project(tmp_path / "p", clip)


def built_mcp(project: Path, **init: object) -> MCP:
    mcp = MCP(engine_for(project))
    mcp.ok("retriever_init", dict(init))
    mcp.ok("retriever_embed", {"is_multimodal": True})
    mcp.ok("retriever_index")
    return mcp


def corpus_paths(project: Path) -> dict[str, str]:
    lines = (project.parent / "images.jsonl").read_text().splitlines()
    return {r["id"]: str((project.parent / r["image_path"]).resolve()) for r in map(json.loads, lines)}


def test_text_search_over_images_returns_paths_ids_and_the_models_scores(project: Path, clip: Path) -> None:
    mcp = MCP(engine_for(project))
    status = mcp.ok("retriever_init", {"is_multimodal": True})
    assert (status["dimension"], status["runtime"], status["is_multimodal"]) == (16, "torch fp32", True)
    assert "image-text" in status["runtime_reason"]
    embedded = mcp.ok("retriever_embed", {"is_multimodal": True})
    assert (embedded["count"], embedded["dimension"]) == (12, 16)
    mcp.ok("retriever_index")
    out = mcp.ok("retriever_search", {"query_list": QUERIES, "top_k": 12})
    paths = corpus_paths(project)
    ids = list(paths)
    images, queries = reference_vectors(clip, list(paths.values()), QUERIES)
    for q, (got_ids, got_psg, got_scores) in enumerate(zip(out["ret_ids"], out["ret_psg"], out["ret_scores"])):
        expected = images @ queries[q]
        assert got_ids == [ids[i] for i in np.argsort(-expected, kind="stable")]
        assert got_psg == [paths[i] for i in got_ids]  # ret_psg: the image's absolute path, as UltraRAG's
        assert np.allclose(got_scores, np.sort(expected)[::-1], atol=1e-5)


def test_a_saved_image_index_loads_in_a_new_session_and_answers_the_same(project: Path) -> None:
    first = built_mcp(project, is_multimodal=True).ok("retriever_search", {"query_list": QUERIES})
    again = MCP(engine_for(project))
    status = again.ok("retriever_init")  # is_multimodal from the YAML
    assert status["dense_index"] == 12
    assert again.ok("retriever_search", {"query_list": QUERIES}) == first


def test_filters_and_metadata_apply_to_images(project: Path) -> None:
    mcp = built_mcp(project)
    out = mcp.ok("retriever_search", {"query_list": QUERIES[0], "top_k": 12, "return_metadata": True,
                                      "filters": {"field": "meta.colour", "operator": "in", "value": ["red", "blue"]}})
    assert sorted(out["ret_ids"][0]) == ["img0", "img10", "img2", "img8"]
    meta = out["ret_meta"][0][0]
    assert meta["colour"] in ("red", "blue") and Path(meta["image_path"]).is_absolute()


def test_images_are_added_and_deleted(project: Path) -> None:
    mcp = built_mcp(project)
    draw(project.parent / "new" / "a.png", "orange", seed=99)
    added = mcp.ok("retriever_add", {"documents": [{"id": "new-a", "image_path": "new/a.png", "colour": "orange"}]})
    assert added["added"] == 1
    out = mcp.ok("retriever_search", {"query_list": QUERIES[0], "top_k": 13})
    assert "new-a" in out["ret_ids"][0]
    assert str((project.parent / "new" / "a.png").resolve()) in out["ret_psg"][0]
    reopened = MCP(engine_for(project))  # the change log keeps the image across sessions
    reopened.ok("retriever_init")
    assert reopened.ok("retriever_search", {"query_list": QUERIES[0], "top_k": 13}) == out
    reopened.ok("retriever_delete", {"ids": ["new-a", "img0"]})
    left = reopened.ok("retriever_search", {"query_list": QUERIES[0], "top_k": 13})["ret_ids"][0]
    assert len(left) == 11 and "new-a" not in left and "img0" not in left


def test_a_named_collection_of_images_beside_a_text_collection(project: Path) -> None:
    mcp = built_mcp(project, collection_name="pictures")
    listed = {c["name"]: c for c in mcp.ok("retriever_list_collections")["collections"]}
    assert listed["pictures"]["documents"] == 12
    assert mcp.ok("retriever_search", {"query_list": QUERIES[0], "top_k": 3})["ret_psg"][0][0].endswith(".png")


@pytest.mark.parametrize("where", [pytest.param("lite", id="lite"),
                                   pytest.param("server", id="server", marks=pytest.mark.milvus_server)])
def test_milvus_returns_the_same_images_as_faiss(project: Path, where: str, request: pytest.FixtureRequest) -> None:
    faiss = built_mcp(project).ok("retriever_search", {"query_list": QUERIES, "top_k": 5})
    uri = str(project.parent / "out" / "m.db") if where == "lite" else request.getfixturevalue("milvus_server_uri")
    mcp = MCP(engine_for(project, {"index_backend": "milvus", "index_backend_configs": {"milvus": {"uri": uri}}}))
    mcp.ok("retriever_init", {"collection_name": f"images_{uuid.uuid4().hex[:8]}"})
    mcp.ok("retriever_embed")
    mcp.ok("retriever_index")
    milvus = mcp.ok("retriever_search", {"query_list": QUERIES, "top_k": 5})
    assert milvus["ret_ids"] == faiss["ret_ids"] and milvus["ret_psg"] == faiss["ret_psg"]
    assert np.allclose(milvus["ret_scores"], faiss["ret_scores"], atol=1e-4)


def test_an_infinity_server_embeds_the_images(project: Path, clip: Path, tmp_path: Path) -> None:
    """The real `infinity_emb` serving the tiny CLIP: images go as data URIs with modality image and
    come back as the in-process model's vectors. (Queries are compared on one that both sides'
    transformers tokenise alike: the toy byte-level vocabulary splits others differently.)"""
    from retriever.testing.embedding_servers import InfinityServer, infinity_venv

    if os.environ.get("RETRIEVER_SKIP_INFINITY") == "1" or not (infinity_venv() / "bin" / "infinity_emb").exists():
        pytest.skip("no Infinity venv (make infinity-venv), or RETRIEVER_SKIP_INFINITY=1")
    in_process = MCP(engine_for(project))
    in_process.ok("retriever_init")
    local_file = in_process.ok("retriever_embed")["embedding_path"]
    in_process.ok("retriever_index")
    local = in_process.ok("retriever_search", {"query_list": QUERIES[0], "top_k": 12})
    server = InfinityServer(tmp_path / "infinity.log", "k-images", model=clip, name="tiny-clip")
    try:
        mcp = MCP(engine_for(project, {"backend": "infinity", "backend_configs": {
            "infinity": {"url": server.url, "model_name": "tiny-clip", "api_key": "k-images"}}}))
        status = mcp.ok("retriever_init", {"collection_name": "inf"})
        assert (status["runtime"], status["dimension"]) == ("infinity server", 16)
        remote_file = mcp.ok("retriever_embed")["embedding_path"]
        mcp.ok("retriever_index")
        remote = mcp.ok("retriever_search", {"query_list": QUERIES[0], "top_k": 12})
    finally:
        server.stop()
    assert np.allclose(np.load(remote_file), np.load(local_file), atol=1e-5)
    assert remote["ret_ids"] == local["ret_ids"] and remote["ret_psg"] == local["ret_psg"]
    assert np.allclose(remote["ret_scores"], local["ret_scores"], atol=1e-4)


def test_a_server_whose_model_embeds_no_images_is_refused_at_init(project: Path, tmp_path: Path) -> None:
    from retriever.testing.embedding_servers import InfinityServer, infinity_venv

    if os.environ.get("RETRIEVER_SKIP_INFINITY") == "1" or not (infinity_venv() / "bin" / "infinity_emb").exists():
        pytest.skip("no Infinity venv (make infinity-venv), or RETRIEVER_SKIP_INFINITY=1")
    server = InfinityServer(tmp_path / "infinity.log", "k-text")  # the text-only MiniLM
    try:
        message = MCP(engine_for(project, {"backend": "infinity", "backend_configs": {"infinity": {
            "url": server.url, "model_name": InfinityServer.MODEL, "api_key": "k-text", "max_retries": 0}}})
                      ).error("retriever_init")
    finally:
        server.stop()
    assert "is_multimodal: embedding server" in message and "serve an image-text model" in message


def make_pdf(path: Path, pages: int) -> Path:
    from PIL import Image

    colours = ["red", "green", "blue", "yellow"]
    sheets = [Image.new("RGB", (200, 280), c) for c in colours[:pages]]
    path.parent.mkdir(parents=True, exist_ok=True)
    sheets[0].save(path, save_all=True, append_images=sheets[1:], resolution=72)
    return path


def test_pdf_pages_become_an_image_corpus_that_is_searched(project: Path) -> None:
    folder = project.parent
    make_pdf(folder / "pdfs" / "report.pdf", 3)
    make_pdf(folder / "pdfs" / "more" / "report.pdf", 2)  # the same name in another folder
    (folder / "pdfs" / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    mcp = MCP(engine_for(project))
    built = mcp.ok("retriever_build_image_corpus", {"parse_file_path": "pdfs", "image_corpus_save_path": "pages/c.jsonl"})
    assert (built["images"], built["pdfs"]) == (5, 2)
    assert list(built["skipped"]) == [str(folder / "pdfs" / "broken.pdf")]
    rows = [json.loads(line) for line in (folder / "pages" / "c.jsonl").read_text().splitlines()]
    assert [r["image_path"] for r in rows] == [f"image/report/page_{i}.jpg" for i in range(2)] + [
        f"image/report-2/page_{i}.jpg" for i in range(3)]
    from PIL import Image

    with Image.open(folder / "pages" / rows[2]["image_path"]) as im:
        assert im.size == (400, 560)  # 144 dpi from a 72 dpi page
    mcp.ok("retriever_init", {"corpus_path": "pages/c.jsonl", "collection_name": "pdf"})
    mcp.ok("retriever_embed")
    mcp.ok("retriever_index")
    out = mcp.ok("retriever_search", {"query_list": "a blue page", "top_k": 5, "return_metadata": True})
    assert sorted(out["ret_psg"][0]) == sorted(str((folder / "pages" / r["image_path"]).resolve()) for r in rows)
    assert {(m["pdf"], m["page"]) for m in out["ret_meta"][0]} == {("report.pdf", p) for p in range(3)} | {
        ("report.pdf", p) for p in range(2)}
    again = mcp.error("retriever_build_image_corpus", {"parse_file_path": "pdfs",
                                                       "image_corpus_save_path": "pages/c.jsonl"})
    assert "exists; pass overwrite=true" in again


def write_corpus(project: Path, lines: list[str]) -> None:
    (project.parent / "images.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("bad_line, message", [
    pytest.param('{"id": "x", "image_path": "img/nope.png"}', "images.jsonl:13: image not found: ", id="missing"),
    pytest.param('{"id": "x", "image_path": "notes.txt"}', "images.jsonl:13: cannot read the image ", id="unreadable"),
    pytest.param('{"id": "x", "contents": "a text line"}', "images.jsonl:13: no 'image_path'; with is_multimodal",
                 id="text-line-in-images"),
    pytest.param('{"id": "x", "image_path": "../outside.png"}', "images.jsonl:13: the image ", id="outside"),
])
def test_a_bad_image_line_is_named_with_its_corpus_line(project: Path, bad_line: str, message: str) -> None:
    folder = project.parent
    (folder / "notes.txt").write_text("not an image")
    draw(folder.parent / "outside.png", "red", seed=1)
    lines = (folder / "images.jsonl").read_text().splitlines()
    write_corpus(project, [*lines, bad_line])
    assert message in MCP(engine_for(project)).error("retriever_init")


def test_an_image_line_in_a_text_corpus_says_to_set_is_multimodal(project: Path) -> None:
    message = MCP(engine_for(project)).error("retriever_init", {"is_multimodal": False})
    assert "images.jsonl:1: no text field" in message and "set is_multimodal: true" in message


def test_an_added_image_that_cannot_be_read_is_named(project: Path) -> None:
    mcp = built_mcp(project)
    (project.parent / "bad.png").write_bytes(b"not a png")
    message = mcp.error("retriever_add", {"documents": [{"id": "b", "image_path": "bad.png"}]})
    assert "documents[0]: cannot read the image" in message and "bad.png" in message
    assert "documents[0]: image not found" in mcp.error("retriever_add", {"documents": [{"id": "c", "image_path": "no.png"}]})
    assert "outside the folders" in mcp.error("retriever_add", {"documents": [{"id": "d", "image_path": "/etc/hostname"}]})


@pytest.mark.parametrize("init, message", [
    pytest.param({"model_name_or_path": "all-MiniLM-L6-v2"}, "embeds text, not images and text in one space", id="text-model"),
    pytest.param({"backend": "openai"}, "backend 'openai' embeds text only", id="openai"),
    pytest.param({"backend": "bm25"}, "images have no text for BM25", id="bm25-backend"),
    pytest.param({"backend_configs": {"sentence_transformers": {"runtime": "onnx"}}}, "exports the text tower only",
                 id="onnx-runtime"),
])
def test_a_setting_that_cannot_embed_images_is_refused_at_init(project: Path, init: dict, message: str) -> None:
    assert message in MCP(engine_for(project)).error("retriever_init", init)


def test_bm25_and_hybrid_say_images_have_no_text(project: Path) -> None:
    mcp = built_mcp(project)
    for tool, args in [("bm25_index", {}), ("bm25_search", {"query_list": "x"}),
                       ("retriever_hybrid_search", {"query_list": "x"}),
                       ("retriever_multi_query_search", {"question_list": [["x", "y"]]})]:
        assert "holds images (is_multimodal), which have no text for BM25" in mcp.error(tool, args), tool


def test_embed_refuses_is_multimodal_on_a_text_session(tmp_path: Path) -> None:
    from retriever.testing.projects import write_project

    mcp = MCP(engine_for(write_project(tmp_path / "t")))
    mcp.ok("retriever_init")
    assert "opened a corpus of text; call retriever_init with is_multimodal: true" in mcp.error(
        "retriever_embed", {"is_multimodal": True})
