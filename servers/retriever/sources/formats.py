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
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from ..config import LimitsConfig
from ..documents.parse import parse_pdf
from ..errors import InvalidInputError, LimitError, MissingDependencyError
from ..security.limits import Deadline, check_count
from .office import docx_, load_office, pptx_, xlsx_
from .sections import Parsed, Section, Sections

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
    out = Sections()
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
    out, styles, para = Sections(), [], []  # type: ignore[var-annotated]
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
    soup = BeautifulSoup(text, "lxml")  # lxml comes with python-docx (the docs extra): 3x html.parser here
    return _soup(soup, deadline).parsed("html", {"encoding": enc})


def _soup(soup: object, deadline: Deadline, out: Sections | None = None) -> Sections:
    out = out or Sections()
    for tag in soup(["script", "style", "nav", "header", "footer", "noscript", "template"]):  # type: ignore[operator]
        tag.decompose()
    title = soup.title.get_text(" ", strip=True) if soup.title else None  # type: ignore[attr-defined]
    if title and out.title is None:
        out.title = title
    blocks = _outer_blocks(soup)
    for n, b in enumerate(blocks):
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


def _outer_blocks(root: Any) -> list[Any]:
    """The block elements not inside another block, in document order: one walk of the tree (a
    block's inner blocks are in its text already; asking each block for a block parent cost 16 ms
    per page of Debian's HTML documentation)."""
    out, stack = [], list(reversed(root.contents))
    blocks = set(_BLOCKS)
    while stack:
        node = stack.pop()
        name = getattr(node, "name", None)
        if name is None:
            continue  # text, comments
        if name in blocks:
            out.append(node)
        else:
            stack.extend(reversed(node.contents))
    return out


def _pdf(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    parsed = parse_pdf(data, name, limits, deadline)
    ends = [*parsed.pages[1:], len(parsed.text) + 2]
    pages = tuple(Section(parsed.text[start : end - 2], page=n)
                  for n, (start, end) in enumerate(zip(parsed.pages, ends), 1))
    return Parsed(tuple(p for p in pages if p.text.strip()), "pdf", parsed.title)


def _epub(data: bytes, name: str, limits: LimitsConfig, deadline: Deadline) -> Parsed:
    try:
        import ebooklib
        from bs4 import BeautifulSoup
        from ebooklib import epub
    except ImportError as e:
        raise MissingDependencyError("ebooklib", "mcp-retriever[docs]") from e
    book = load_office(name, "EPUB", lambda: epub.read_epub(io.BytesIO(data), options={"ignore_ncx": True}))
    out = Sections()
    for item in book.get_items_of_type(ebooklib.ITEM_DOCUMENT):  # type: ignore[attr-defined]
        deadline.check()
        _soup(BeautifulSoup(item.get_content(), "html.parser"), deadline, out)
    titles = book.get_metadata("DC", "title")  # type: ignore[attr-defined]
    out.title = titles[0][0] if titles else out.title
    return out.parsed("epub")


Parser = Callable[[bytes, str, LimitsConfig, Deadline], Parsed]
PARSERS: dict[str, Parser] = {"text": _text, "code": _code, "csv": _csv, "jsonl": _jsonl, "markdown": _markdown,
                              "rst": _rst, "html": _html, "pdf": _pdf, "docx": docx_, "pptx": pptx_, "xlsx": xlsx_,
                              "epub": _epub}
