"""The tools reference of the docs site (docs/tools.md) and the scope table of docs/security.md,
generated from the registry (api/registry.py): `python -m retriever.api.reference` rewrites both
between their markers; tests/test_agent.py and tests/test_principals.py fail when a page drifts from
the registry. Parameters are not restated: each tool's input schema (`tools/list`) describes them."""

from __future__ import annotations

import sys
from pathlib import Path

from .registry import PROFILES, TOOLS, Tool

BEGIN, END = "<!-- tools: begin -->", "<!-- tools: end -->"
PAGE = Path(__file__).resolve().parents[3] / "docs" / "tools.md"
SECURITY_PAGE = PAGE.with_name("security.md")
SCOPE_WORDS = {"read": "reads: searches, documents, listings", "write": "adds, replaces or deletes documents",
               "admin": "changes what every caller is served: the session, a whole index, files a call names"}


def _effects(t: Tool) -> str:
    e = t.effects
    words = ["reads" if e.read_only else "writes"]
    if e.destructive:
        words.append("replaces or deletes")
    if e.open_world:
        words.append("calls out")
    return ", ".join(words)


def markdown() -> str:
    rows = ["| tool | profiles | effects | scope | needs | returns | what it does |", "|---|---|---|---|---|---|---|"]
    for t in TOOLS:
        profiles = ", ".join(p for p in PROFILES if p in t.profiles)
        needs = (t.needs.__doc__ or "").strip() if t.needs else ""
        returns = ", ".join(f"`{o}`" for o in t.outputs)
        rows.append(f"| `{t.name}` | {profiles} | {_effects(t)} | `{t.scope}` | {needs} | {returns} | {t.doc} |")
    return "\n".join(rows)


def scopes_markdown() -> str:
    """docs/security.md's table: each scope, what it allows, and the tools that need it (tool.py scope_of)."""
    rows = ["| scope | the tool | tools |", "|---|---|---|"]
    for scope, words in SCOPE_WORDS.items():
        rows.append(f"| `{scope}` | {words} | {', '.join(f'`{t.name}`' for t in TOOLS if t.scope == scope)} |")
    return "\n".join(rows)


def between(page: str, begin: str = BEGIN, end: str = END) -> str:
    """The generated part of a page: what stands between its two markers."""
    return page[page.index(begin) + len(begin):page.index(end)].strip()


def replace_between(path: Path, body: str, begin: str = BEGIN, end: str = END) -> None:
    """Rewrite the generated part of the page at `path` (scripts/layout.py writes its page so too)."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:text.index(begin) + len(begin)] + "\n" + body + "\n" + text[text.index(end):],
                    encoding="utf-8")


def section(page: str, name: str = "tools") -> str:
    return between(page, f"<!-- {name}: begin -->", f"<!-- {name}: end -->")


def write(path: Path = PAGE, security: Path = SECURITY_PAGE) -> None:
    replace_between(path, markdown())
    replace_between(security, scopes_markdown(), "<!-- scopes: begin -->", "<!-- scopes: end -->")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
