"""The tools reference of the docs site (docs/tools.md), generated from the registry (api/registry.py):
`python -m retriever.api.reference` rewrites it between its markers; tests/test_agent.py fails
when the page drifts from the registry. Parameters are not restated: each tool's input schema
(`tools/list`) describes them."""

from __future__ import annotations

import sys
from pathlib import Path

from .registry import PROFILES, TOOLS, Tool

BEGIN, END = "<!-- tools: begin -->", "<!-- tools: end -->"
PAGE = Path(__file__).resolve().parents[3] / "docs" / "tools.md"


def _effects(t: Tool) -> str:
    e = t.effects
    words = ["reads" if e.read_only else "writes"]
    if e.destructive:
        words.append("replaces or deletes")
    if e.open_world:
        words.append("calls out")
    return ", ".join(words)


def markdown() -> str:
    rows = ["| tool | profiles | effects | needs | returns | what it does |", "|---|---|---|---|---|---|"]
    for t in TOOLS:
        profiles = ", ".join(p for p in PROFILES if p in t.profiles)
        needs = (t.needs.__doc__ or "").strip() if t.needs else ""
        returns = ", ".join(f"`{o}`" for o in t.outputs)
        rows.append(f"| `{t.name}` | {profiles} | {_effects(t)} | {needs} | {returns} | {t.doc} |")
    return "\n".join(rows)


def between(page: str, begin: str = BEGIN, end: str = END) -> str:
    """The generated part of a page: what stands between its two markers."""
    return page[page.index(begin) + len(begin):page.index(end)].strip()


def replace_between(path: Path, body: str, begin: str = BEGIN, end: str = END) -> None:
    """Rewrite the generated part of the page at `path` (scripts/layout.py writes its page so too)."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:text.index(begin) + len(begin)] + "\n" + body + "\n" + text[text.index(end):],
                    encoding="utf-8")


def section(page: str) -> str:
    return between(page)


def write(path: Path = PAGE) -> None:
    replace_between(path, markdown())


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
