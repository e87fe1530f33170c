"""Bounds on documents read by path (issue 31): a file's bytes, a PDF's pages, a page's text and
rendered pixels, the time to parse or render one file; each refused with the bound named before
the heavy work, quickly, and the server answers a search right after. Parsing, rendering,
chunking and embedding stop when the caller cancels (limits.CANCEL)."""

from __future__ import annotations

import contextvars
import threading
import time
import zlib
from pathlib import Path

import pytest
from conftest import MCP, copy_built
from retriever.config import ChunkingConfig, LimitsConfig
from retriever.documents.parse import parse_pdf
from retriever.documents.pdf_images import build_image_corpus
from retriever.documents.split import chunks_of
from retriever.errors import CancelledWork, LimitError
from retriever.security.limits import CANCEL
from retriever.testing.projects import engine_for


def handmade_pdf(content: bytes, width: float = 612, height: float = 792, pages: int = 1) -> bytes:
    """A PDF written by hand: `pages` pages of `width` x `height` pt, each drawing `content`
    (one Flate stream shared by every page, so a big text compresses to a few kilobytes)."""
    stream = zlib.compress(content, 9)
    objs: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"",
                         b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
                         b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream"]
    kids = []
    for _ in range(pages):
        kids.append(len(objs) + 1)
        objs.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Resources << /Font << /F1 3 0 R >> >> "
                    b"/Contents 4 0 R >>" % (width, height))
    objs[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), pages)
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


TEXT = b"BT /F1 12 Tf 72 720 Td (Glaciers carve valleys.) Tj ET\n"


