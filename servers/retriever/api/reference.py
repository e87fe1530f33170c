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


def section(page: str) -> str:
    return page[page.index(BEGIN) + len(BEGIN):page.index(END)].strip()


def write(path: Path = PAGE) -> None:
    text = path.read_text(encoding="utf-8")
    new = text[:text.index(BEGIN) + len(BEGIN)] + "\n" + markdown() + "\n" + text[text.index(END):]
    path.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
