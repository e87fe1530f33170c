"""What retriever/indexes/bm25.py reads of bm25s beyond its documented API (the delta scored at
query time, document frequencies, adaptive fusion's bounds, the growing tokenizer), checked one by
one so that a bm25s release that changes any of them fails here by name, not as a wrong score
somewhere else. pyproject.toml pins bm25s to the releases that have them all."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from retriever.config import BM25Config
from retriever.indexes.bm25 import BM25Index

PIN = "bm25s>=0.3.10,<=0.3.16"  # pyproject.toml's; both ends ran this file and tests/test_bm25_delta.py
TEXTS = ["apple banana apple cherry", "banana split with cherry on top", "durian", "apple pie and apple juice"]
QUERY = "apple cherry durian"
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


def _tokenizer_ids() -> None:
    """Tokenizer(lower=, splitter=, stopwords=, stemmer=).tokenize(texts, update_vocab=,
    return_as="ids", show_progress=) and .get_vocab_dict()."""
    index = BM25Index.build(TEXTS, BM25Config(), show_progress=False)
    ids = index.tokenizer.tokenize(["apple banana"], update_vocab=False, return_as="ids", show_progress=False)
    vocab = index.tokenizer.get_vocab_dict()
    assert isinstance(vocab, dict) and ids == [[vocab["appl"], vocab["banana"]]], (ids, vocab)


def _tokenizer_vocabulary() -> None:
    """Tokenizer.word_to_stem, .stem_to_sid, .word_to_id: the dicts a copy's vocabulary grows in."""
    from retriever.indexes.bm25 import _extended

    tokenizer = BM25Index.build(TEXTS, BM25Config(), show_progress=False).tokenizer
    for name in ("word_to_stem", "stem_to_sid", "word_to_id"):
        assert isinstance(getattr(tokenizer, name), dict), f"Tokenizer.{name} is no dict"
    grown = _extended(tokenizer)
    grown.tokenize(["quokka"], update_vocab=True, return_as="ids", show_progress=False)
    assert "quokka" in grown.get_vocab_dict() and "quokka" not in tokenizer.get_vocab_dict(), \
        "a copy with its own word_to_stem/stem_to_sid/word_to_id still shares its vocabulary with the original"


def _index_takes_ids_and_vocab() -> None:
    """BM25(method=, k1=, b=).index(an object with .ids and .vocab, show_progress=)."""
    index = BM25Index.build(TEXTS, BM25Config(), show_progress=False)
    assert int(index.model.scores["num_docs"]) == len(TEXTS)


def _postings() -> None:
    """BM25.scores["indptr"], ["indices"], ["num_docs"] (term-major postings) and BM25.vocab_dict."""
    model = BM25Index.build(TEXTS, BM25Config(), show_progress=False).model
    scores, vocab = model.scores, model.vocab_dict
    assert {"indptr", "indices", "data", "num_docs"} <= set(scores), f"keys {sorted(scores)}"
    indptr, indices = np.asarray(scores["indptr"]), np.asarray(scores["indices"])
    assert len(indptr) == len(vocab) + 1, f"{len(indptr)} indptr entries for {len(vocab)} terms"
    for term, docs in (("appl", {0, 3}), ("cherri", {0, 1}), ("durian", {2})):
        column = vocab[term]
        assert set(indices[indptr[column] : indptr[column + 1]].tolist()) == docs, (term, docs)


def _model_settings() -> None:
    """BM25.method, .idf_method, .k1, .b, .delta."""
    model = BM25Index.build(TEXTS, BM25Config(method="bm25+", k1=1.2, b=0.7), show_progress=False).model
    got = (model.method, model.idf_method, model.k1, model.b, model.delta)
    assert got[0] == "bm25+" and got[1] == "bm25+" and got[2:4] == (1.2, 0.7) and got[4] is not None, got


