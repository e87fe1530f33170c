"""BM25 results are the documents that share a term with the query, whatever the scoring method."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from retriever.errors import IndexMismatchError
from retriever.testing.projects import engine_for, write_project


def bm25_built(tmp_path: Path, method: str, corpus: Path | None = None) -> Any:
    """An engine over `corpus` (default: the sample) with BM25 of `method` built."""
    config = write_project(tmp_path / "p", *([corpus] if corpus else []), backend="bm25")
    cfg = yaml.safe_load(config.read_text())
    cfg["backend_configs"]["bm25"]["method"] = method
    config.write_text(yaml.safe_dump(cfg))
    e = engine_for(config)
    e.init()
    e.bm25_index(progress=False)
    return e


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_bm25_returns_only_documents_that_share_a_term(tmp_path: Path, method: str) -> None:
    """bm25l and bm25+ score every document above 0: a non-matching one must still not come back."""
    e = bm25_built(tmp_path, method)
    hits = e.bm25_search(["photosynthesis", "zzzunknownword"], 10)
    assert hits[1] == [] and hits[0] and all("hotosynthesis" in h.text for h in hits[0])
    filtered = e.bm25_search("photosynthesis", 10, filters={"field": "id", "operator": "==", "value": "doc05"})
    assert filtered == [[]] or all(h.id == "doc05" and "hotosynthesis" in h.text for h in filtered[0])


def _zh_project(tmp_path: Path, tokenizer: str) -> Path:
    corpus = tmp_path / "zh.jsonl"
    docs = [("z1", "我喜欢吃苹果和香蕉"), ("z2", "今天天气很好，我们去公园散步"), ("z3", "机器学习是人工智能的一个分支")]
    corpus.write_text("\n".join(f'{{"id": "{i}", "contents": "{t}"}}' for i, t in docs) + "\n", encoding="utf-8")
    config = write_project(tmp_path / "p", corpus, backend="bm25")
    cfg = yaml.safe_load(config.read_text())
    cfg["backend_configs"]["bm25"].update(lang="zh", tokenizer=tokenizer)
    config.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return config


@pytest.mark.parametrize(("tokenizer", "query", "found"), [
    pytest.param("character", "果", "z1", id="character-one-char"),  # no jieba word is one character here
    pytest.param("jieba", "人工智能", "z3", id="jieba-word"),
    pytest.param("auto", "公园", "z2", id="auto-is-jieba-for-zh"),
])
def test_ultrarag_tokenizers(tmp_path: Path, tokenizer: str, query: str, found: str) -> None:
    e = engine_for(_zh_project(tmp_path, tokenizer))
    e.init()
    e.bm25_index(progress=False)
    assert [h.id for h in e.bm25_search(query, 3)[0]][:1] == [found]


def test_index_of_another_tokenizer_is_refused(tmp_path: Path) -> None:
    config = _zh_project(tmp_path, "character")
    e = engine_for(config)
    e.init()
    e.bm25_index(progress=False)
    cfg = yaml.safe_load(config.read_text())
    cfg["backend_configs"]["bm25"]["tokenizer"] = "jieba"
    config.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    with pytest.raises(IndexMismatchError, match="'character' tokenizer.*'jieba'"):
        engine_for(config).init()


@pytest.mark.parametrize("method", ["lucene", "bm25+"])
def test_a_query_of_unknown_words_finds_nothing_even_beside_a_document_with_no_word(tmp_path: Path,
                                                                                   method: str) -> None:
    """bm25s gives an unknown word the empty string's id, which a document of no word (digits and
    single letters only) holds: such a query used to return that document at 0.57."""
    corpus = tmp_path / "c.jsonl"
    docs = [("digits", "0 1 1 0 1 0 0 1"), ("cat", "The cat sat on the mat and purred."),
            ("dog", "A dog barked at the mailman all morning.")]
    corpus.write_text("".join(f'{{"id": "{i}", "contents": "{t}"}}\n' for i, t in docs))
    e = bm25_built(tmp_path, method, corpus)
    e.add([{"id": "blank", "contents": "7 7 7"}, {"id": "owl", "contents": "An owl hooted."}])  # the delta too
    assert e.bm25_search(["zzzzqqq", "the", "cat", "owl"], 5) == [[], [], *e.bm25_search(["cat", "owl"], 5)]
    assert [h.id for h in e.bm25_search("cat", 5)[0]] == ["cat"] and [h.id for h in e.bm25_search("owl", 5)[0]] == ["owl"]
