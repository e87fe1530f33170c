"""A folder of real documents in their real formats, made at call time (fpdf2, python-docx,
python-pptx, openpyxl, ebooklib, gzip, Latin-1 bytes), nested, with same-named files in two
folders. Each file holds marker sentences (`MARKERS`: sentence -> where a citation must point),
so a search for one tells whether the right file, page, slide or heading comes back."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

# marker sentence -> the citation its hit must carry: path, and page or heading where the format has one
MARKERS: dict[str, dict[str, Any]] = {
    "Quartz zebras migrate across the frozen lagoon every winter.": {"path": "a/README.md",
                                                                       "heading": "Alpha notes > Migration"},
    "Copper owls nest only inside abandoned lighthouses.": {"path": "b/README.md", "heading": "Beta notes"},
    "The basalt orchestra tunes its cellos with volcanic ash.": {"path": "guide/manual.pdf", "page": 2},
    "Velvet comets are catalogued by their scent of cinnamon.": {"path": "guide/manual.pdf", "page": 3},
    "Granite pelicans deliver the quarterly tax forms by sea.": {"path": "guide/report.docx",
                                                                  "heading": "Annual report > Logistics"},
    "Saffron robots repaint the harbour cranes at midnight.": {"path": "slides/deck.pptx", "page": 2,
                                                                "heading": "Harbour upkeep"},
    "Obsidian tortoises audit the ledger of lost umbrellas.": {"path": "data/budget.xlsx", "heading": "Audits"},
    "Crème brûlée fountains are serviced by naïve glassblowers in the café district.": {"path": "web/latin.html",
                                                                                         "heading": "Fountains"},
    "Version 2.1 fixed the marmalade pipeline leak in the ferry scheduler.": {"path": "logs/CHANGELOG.gz"},
    "Indigo hedgehogs compile the tidal almanac by candlelight.": {"path": "docs/intro.rst",
                                                                    "heading": "Introduction > Almanac"},
    "Silver foxes memorise the railway timetable of the northern provinces.": {"path": "book.epub",
                                                                                 "heading": "Chapter Foxes"},
    "Tangerine squids negotiate treaties about coral property rights.": {"path": "LICENSE"},
}
FILLER = ("This paragraph is ordinary filler text about the weather, the market and the garden, "
          "written so that each file holds more than its marker sentence. ")


def make_folder(root: Path) -> dict[str, Path]:
    """Write every file under `root`; returns relative path -> file. Also a broken PDF and a PNG
    (refused, each with its reason) so that a sync reports files it could not read."""
    m = list(MARKERS)
    files: dict[str, Path] = {}

    def put(rel: str, data: bytes) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files[rel] = path

    put("a/README.md", f"# Alpha notes\n\n{FILLER}\n\n## Migration\n\n{m[0]}\n".encode())
    put("b/README.md", f"# Beta notes\n\n{m[1]} {FILLER}\n".encode())
    put("guide/manual.pdf", _pdf([f"Page one. {FILLER}", f"{m[2]} {FILLER}", f"{m[3]}"]))
    put("guide/report.docx", _docx(m[4]))
    put("slides/deck.pptx", _pptx(m[5]))
    put("data/budget.xlsx", _xlsx(m[6]))
    put("web/latin.html", (f"<html><head><title>Fountain guide</title></head><body><h1>Fountains</h1>"
                           f"<p>{m[7]}</p><p>{FILLER}</p><script>var x = 1;</script></body></html>").encode("latin-1"))
    put("logs/CHANGELOG.gz", gzip.compress(f"Changes\n\n{m[8]}\n\n{FILLER}\n".encode()))
    put("docs/intro.rst", (f"Introduction\n============\n\n{FILLER}\n\nAlmanac\n-------\n\n{m[9]}\n").encode())
    put("book.epub", _epub(m[10]))
    put("LICENSE", f"{m[11]}\n\n{FILLER}\n".encode())
    put("data/people.csv", b"name,role\nAda,engineer\nGrace,admiral\n")
    put("src/tool.py", b'def tidy(x):\n    """Return x tidied."""\n    return x.strip()\n')
    put("notes.jsonl", (json.dumps({"id": "n1", "text": "A note about lanterns."}) + "\n").encode())
    put("broken/bad.pdf", b"%PDF-1.4 this is not really a pdf")
    put("broken/picture.png", b"\x89PNG\r\n\x1a\n" + bytes(64))
    return files


def _pdf(pages: list[str]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def _docx(marker: str) -> bytes:
    import io

    import docx

    d = docx.Document()
    d.core_properties.title = "Annual report"
    d.add_heading("Annual report", level=1)
    d.add_paragraph(FILLER)
    d.add_heading("Logistics", level=2)
    d.add_paragraph(marker)
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "item", "cost"
    table.cell(1, 0).text, table.cell(1, 1).text = "boats", "12"
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def _pptx(marker: str) -> bytes:
    import io

    from pptx import Presentation

    deck = Presentation()
    for title, body in (("Welcome", FILLER), ("Harbour upkeep", marker), ("Questions", "Any questions?")):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def _xlsx(marker: str) -> bytes:
    import io

    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Costs"
    sheet.append(["item", "cost"])
    sheet.append(["boats", 12])
    audits = book.create_sheet("Audits")
    audits.append(["finding"])
    audits.append([marker])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _epub(marker: str) -> bytes:
    import io

    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("id-foxes")
    book.set_title("Foxes")
    book.set_language("en")
    chapter = epub.EpubHtml(title="Foxes", file_name="foxes.xhtml", lang="en")
    chapter.content = f"<html><body><h1>Chapter Foxes</h1><p>{marker}</p><p>{FILLER}</p></body></html>"
    book.add_item(chapter)
    book.toc = [chapter]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    out = io.BytesIO()
    epub.write_epub(out, book)
    return out.getvalue()