def _scorers_match_the_index() -> None:
    """bm25s.scoring._select_idf_scorer(method)(df, N=) and _select_tfc_scorer(method)(tf_array=,
    l_d=, l_avg=, k1=, b=, delta=) score as BM25.get_scores_from_ids(columns) does, every method."""
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    for method in METHODS:
        index = BM25Index.build(TEXTS, BM25Config(method=method), show_progress=False)
        m, vocab = index.model, index.tokenizer.get_vocab_dict()
        docs = index.tokenizer.tokenize(TEXTS, update_vocab=False, return_as="ids", show_progress=False)
        (query,) = index.tokenizer.tokenize([QUERY], update_vocab=False, return_as="ids", show_progress=False)
        idf, tfc = _select_idf_scorer(m.idf_method), _select_tfc_scorer(m.method)
        avgdl = sum(map(len, docs)) / len(docs)
        want = []
        for doc in docs:
            total = 0.0
            for t in query:
                tf, df = doc.count(t), sum(t in d for d in docs)
                if tf or method in ("bm25l", "bm25+"):  # these two score a term a document lacks too
                    total += idf(df, N=len(docs)) * float(tfc(tf_array=tf, l_d=len(doc) if tf else avgdl, l_avg=avgdl,
                                                              k1=m.k1, b=m.b, delta=m.delta))
            want.append(total)
        columns = [m.vocab_dict[term] for term, i in vocab.items() if i in query]
        got = m.get_scores_from_ids(columns)
        assert all(math.isclose(g, w, rel_tol=1e-5, abs_tol=1e-6) for g, w in zip(got, want)), (method, got, want)


def _summed_postings_are_bm25s_scores() -> None:
    """BM25Index._scores (the query terms' postings summed in one np.add.at) gives
    BM25.get_scores_from_ids(columns)'s scores to the bit, repeated terms included, every method."""
    for method in METHODS:
        index = BM25Index.build(TEXTS, BM25Config(method=method), show_progress=False)
        m, term = index.model, {i: t for t, i in index.tokenizer.get_vocab_dict().items()}
        for query in (QUERY, "apple apple banana", "cherry split durian apple pie"):
            (ids,) = index.tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)
            columns = [m.vocab_dict[term[t]] for t in ids]  # in query order, a repeated term twice
            want, got = m.get_scores_from_ids(columns), index._scores(columns)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (method, query, got, want)


def _save_and_load() -> None:
    """BM25.save(path, show_progress=) and BM25.load(path, show_progress=) (0.3.10 on), with the
    tokenizer's save_vocab / load_vocab beside them."""
    with tempfile.TemporaryDirectory() as folder:
        index = BM25Index.build(TEXTS, BM25Config(), show_progress=False)
        index.save(Path(folder), {})
        again = BM25Index.load(Path(folder), BM25Config())
        assert again is not None and [r.tolist() for r in again.search([QUERY], 4)[0]] == \
            [r.tolist() for r in index.search([QUERY], 4)[0]]


def _stopwords() -> None:
    """bm25s.stopwords.STOPWORDS_CHINESE (lang zh) and STOPWORDS_EN (indexes/milvus/fulltext.py)."""
    from bm25s.stopwords import STOPWORDS_CHINESE, STOPWORDS_EN

    assert "的" in STOPWORDS_CHINESE and "the" in STOPWORDS_EN


CHECKS: tuple[Callable[[], None], ...] = (_tokenizer_ids, _tokenizer_vocabulary, _index_takes_ids_and_vocab, _postings,
                                          _model_settings, _scorers_match_the_index, _summed_postings_are_bm25s_scores,
                                          _save_and_load, _stopwords)


def broken() -> list[str]:
    """Each internal that is missing or behaves otherwise: what it is, and what went wrong."""
    out = []
    for check in CHECKS:
        try:
            check()
        except Exception as e:  # noqa: BLE001 - every way an internal can break is reported by name
            what = " ".join((check.__doc__ or check.__name__).split())
            out.append(f"- {what}\n  -> {type(e).__name__}: {e}"[:1500])
    return out


def test_the_bm25s_internals_bm25_py_reads_are_there() -> None:
    import bm25s

    problems = broken()
    if problems:
        pytest.fail(f"bm25s {getattr(bm25s, '__version__', '?')} lacks or changed what servers/retriever/indexes/"
                    "bm25.py reads of it (Delta, BM25Index.df, _matching, _scores, bounds, _extended, save/load):\n" +
                    "\n".join(problems) +
                    f"\nInstall a bm25s within pyproject.toml's pin ({PIN}), or adapt indexes/bm25.py to this "
                    "release and widen the pin.", pytrace=False)


def test_a_planted_change_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard can fail: an internal taken away, and an index that no longer scores as the
    scorers say, are reported by name."""
    import bm25s
    import bm25s.scoring

    monkeypatch.delattr(bm25s.scoring, "_select_tfc_scorer")
    assert any("_select_tfc_scorer" in p and "ImportError" in p for p in broken())
    monkeypatch.undo()
    scores = bm25s.BM25.get_scores_from_ids
    monkeypatch.setattr(bm25s.BM25, "get_scores_from_ids", lambda self, ids: scores(self, ids) * 1.01)
    assert any("_select_idf_scorer" in p and "get_scores_from_ids" in p for p in broken())
