"""PDF pages -> an image corpus (`is_multimodal`), as UltraRAG's corpus server `build_image_corpus`.

Each page is rendered with pypdfium2 (PDFium) to a JPEG under `image/<pdf stem>/page_<n>.jpg`
beside the corpus file, and listed as `{"id", "image_id", "image_path", "pdf", "page"}` (UltraRAG's
keys, plus the source file and the page number from 0 for filters; a second PDF of the same stem
gets `<stem>-2`). A PDF that will not open (damaged,
or encrypted with a password) is skipped and named in the reply. The corpus file is written to a
temporary name and renamed into place, so a crash never leaves half a corpus. A record beside the
corpus (`<name>.jsonl.json`) and one in each page folder (`.written.json`) say this program wrote
them: a tool call replaces no corpus and no page without them (guard.check_replace).

Each PDF is held to the `limits` bounds before it is rendered: its bytes (max_file_bytes), pages
(max_pages) and every page's pixels at this DPI (max_page_pixels); rendering stops between pages
when max_parse_seconds pass for one file or the caller cancels.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..config import LimitsConfig
from ..errors import AlreadyExistsError, InvalidInputError, MissingDependencyError
from ..security.guard import check_replace
from ..security.limits import Deadline, check_count
from ..store.persist import (
    FOLDER_RECORD,
    FORMAT_VERSION,
    atomic_write_text,
    folder_written_here,
    mark_folder,
    record_of,
    written_here,
)

log = logging.getLogger(__name__)
DPI = 144  # UltraRAG renders at 144 dpi too


def pdf_files(source: Path) -> list[Path]:
    if source.is_file():
        if source.suffix.lower() != ".pdf":
            raise InvalidInputError(f"{source.name}: not a .pdf file; give a PDF or a folder of them")
        return [source]
    if not source.is_dir():
        raise InvalidInputError(f"{source.name}: no such file or folder")
    found = sorted(p for p in source.rglob("*") if p.suffix.lower() == ".pdf" and p.is_file())
    if not found:
        raise InvalidInputError(f"{source.name}: no .pdf files in this folder")
    return found


def _unique(stem: str, used: set[str]) -> str:
    """`stem`, or `stem-2`, `stem-3`...: two a.pdf in different folders keep their own pages."""
    name, n = stem, 1
    while name in used:
        n += 1
        name = f"{stem}-{n}"
    used.add(name)
    return name


def check_pages(doc: Any, name: str, dpi: int, limits: LimitsConfig) -> None:
    """Refuse a PDF of more pages than limits.max_pages or a page over limits.max_page_pixels at
    `dpi`, from the page sizes alone (nothing rendered yet)."""
    check_count(f"{name}: pages", len(doc), "max_pages", limits.max_pages, "split the document")
    scale = dpi / 72
    for n in range(len(doc)):
        width, height = doc[n].get_size()
        pixels = round(width * scale) * round(height * scale)
        check_count(f"{name}: page {n} ({width:g} x {height:g} pt) rendered at {dpi} dpi, pixels", pixels,
                    "max_page_pixels", limits.max_page_pixels, "render a smaller document")


def build_image_corpus(source: Path, corpus: Path, overwrite: bool = False, dpi: int = DPI,
                       limits: LimitsConfig | None = None) -> dict[str, Any]:
    """Render every page of the PDFs at `source` (a file or a folder, searched recursively) and
    write the image corpus `corpus` (.jsonl) with the pages under `corpus`'s folder."""
    try:
        import pypdfium2 as pdfium
    except ImportError as e:
        raise MissingDependencyError("pypdfium2", "mcp-retriever[images]") from e
    if corpus.suffix != ".jsonl":
        raise InvalidInputError(f"image_corpus_save_path must end with .jsonl, got {corpus}")
    if corpus.exists() and not overwrite:
        raise AlreadyExistsError(f"{corpus} exists; pass overwrite=true to replace it")
    check_replace((corpus, record_of(corpus)), written_here(corpus), "image_corpus_save_path")
    limits = limits or LimitsConfig()
    pdfs = pdf_files(source)
    for pdf in pdfs:
        check_count(f"{pdf.name}: bytes in the file", pdf.stat().st_size, "max_file_bytes", limits.max_file_bytes,
                    "split the document")
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    stems: set[str] = set()
    for pdf in pdfs:
        stem = _unique(pdf.stem, stems)
        try:
            doc = pdfium.PdfDocument(pdf)
        except pdfium.PdfiumError as e:
            skipped[str(pdf)] = str(e)
            log.warning("skipped %s: %s", pdf, e)
            continue
        folder = corpus.parent / "image" / stem
        try:
            check_pages(doc, pdf.name, dpi, limits)
            deadline = Deadline(f"rendering {pdf.name}", limits.max_parse_seconds)
            pages = [folder / f"page_{n}.jpg" for n in range(len(doc))]
            check_replace([*pages, folder / FOLDER_RECORD], folder_written_here(folder), "image_corpus_save_path")
            mark_folder(folder)
            for n in range(len(doc)):
                deadline.check()
                rel = f"image/{stem}/page_{n}.jpg"
                doc[n].render(scale=dpi / 72).to_pil().convert("RGB").save(corpus.parent / rel, quality=90)
                rows.append({"id": len(rows), "image_id": f"{stem}/page_{n}.jpg", "image_path": rel,
                             "pdf": pdf.name, "page": n})
        finally:
            doc.close()
    if not rows:
        raise InvalidInputError(f"{source}: no page could be rendered ({len(skipped)} PDFs skipped: "
                                f"{'; '.join(f'{k}: {v}' for k, v in skipped.items())})")
    record = {"format_version": FORMAT_VERSION, "kind": "image corpus", "images": len(rows)}
    atomic_write_text(record_of(corpus), json.dumps(record))  # first: a corpus in place is always marked ours
    atomic_write_text(corpus, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    log.info("image corpus %s: %d pages from %d PDFs", corpus, len(rows), len(pdfs) - len(skipped))
    return {"image_corpus_save_path": str(corpus), "images": len(rows), "pdfs": len(pdfs) - len(skipped),
            "skipped": skipped}
