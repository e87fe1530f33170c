"""Import cycles in the package, counting every import: at module level, under TYPE_CHECKING and
inside functions (a deferred import that only hides a cycle is still one). Prints each cycle and
exits 1 if there is one. Run by .ci/run."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "servers"
PACKAGE = "retriever"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, name: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {t for t in out if t.split(".")[0] == PACKAGE}


def main() -> int:
    modules = {module_name(p): p for p in (ROOT / PACKAGE).rglob("*.py")}
    graph = {m: {t for t in imports(p, m) if t in modules and t != m} for m, p in modules.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    # a package's __init__ importing its own submodules is not a cycle of ours
    real = [c for c in cycles if not all(x == c[0] or x.startswith(c[0] + ".") for x in c)]
    for c in real:
        print(" -> ".join(c))
    print(f"{len(modules)} modules, {len(real)} import cycles")
    return 1 if real else 0


if __name__ == "__main__":
    sys.exit(main())
