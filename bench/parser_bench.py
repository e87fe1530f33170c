"""Which parsing library: ours (sources/formats.py: one maintained library per format) against
kreuzberg (a Rust core, many formats) and markitdown (Microsoft's converter to Markdown), on the
real-format set of retriever/testing/folders.py (each file holds marker sentences whose place is
known). Per format: whether the marker came back word for word (fidelity; Latin-1 accents
included), the median time of 20 parses, and the installed size of what each needs. Run in the
bench venv (llama-index-core, kreuzberg, markitdown; sees .venv through a .pth file):

    .cache/bench-venv/bin/python bench/parser_bench.py        # writes section `parsers` of bench/RESULTS.md
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from report import write_section


def ours(path: Path) -> str:
    from retriever.sources.formats import parse_path

    return "\n\n".join(s.text for s in parse_path(path).sections)


def kreuzberg(path: Path) -> str:
    from kreuzberg import extract_file_sync

    return str(extract_file_sync(str(path)).content)


def markitdown(path: Path) -> str:
    from markitdown import MarkItDown

    return str(MarkItDown().convert(str(path)).text_content)


def size(*packages: str) -> float:
    import importlib.util

    total = 0
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        root = Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
        total += sum(p.stat().st_size for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file())
    return total / 2**20


def main() -> None:
    from retriever.testing.folders import MARKERS, make_folder

    root = Path(tempfile.mkdtemp())
    make_folder(root)
    libs: dict[str, Callable[[Path], str]] = {"ours": ours, "kreuzberg": kreuzberg, "markitdown": markitdown}
    rows = []
    found = {k: 0 for k in libs}
    errors: list[str] = []
    for marker, where in MARKERS.items():
        path = root / where["path"]
        row = [where["path"]]
        for name, parse in libs.items():
            try:
                text = parse(path)
                ok = marker in " ".join(text.replace("*", "").split())
                if not ok:
                    errors.append(f"- {name}, {where['path']}: the marker not found; the text read: "
                                  f"{' '.join(text.split())[:120]!r}")
                times = []
                for _ in range(20):
                    t = time.perf_counter()
                    parse(path)
                    times.append(time.perf_counter() - t)
                row.append(f"{'yes' if ok else 'no'}, {1000 * statistics.median(times):.1f} ms")
                found[name] += ok
            except Exception as e:  # noqa: BLE001 - a library that cannot read a format says so here
                row.append(f"error ({type(e).__name__})")
                said = " ".join(str(e).replace(str(root), "<folder>").split())[:230]
                errors.append(f"- {name}, {where['path']}: {said}")
        rows.append("| " + " | ".join(row) + " |")
    sizes = {"ours": size("pypdf", "pypdfium2", "pypdfium2_raw", "docx", "pptx", "openpyxl", "ebooklib", "bs4",
                          "markdown_it", "charset_normalizer", "lxml", "et_xmlfile", "soupsieve", "mdurl"),
             "kreuzberg": size("kreuzberg"), "markitdown": size("markitdown", "magika", "onnxruntime", "mammoth",
                                                                 "pdfminer", "pandas", "markdownify", "bs4", "lxml")}
    head = "| file | " + " | ".join(libs) + " |\n|---|" + "---|" * len(libs)
    body = f"""## Parsing libraries (bench/parser_bench.py)

The marker sentence of each file of the real-format set (retriever/testing/folders.py) found word for word
(whitespace and Markdown emphasis ignored), and the median time of 20 parses of that file:

{head}
{chr(10).join(rows)}

Markers found: {', '.join(f'{k} {v}/{len(MARKERS)}' for k, v in found.items())}. What went wrong:

{chr(10).join(dict.fromkeys(errors))}

 Installed size of what each
needs here (MiB, the packages' folders): {', '.join(f'{k} {v:.0f}' for k, v in sizes.items())}.
"""
    write_section("parsers", body)
    print(body)


if __name__ == "__main__":
    main()
