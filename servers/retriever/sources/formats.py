"""A file to sections of text, one function per format (pip install 'mcp-retriever[docs]').

A section is a run of text with its place for citations: the PDF page or the slide, and the
heading path above it (Markdown, reST, HTML, DOCX, EPUB; a sheet's name for a workbook). The
libraries were chosen by measurement (bench/RESULTS.md, section parsers): pypdf per page (bounded as
documents/parse.py bounds it), python-docx, python-pptx, openpyxl, ebooklib + BeautifulSoup,
markdown-it-py; text in any common encoding through charset-normalizer. A `.gz` file is its
inner file (`notes.md.gz` is Markdown), inflated no further than max_file_bytes; a file with no
known extension is read as text when it is text (no NUL byte, a decodable charset), else refused
with the reason. Nothing here writes or logs a server path."""

from __future__ import annotations

import gzip
import io
import re
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..config import LimitsConfig
from ..documents.parse import parse_pdf
from ..errors import InvalidInputError, LimitError, MissingDependencyError
from ..security.limits import Deadline, check_count


@dataclass(frozen=True)
class Section:
    text: str
    page: int | None = None  # PDF page or slide, from 1
    heading: tuple[str, ...] = ()  # the headings above the text, outermost first


@dataclass(frozen=True)
class Parsed:
    sections: tuple[Section, ...]
    format: str
    title: str | None = None
    meta: dict[str, str] = field(default_factory=dict)  # e.g. the encoding a text file was read in


CODE = {".py", ".pyi", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java", ".kt", ".c", ".h", ".cc", ".cpp",
        ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".bash", ".zsh", ".sql", ".r", ".lua", ".pl",
        ".toml", ".yaml", ".yml", ".ini", ".cfg", ".conf", ".json", ".xml", ".css", ".scss", ".tex", ".proto"}
TEXT = {".txt", ".text", ".log", ".tsv"}
SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".rst": "rst", ".html": "html", ".htm": "html",
            ".xhtml": "html", ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx", ".xlsm": "xlsx",
            ".csv": "csv", ".epub": "epub", ".jsonl": "jsonl", ".ndjson": "jsonl",
            **{s: "code" for s in CODE}, **{s: "text" for s in TEXT}}
BINARY = {".doc", ".ppt", ".xls", ".odt", ".zip", ".tar", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".mp3", ".mp4",
          ".exe", ".so", ".dll", ".bin", ".pyc", ".o", ".a", ".whl", ".jar", ".sqlite", ".db", ".npy", ".woff", ".ttf"}


def format_of(name: str) -> str | None:
    """The format a file name says (`.gz` looks at the name inside); None: sniff its bytes."""
    path = PurePosixPath(name.lower())
    if path.suffix == ".gz":
        return format_of(path.stem) or "text"
    if path.suffix in BINARY:
        raise InvalidInputError(f"{name}: {path.suffix} files are not read (binary); read are PDF, DOCX, PPTX, "
                                "XLSX, CSV, EPUB, HTML, Markdown, reST, JSON lines, text and source code, files "
                                "without an extension that hold text, and any of these gzipped")
    return SUFFIXES.get(path.suffix)


def parse_path(path: Path, limits: LimitsConfig | None = None, name: str | None = None) -> Parsed:
    """`path` parsed by its format; `name` (default the file's name) is how errors call it."""
    limits = limits or LimitsConfig()
    name = name or path.name
    check_count(f"{name}: bytes in the file", path.stat().st_size, "max_file_bytes", limits.max_file_bytes,
                "split the document or raise the limit")
    return parse_bytes(path.read_bytes(), name, limits)


def parse_bytes(data: bytes, name: str, limits: LimitsConfig | None = None) -> Parsed:
    limits = limits or LimitsConfig()
    fmt = format_of(name)
    if PurePosixPath(name.lower()).suffix == ".gz":
        data = _gunzip(data, name, limits.max_file_bytes)
    if fmt is None:
        fmt = "text" if b"\0" not in data[:8192] else None
        if fmt is None:
            raise InvalidInputError(f"{name}: a binary file of no known format (a NUL byte in its first 8 KiB)")
    deadline = Deadline(f"parsing {name}", limits.max_parse_seconds)
    return PARSERS[fmt](data, name, limits, deadline)


def _gunzip(data: bytes, name: str, most: int) -> bytes:
    """The inflated bytes, refused past `most` (a gzip bomb stops at the bound, not at the end)."""
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            while block := f.read(1 << 20):
                out.write(block)
                if out.tell() > most:
                    raise LimitError(f"{name}: inflates past max_file_bytes ({most} bytes); split the file or raise "
                                     "limits.max_file_bytes")
    except (OSError, EOFError, zlib.error) as e:
        raise InvalidInputError(f"{name}: not a readable gzip file ({e})") from None
    return out.getvalue()


