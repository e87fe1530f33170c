"""The docs: docs/layout.md is drawn from the real folders (scripts/layout.py), so a test fails when
a module is added, moved, removed or redescribed, or the import layers change, without the page
following; the README stays short and its links lead to pages that exist. (The tools reference's
drift test is in tests/test_agent.py; `mkdocs build --strict` runs in `make lint`.)"""

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
