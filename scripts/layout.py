"""The package's layout, drawn from the real folders: the layers that import-linter enforces
(pyproject.toml, `[tool.importlinter]`), then the tree of servers/retriever in that order, each
module with its docstring's first sentence (cut at a clause near 110 characters), written into
docs/layout.md between its markers. tests/test_docs.py fails when the page drifts.

    .venv/bin/python scripts/layout.py           # rewrite docs/layout.md
    .venv/bin/python scripts/layout.py --check   # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import tomllib
from pathlib import Path

from retriever.api.reference import between, replace_between

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "servers" / "retriever"
PAGE = ROOT / "docs" / "layout.md"
BEGIN, END = "<!-- layout: begin -->", "<!-- layout: end -->"
WIDTH = 110  # a summary longer than this is cut at a clause boundary
NAME_COLUMN = 26


def summary(path: Path) -> str:
    """A module's docstring, first sentence: short enough to read in a tree."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", text)[0].rstrip(":")
    if len(sentence) > WIDTH:
        cut = max(sentence.rfind(mark, 0, WIDTH) for mark in (", ", "; ", ": ", " ("))
        sentence = (sentence[:cut] if cut > WIDTH // 2 else sentence[:sentence.rfind(" ", 0, WIDTH)]) + " ..."
    return sentence


def _line(indent: int, name: str, text: str) -> str:
    label = "  " * indent + name
    return (label.ljust(NAME_COLUMN - 1) + " " + text).rstrip() if text else label


def layers() -> list[list[str]]:
    """The layers contract's layers, top first, each as its modules' names under the package."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for contract in config.get("tool", {}).get("importlinter", {}).get("contracts", []):
        if contract.get("type") == "layers":
            return [[m.strip().removeprefix("retriever.") for m in re.split(r"[|:]", layer)]
                    for layer in contract["layers"]]
    return []


def _rank(path: Path, order: list[list[str]]) -> tuple[int, str]:
    """Top-level entries in layer order (those in no layer last); alphabetical below that."""
    name = path.stem if path.is_file() else path.name
    level = next((i for i, layer in enumerate(order) if name in layer), len(order))
    return level, path.name


def tree(folder: Path = PACKAGE, indent: int = 1) -> list[str]:
    """The folder's modules, then its sub-packages (each headed by its __init__'s summary); at the
    package's root, modules and packages together in layer order."""
    lines: list[str] = []
    modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    packages = sorted(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    if folder == PACKAGE:
        order = layers()
        for entry in sorted([*modules, *packages], key=lambda p: _rank(p, order)):
            if entry.is_file():
                lines.append(_line(indent, entry.name, summary(entry)))
            else:
                lines.append(_line(indent, entry.name + "/", summary(entry / "__init__.py")))
                lines += tree(entry, indent + 1)
        return lines
    for m in modules:
        lines.append(_line(indent, m.name, summary(m)))
    for p in packages:
        lines.append(_line(indent, p.name + "/", summary(p / "__init__.py")))
        lines += tree(p, indent + 1)
    return lines


def markdown() -> str:
    steps = [f"{i}. " + ", ".join(f"`{m}`" for m in layer) for i, layer in enumerate(layers(), 1)]
    head = _line(0, "servers/retriever/", summary(PACKAGE / "__init__.py"))
    listing = "```\n" + "\n".join([head, *tree()]) + "\n```"
    if not steps:
        return listing
    return ("The layers, top first (a module imports only from layers below its own):\n\n"
            + "\n".join(steps) + "\n\nThe package in that order:\n\n" + listing)


def section(page: str) -> str:
    return between(page, BEGIN, END)


def write(path: Path = PAGE) -> None:
    replace_between(path, markdown(), BEGIN, END)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 if the page differs from the folders")
    args = p.parse_args()
    if args.check:
        if section(PAGE.read_text(encoding="utf-8")) != markdown():
            sys.exit(f"{PAGE.name} is stale: run .venv/bin/python scripts/layout.py")
        return
    write()


if __name__ == "__main__":
    main()