WESTERN = ("cp1252", "latin_1", "iso8859_15")


def decode(data: bytes, name: str) -> tuple[str, str]:
    """Text and its encoding: UTF-8 (a BOM dropped) where it decodes, else what charset-normalizer finds."""
    try:
        return data.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes
    except ImportError as e:
        raise MissingDependencyError("charset_normalizer", "mcp-retriever[docs]") from e
    found = from_bytes(data[: 1 << 20])
    best = found.best()
    if best is None:
        raise InvalidInputError(f"{name}: not text in any encoding charset-normalizer knows")
    # a tie (short Latin-1 text reads as well in cp1250, cp1257, ...) goes to Western European, the commonest
    best = next((m for m in found if m.encoding in WESTERN and m.chaos <= best.chaos and m.coherence >= best.coherence),
                best)
    return data.decode(best.encoding, errors="replace"), best.encoding


def _text(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    text, enc = decode(data, name)
    return Parsed((Section(text),), "text", None, {"encoding": enc})


def _code(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    text, enc = decode(data, name)
    return Parsed((Section(text),), "code", None, {"encoding": enc})


def _csv(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    import csv

    text, enc = decode(data, name)
    rows = ["\t".join(cell.strip() for cell in row) for row in csv.reader(io.StringIO(text))]
    return Parsed((Section("\n".join(r for r in rows if r.strip())),), "csv", None, {"encoding": enc})


def _jsonl(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    import json

    text, enc = decode(data, name)
    lines = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            value = line
        if isinstance(value, dict):  # a record's text fields, the rest left out of the index
            value = " ".join(str(v) for k, v in value.items() if isinstance(v, str) and k not in ("id", "_id"))
        lines.append(str(value).strip())
    return Parsed((Section("\n".join(x for x in lines if x)),), "jsonl", None, {"encoding": enc})


def _markdown(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    try:
        from markdown_it import MarkdownIt
    except ImportError as e:
        raise MissingDependencyError("markdown_it", "mcp-retriever[docs]") from e
    text, enc = decode(data, name)
    out = _Sections()
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    level = 0
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            level = int(token.tag[1])
        elif token.type == "inline":
            plain = "".join(c.content for c in token.children or [] if c.type in ("text", "code_inline", "softbreak"))
            plain = (plain or token.content).strip()
            if i > 0 and tokens[i - 1].type == "heading_open":
                out.heading(level, plain)
            else:
                out.add(plain)
        elif token.type in ("fence", "code_block"):
            out.add(token.content.rstrip("\n"))
    return out.parsed("markdown", {"encoding": enc})


_RST_UNDERLINE = re.compile(r"^([=\-`:'\"~^_*+#<>.])\1{2,}\s*$")


def _rst(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    """reST by its section titles (a line underlined, or over- and underlined, by one punctuation
    character repeated); the first style met is level 1, as docutils reads it. Markup is kept."""
    text, enc = decode(data, name)
    lines = text.splitlines()
    out, styles, para = _Sections(), [], []  # type: ignore[var-annotated]
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        over = _RST_UNDERLINE.match(line) and i + 2 < len(lines) and _RST_UNDERLINE.match(lines[i + 2])
        title, style, skip = None, None, 1
        if over and lines[i + 1].strip():
            title, style, skip = lines[i + 1].strip(), "o" + line.strip()[0], 3
        elif line.strip() and _RST_UNDERLINE.match(nxt) and len(nxt.strip()) >= len(line.strip()):
            title, style, skip = line.strip(), nxt.strip()[0], 2
        if title is not None:
            out.add("\n".join(para))
            para = []
            if style not in styles:
                styles.append(style)
            out.heading(styles.index(style) + 1, title)
        elif not line.strip():
            out.add("\n".join(para))
            para = []
        else:
            para.append(line.rstrip())
        i += skip
    out.add("\n".join(para))
    return out.parsed("rst", {"encoding": enc})


_BLOCKS = ["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td", "th", "blockquote", "dt", "dd", "figcaption"]


def _html(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    """HTML in the charset it declares, else UTF-8, else what charset-normalizer finds."""
    try:
        from bs4 import BeautifulSoup
    except ImportError as e:
        raise MissingDependencyError("bs4", "mcp-retriever[docs]") from e
    declared = re.search(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_\-]+)""", data[:4096], re.IGNORECASE)
    enc = None
    if declared:
        try:
            text, enc = data.decode(declared.group(1).decode("ascii")), declared.group(1).decode("ascii").lower()
        except (LookupError, UnicodeDecodeError):
            enc = None
    if enc is None:
        text, enc = decode(data, name)
    soup = BeautifulSoup(text, "html.parser")
    return _soup(soup, deadline).parsed("html", {"encoding": enc})


def _soup(soup: object, deadline: Deadline, out: _Sections | None = None) -> _Sections:
    out = out or _Sections()
    for tag in soup(["script", "style", "nav", "header", "footer", "noscript", "template"]):  # type: ignore[operator]
        tag.decompose()
    title = soup.title.get_text(" ", strip=True) if soup.title else None  # type: ignore[attr-defined]
    if title and out.title is None:
        out.title = title
    blocks = soup.find_all(_BLOCKS)  # type: ignore[attr-defined]
    for n, b in enumerate(blocks):
        if b.find_parent(_BLOCKS) is not None:
            continue  # a block inside another is in its text already
        text = " ".join(b.get_text(" ").split())
        if b.name[0] == "h" and b.name[1:].isdigit():
            out.heading(int(b.name[1]), text)
        else:
            out.add(text)
        if n % 256 == 0:
            deadline.check()
    if not blocks:
        out.add(" ".join(soup.get_text(" ", strip=True).split()))  # type: ignore[attr-defined]
    return out


def _pdf(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    parsed = parse_pdf(data, name, limits, deadline)
    ends = [*parsed.pages[1:], len(parsed.text) + 2]
    pages = tuple(Section(parsed.text[start : end - 2], page=n)
                  for n, (start, end) in enumerate(zip(parsed.pages, ends), 1))
    return Parsed(tuple(p for p in pages if p.text.strip()), "pdf", parsed.title)


def _office(name: str, what: str, load: Callable[[], object]) -> object:
    try:
        return load()
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise InvalidInputError(f"{name}: not a readable {what} file ({type(e).__name__}: {e})") from None


def _docx(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    try:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph
    except ImportError as e:
        raise MissingDependencyError("docx", "mcp-retriever[docs]") from e
    doc = _office(name, "DOCX", lambda: docx.Document(io.BytesIO(data)))
    out = _Sections()
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


def _pptx(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    try:
        from pptx import Presentation
    except ImportError as e:
        raise MissingDependencyError("pptx", "mcp-retriever[docs]") from e
    deck = _office(name, "PPTX", lambda: Presentation(io.BytesIO(data)))
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


def _xlsx(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    try:
        import openpyxl
    except ImportError as e:
        raise MissingDependencyError("openpyxl", "mcp-retriever[docs]") from e
    book = _office(name, "XLSX", lambda: openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True))
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


def _epub(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    try:
        import ebooklib
        from bs4 import BeautifulSoup
        from ebooklib import epub
    except ImportError as e:
        raise MissingDependencyError("ebooklib", "mcp-retriever[docs]") from e
    book = _office(name, "EPUB", lambda: epub.read_epub(io.BytesIO(data), options={"ignore_ncx": True}))
    out = _Sections()
    for item in book.get_items_of_type(ebooklib.ITEM_DOCUMENT):  # type: ignore[attr-defined]
        deadline.check()
        _soup(BeautifulSoup(item.get_content(), "html.parser"), deadline, out)
    titles = book.get_metadata("DC", "title")  # type: ignore[attr-defined]
    out.title = titles[0][0] if titles else out.title
    return out.parsed("epub")


class _Sections:
    """Builds sections from paragraphs as headings come and go."""

    def __init__(self) -> None:
        self.path: list[tuple[int, str]] = []
        self.paras: list[str] = []
        self.done: list[Section] = []
        self.title: str | None = None

    def heading(self, level: int, text: str) -> None:
        self.flush()
        if self.title is None and level == 1:
            self.title = text
        self.path = [(lv, t) for lv, t in self.path if lv < level] + [(level, text)]

    def add(self, text: str) -> None:
        if text.strip():
            self.paras.append(text.strip())

    def flush(self) -> None:
        if self.paras:
            self.done.append(Section("\n\n".join(self.paras), heading=tuple(t for _, t in self.path)))
            self.paras = []

    def parsed(self, fmt: str, meta: dict[str, str] | None = None) -> Parsed:
        self.flush()
        return Parsed(tuple(self.done), fmt, self.title, meta or {})


Parser = Callable[[bytes, str, LimitsConfig, Deadline], Parsed]
PARSERS: dict[str, Parser] = {"text": _text, "code": _code, "csv": _csv, "jsonl": _jsonl, "markdown": _markdown,
                              "rst": _rst, "html": _html, "pdf": _pdf, "docx": _docx, "pptx": _pptx, "xlsx": _xlsx,
                              "epub": _epub}
