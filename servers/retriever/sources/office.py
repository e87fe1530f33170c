"""The Office formats, each through its maintained library: DOCX (python-docx) with heading paths
and tables, PPTX (python-pptx) per slide with its title, tables and notes, XLSX (openpyxl) per
sheet. sources/formats.py chooses among parsers by a file's name."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable

from ..config import LimitsConfig
from ..errors import InvalidInputError, MissingDependencyError
from ..security.limits import Deadline, check_count
from .sections import Parsed, Section, Sections


def load_office(name: str, what: str, load: Callable[[], object]) -> object:
    try:
        return load()
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise InvalidInputError(f"{name}: not a readable {what} file ({type(e).__name__}: {e})") from None


def docx_(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    try:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph
    except ImportError as e:
        raise MissingDependencyError("docx", "mcp-retriever[docs]") from e
    doc = load_office(name, "DOCX", lambda: docx.Document(io.BytesIO(data)))
    out = Sections()
    body = doc.element.body  # type: ignore[attr-defined]
    for n, child in enumerate(body.iterchildren()):
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            para = Paragraph(child, doc)  # type: ignore[arg-type]
            style = (para.style.name if para.style is not None else "") or ""
            level = _heading_level(style)
            if level is not None and para.text.strip():
                out.heading(level, para.text.strip())
            else:
                out.add(para.text)
        elif tag == "tbl":
            table = Table(child, doc)  # type: ignore[arg-type]
            out.add("\n".join("\t".join(c.text.strip() for c in row.cells) for row in table.rows))
        if n % 256 == 0:
            deadline.check()
    props = doc.core_properties  # type: ignore[attr-defined]
    if props.title:
        out.title = props.title
    return out.parsed("docx")


def _heading_level(style: str) -> int | None:
    if style == "Title":
        return 1
    m = re.fullmatch(r"Heading (\d)", style)
    return int(m.group(1)) if m else None


def pptx_(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    try:
        from pptx import Presentation
    except ImportError as e:
        raise MissingDependencyError("pptx", "mcp-retriever[docs]") from e
    deck = load_office(name, "PPTX", lambda: Presentation(io.BytesIO(data)))
    sections = []
    slides = deck.slides  # type: ignore[attr-defined]
    check_count(f"{name}: slides", len(slides), "max_pages", limits.max_pages, "split the deck")
    for n, slide in enumerate(slides, 1):
        deadline.check()
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        title_id = title_shape.shape_id if title_shape is not None else None
        texts = [s.text_frame.text.strip() for s in slide.shapes
                 if s.has_text_frame and s.shape_id != title_id and s.text_frame.text.strip()]
        for s in slide.shapes:
            if s.has_table:
                texts.append("\n".join("\t".join(c.text.strip() for c in row.cells) for row in s.table.rows))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            texts += [notes] if notes else []
        body = "\n\n".join([title, *texts] if title else texts)
        if body.strip():
            sections.append(Section(body, page=n, heading=(title,) if title else ()))
    title = deck.core_properties.title or None  # type: ignore[attr-defined]
    return Parsed(tuple(sections), "pptx", title)


def xlsx_(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    try:
        import openpyxl
    except ImportError as e:
        raise MissingDependencyError("openpyxl", "mcp-retriever[docs]") from e
    book = load_office(name, "XLSX", lambda: openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True))
    sections = []
    for sheet in book.worksheets:  # type: ignore[attr-defined]
        rows = []
        for n, row in enumerate(sheet.iter_rows(values_only=True)):
            cells = ["" if v is None else str(v) for v in row]
            if any(c.strip() for c in cells):
                rows.append("\t".join(cells).rstrip("\t"))
            if n % 1024 == 0:
                deadline.check()
        if rows:
            sections.append(Section("\n".join(rows), heading=(sheet.title,)))
    book.close()  # type: ignore[attr-defined]
    return Parsed(tuple(sections), "xlsx")