def text_bomb(megabytes: int) -> bytes:
    """One page whose content stream shows `megabytes` MB of two-letter strings: pypdf's time."""
    return handmade_pdf(b"BT /F1 1 Tf 10 10 Td\n" + b"(AB) Tj\n" * (megabytes * 1024 * 1024 // 8) + b"ET\n")


@pytest.fixture
def served(built_project: Path, tmp_path: Path) -> tuple[MCP, Path]:
    config = copy_built(built_project, tmp_path / "p")
    mcp = MCP(engine_for(config))
    mcp.ok("retriever_init")
    return mcp, config.parent


@pytest.fixture
def heavy_work(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the heavy work began: PDFium's text extraction of a page, its render of one.
    "Refused before the heavy work" is these counts, not a wall-clock bound (the CI machine is shared)."""
    import pypdfium2

    calls = {"extract": 0, "render": 0}
    for name, cls, attr in (("extract", pypdfium2.PdfPage, "get_textpage"), ("render", pypdfium2.PdfPage, "render")):
        real = getattr(cls, attr)

        def counted(self: object, *a: object, _real: object = real, _name: str = name, **k: object) -> object:
            calls[_name] += 1
            return _real(self, *a, **k)  # type: ignore[operator]

        monkeypatch.setattr(cls, attr, counted)
    return calls


def refused_quickly(mcp: MCP, tool: str, args: dict, key: str, within: float = 30.0) -> str:
    """`tool` is refused with limits.`key` named, and the server answers a search after it. `within`
    only catches a hang; whether the heavy work began, `heavy_work` says."""
    t = time.perf_counter()
    err = mcp.error(tool, args)
    took = time.perf_counter() - t
    assert f"limits.{key}" in err, err
    assert took < within, f"{tool} took {took:.1f} s to refuse"
    assert mcp.ok("bm25_search", {"query_list": ["photosynthesis"], "top_k": 1})["ret_psg"][0]
    return err


def test_a_100_mb_text_file_is_refused_before_it_is_read(served: tuple[MCP, Path]) -> None:
    mcp, folder = served
    with open(folder / "big.txt", "wb") as f:  # sparse: 100 MB that take no disk
        f.truncate(100 * 1024 * 1024)
    err = refused_quickly(mcp, "retriever_ingest", {"path": "big.txt"}, "max_file_bytes")
    assert "104857600" in err and str(folder) not in err


def test_a_small_pdf_with_megabytes_of_text_on_a_page_is_refused(served: tuple[MCP, Path],
                                                               heavy_work: dict[str, int]) -> None:
    mcp, folder = served
    data = text_bomb(8)
    assert len(data) < 50_000  # 8 MB of page content in a few kilobytes
    (folder / "bomb.pdf").write_bytes(data)
    err = refused_quickly(mcp, "retriever_ingest", {"path": "bomb.pdf"}, "max_page_chars")
    assert "page 1's content stream" in err and str(folder) not in err
    assert heavy_work["extract"] == 0  # refused from the stream's size, before pypdf read its text


def test_a_pdf_with_a_14400_pt_page_is_refused_before_rendering(served: tuple[MCP, Path],
                                                              heavy_work: dict[str, int]) -> None:
    mcp, folder = served
    data = handmade_pdf(TEXT, 14400, 14400)
    assert len(data) < 1000
    (folder / "huge.pdf").write_bytes(data)
    args = {"parse_file_path": "huge.pdf", "image_corpus_save_path": "pages/c.jsonl"}
    err = refused_quickly(mcp, "retriever_build_image_corpus", args, "max_page_pixels")
    assert "14400 x 14400 pt" in err
    assert not (folder / "pages").exists() or not list((folder / "pages").rglob("*.jpg"))
    assert heavy_work["render"] == 0


@pytest.mark.parametrize("tool, args", [
    pytest.param("retriever_ingest", {"path": "five.pdf"}, id="ingest"),
    pytest.param("retriever_build_image_corpus", {"parse_file_path": "five.pdf", "image_corpus_save_path": "c.jsonl"},
                 id="image-corpus"),
])
def test_pages_over_max_pages_are_refused(built_project: Path, tmp_path: Path, tool: str, args: dict,
                                          heavy_work: dict[str, int]) -> None:
    config = copy_built(built_project, tmp_path / "p")
    (config.parent / "five.pdf").write_bytes(handmade_pdf(TEXT, pages=5))
    mcp = MCP(engine_for(config, {"limits": {"max_pages": 4}}))
    mcp.ok("retriever_init")
    assert "5, the limit is 4 (limits.max_pages)" in refused_quickly(mcp, tool, args, "max_pages")
    assert heavy_work == {"extract": 0, "render": 0}


@pytest.mark.parametrize("tool, args", [
    pytest.param("retriever_ingest", {"path": "long.pdf"}, id="ingest"),
    pytest.param("retriever_build_image_corpus", {"parse_file_path": "long.pdf", "image_corpus_save_path": "c.jsonl"},
                 id="image-corpus"),
])
def test_parsing_and_rendering_stop_at_max_parse_seconds(built_project: Path, tmp_path: Path, tool: str,
                                                         args: dict, heavy_work: dict[str, int]) -> None:
    config = copy_built(built_project, tmp_path / "p")
    (config.parent / "long.pdf").write_bytes(handmade_pdf(TEXT * 200, pages=400))
    mcp = MCP(engine_for(config, {"limits": {"max_parse_seconds": 0.05}}))
    mcp.ok("retriever_init")
    assert "not done within 0.05 s" in refused_quickly(mcp, tool, args, "max_parse_seconds")
    assert heavy_work["extract" if tool == "retriever_ingest" else "render"] < 400  # stopped short of the end


def cancelled_after(work: object, started: threading.Event) -> tuple[BaseException | None, float]:
    """Run `work()` on a thread with CANCEL set for it, cancel once `started` is set; what it
    raised and how long it ran after the cancel."""
    event = threading.Event()
    ctx = contextvars.copy_context()
    ctx.run(CANCEL.set, event)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            ctx.run(work)  # type: ignore[arg-type]
        except BaseException as e:  # noqa: BLE001 - reported to the test
            raised.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(30)
    event.set()
    t = time.perf_counter()
    thread.join(30)
    assert not thread.is_alive()
    return (raised[0] if raised else None), time.perf_counter() - t


def test_rendering_stops_when_the_caller_cancels(tmp_path: Path) -> None:
    (tmp_path / "many.pdf").write_bytes(handmade_pdf(TEXT, pages=400))
    pages = tmp_path / "image" / "many"
    started = threading.Event()

    def watch() -> None:  # sets `started` once the first page is on disk
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (pages.is_dir() and any(pages.glob("*.jpg"))):
            time.sleep(0.01)
        started.set()

    threading.Thread(target=watch, daemon=True).start()
    raised, after = cancelled_after(lambda: build_image_corpus(tmp_path / "many.pdf", tmp_path / "c.jsonl"), started)
    assert isinstance(raised, CancelledWork), raised
    assert after < 2.0
    assert len(list(pages.glob("*.jpg"))) < 400 and not (tmp_path / "c.jsonl").exists()


def test_parsing_stops_when_the_caller_cancels() -> None:
    data = handmade_pdf(TEXT * 50, pages=400)
    started = threading.Event()
    calls = [0]

    def work() -> None:
        import pypdfium2

        real = pypdfium2.PdfPage.get_textpage

        def counted(self: pypdfium2.PdfPage, *a: object, **k: object) -> object:
            calls[0] += 1
            started.set()
            time.sleep(0.01)  # PDFium reads a page in well under a millisecond: the cancel must land mid-way
            return real(self, *a, **k)

        pypdfium2.PdfPage.get_textpage = counted  # type: ignore[method-assign]
        try:
            parse_pdf(data, "many.pdf")
        finally:
            pypdfium2.PdfPage.get_textpage = real  # type: ignore[method-assign]

    raised, after = cancelled_after(work, started)
    assert isinstance(raised, CancelledWork), raised
    assert after < 2.0 and calls[0] < 400


def test_chunking_stops_when_the_caller_cancels() -> None:
    event = threading.Event()
    event.set()
    ctx = contextvars.copy_context()
    ctx.run(CANCEL.set, event)
    with pytest.raises(CancelledWork):
        ctx.run(chunks_of, "word " * 20_000, ChunkingConfig(by="word", length=2))
    assert len(chunks_of("word " * 20_000, ChunkingConfig(by="word", length=2))) == 10_000


def test_a_page_whose_text_is_over_max_page_chars_is_refused() -> None:
    # ten lines (PDFium drops a text drawn twice in one place): 230 characters and more from a stream
    # of under 1,000 bytes
    lines = b"".join(b"BT /F1 12 Tf 72 %d Td (Glaciers carve valleys.) Tj ET\n" % (720 - 14 * i) for i in range(10))
    data = handmade_pdf(lines)
    with pytest.raises(LimitError, match=r"page 1's text, characters: 2\d\d, the limit is 100 \(limits\.max_page_chars"):
        parse_pdf(data, "ok.pdf", LimitsConfig(max_page_chars=100))
    assert "Glaciers carve valleys." in parse_pdf(data, "ok.pdf").text
