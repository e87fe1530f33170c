"""The docs: docs/layout.md is drawn from the real folders (scripts/layout.py), so a test fails when
a module is added, moved, removed or redescribed, or the import layers change, without the page
following; the README stays short and its links lead to pages that exist; bench/README.md has a row
for every benchmark and names only sections its reports hold. (The tools reference's drift test is
in tests/test_agent.py; `mkdocs build --strict` runs in `make lint`.)"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def layout() -> ModuleType:
    spec = importlib.util.spec_from_file_location("layout_script", ROOT / "scripts" / "layout.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_layout_page_is_the_folders() -> None:
    script = layout()
    assert script.section(script.PAGE.read_text()) == script.markdown(), "run .venv/bin/python scripts/layout.py"


def test_every_module_is_on_the_page() -> None:
    """Not a restatement of the generator: each .py file under the package, by its own name, at the
    depth of its folder, and each layer of the import contract."""
    script = layout()
    page = script.section(script.PAGE.read_text())
    listed = page.splitlines()
    package = ROOT / "servers" / "retriever"
    for f in package.rglob("*.py"):
        rel = f.relative_to(package)
        depth = len(rel.parts)
        if f.name == "__init__.py":
            if depth == 1:
                continue
            name, depth = rel.parts[-2] + "/", depth - 1
        else:
            name = f.name
        assert any(line.startswith("  " * depth + name) for line in listed), rel
    for layer in script.layers():
        assert ", ".join(f"`{m}`" for m in layer) in page


def test_a_stale_page_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a page missing one module's line is stale, and writing it mends it."""
    script = layout()
    stale = tmp_path / "layout.md"
    text = script.PAGE.read_text()
    stale.write_text("\n".join(line for line in text.splitlines() if "fusion.py" not in line) + "\n")
    monkeypatch.setattr(script, "PAGE", stale)
    monkeypatch.setattr("sys.argv", ["layout.py", "--check"])
    with pytest.raises(SystemExit, match="stale"):
        script.main()
    script.write(stale)
    assert script.section(stale.read_text()) == script.markdown()
    assert "fusion.py" in stale.read_text()


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    """The README is what a newcomer needs (under 200 lines); the rest is in docs/, and each of its
    relative links names a file that exists."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    targets = re.findall(r"\]\(([^)#\s]+)\)", readme)
    assert "docs/tools.md" in targets and "docs/layout.md" in targets
    missing = [t for t in targets if "://" not in t and not (ROOT / t).is_file()]
    assert missing == []


BENCH = ROOT / "bench"
ROW = re.compile(r"^\| `(\w+\.py)` \| .+ \| (.+) \|$")  # | `script.py` | question | writes |
WRITES = re.compile(r"([\w./-]+\.md): ((?:`[^`]+`(?:, )?)+)")  # REPORT.md: `section`, `section`


def bench_rows() -> dict[str, list[tuple[Path, str]]]:
    """bench/README.md's rows: script -> the (report, section) pairs its `writes` cell names."""
    rows: dict[str, list[tuple[Path, str]]] = {}
    for line in (BENCH / "README.md").read_text().splitlines():
        if match := ROW.match(line):
            rows[match.group(1)] = [((BENCH / report).resolve(), section) for report, names in WRITES.findall(match.group(2))
                                    for section in re.findall(r"`([^`]+)`", names)]
    return rows


def has_section(report: Path, name: str) -> bool:
    """A section written between markers (bench/report.py), or a heading that starts with `name`."""
    text = report.read_text()
    return f"<!-- {name}: begin -->" in text or any(
        line.lstrip("#").strip().startswith(name) for line in text.splitlines() if line.startswith("#"))


def test_every_benchmark_has_a_row_in_the_bench_readme() -> None:
    scripts = {p.name for p in BENCH.glob("*.py") if 'if __name__ == "__main__":' in p.read_text()}
    assert scripts - set(bench_rows()) == set()
    assert set(bench_rows()) - scripts == set()


def test_the_bench_readme_names_the_sections_the_reports_hold() -> None:
    """Each section a row names is in its report; each marked section of bench/'s reports is named."""
    named = [pair for pairs in bench_rows().values() for pair in pairs]
    assert [f"{r.name}: {s}" for r, s in named if not r.is_file() or not has_section(r, s)] == []
    marked = {(report.resolve(), name) for report in BENCH.glob("*.md") if report.name != "README.md"
              for name in re.findall(r"<!-- (.+?): begin -->", report.read_text())}
    assert sorted(f"{r.name}: {s}" for r, s in marked - set(named)) == []
