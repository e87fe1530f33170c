"""Corpus reading: both record formats, metadata kept, every bad input named by file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from retriever.errors import CorpusError
from retriever.store.corpus import CorpusFile


def corpus(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_ultrarag_and_beir_records_with_metadata(tmp_path: Path) -> None:
    path = corpus(tmp_path, [
        json.dumps({"id": "a", "contents": "first passage", "year": 2020}),
        "",
        "   ",
        json.dumps({"_id": 7, "title": "A title", "text": "the body", "metadata": {"k": 1}}),
        json.dumps({"_id": "t", "title": "", "text": "only text"}),
        json.dumps({"contents": "no id: the row is the id"}),
    ])
    docs = CorpusFile.open(path)
    assert docs.ids == ["a", "7", "t", "3"]
    assert docs.get(0).text == "first passage" and docs.get(0).metadata == {"year": 2020}
    assert docs.get(1).text == "A title the body" and docs.get(1).metadata == {"metadata": {"k": 1}}
    assert docs.get(2).text == "only text"
    assert list(docs.texts([2, 1])) == ["only text", "A title the body"]
    assert list(docs.texts())[0] == "first passage"


def test_fingerprint_changes_with_content(tmp_path: Path) -> None:
    a = CorpusFile.open(corpus(tmp_path, [json.dumps({"id": "a", "contents": "x"})])).fingerprint
    b = CorpusFile.open(corpus(tmp_path, [json.dumps({"id": "a", "contents": "y"})])).fingerprint
    assert a != b


@pytest.mark.parametrize(
    "lines, message",
    [
        pytest.param(['{"id": "a", "contents": "ok"}', '{"id": "b", "contents": '], "c.jsonl:2: invalid JSON", id="bad-json"),
        pytest.param(['{"id": "a", "body": "x"}'], "c.jsonl:1: no text field", id="no-text"),
        pytest.param(['{"id": "a", "contents": 5}'], "c.jsonl:1: the text field must be a string", id="text-not-string"),
        pytest.param(['["a", "b"]'], "c.jsonl:1: a record must be a JSON object", id="not-object"),
        pytest.param(
            ['{"id": "a", "contents": "x"}', "", '{"id": "a", "contents": "y"}'],
            "c.jsonl:3: duplicate id 'a' (first seen on line 1)", id="duplicate-id",
        ),
        pytest.param(['{"id": [1], "contents": "x"}'], "c.jsonl:1: the id must be", id="bad-id"),
        pytest.param(["", "  "], "the corpus is empty", id="empty"),
    ],
)
def test_bad_corpus_is_named_by_file_and_line(tmp_path: Path, lines: list[str], message: str) -> None:
    with pytest.raises(CorpusError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        CorpusFile.open(corpus(tmp_path, lines))


def test_missing_corpus_file(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="corpus file not found"):
        CorpusFile.open(tmp_path / "nope.jsonl")


def test_repeated_ids_numbered_when_asked(tmp_path: Path) -> None:
    """UltraRAG's chunked corpora repeat a document's id in its chunks (duplicate_ids: number)."""
    path = corpus(tmp_path, [json.dumps({"id": i, "contents": f"chunk {n}"})
                             for n, i in enumerate(["x", "x", "y", "x", "x#1"])])
    with pytest.raises(CorpusError, match="duplicate id 'x'.*duplicate_ids: number"):
        CorpusFile.open(path)
    docs = CorpusFile.open(path, duplicate_ids="number")
    assert docs.ids == ["x", "x#1", "y", "x#2", "x#1#1"]  # a real id that a number took is numbered in turn
    assert [docs.get(r).id for r in range(5)] == docs.ids and docs.get(3).text == "chunk 3"


@pytest.mark.parametrize("line", [
    b'{"id": "a", "contents": "x", "n": 1, "n": 2}',  # a repeated key: the last one
    b'{"id": "a", "contents": "\\ud800 alone"}',  # a lone surrogate (pydantic-core refuses it: json.loads reads it)
    b'{"id": 12345678901234567890123, "contents": "x", "f": 0.1, "g": -0.0, "h": 1e400, "i": NaN}',
    b'{"id": "a", "contents": "\\u00e9 caf\xc3\xa9\\n\\t"}',
    b'\xef\xbb\xbf{"id": "a", "contents": "x"}',  # a byte-order mark
])
def test_a_record_reads_as_json_loads_reads_it(line: bytes) -> None:
    """Records are parsed by pydantic-core's parser where it can (a hit's document in a sixth of the
    time), else by json.loads: either way, the record json.loads reads."""
    from retriever.store.corpus import parse_record

    rec = json.loads(line)
    doc = parse_record(line, 0, "c.jsonl:1")
    assert (doc.id, doc.text) == (str(rec["id"]), rec["contents"])
    assert json.dumps(doc.metadata) == json.dumps({k: v for k, v in rec.items() if k not in ("id", "contents")})
