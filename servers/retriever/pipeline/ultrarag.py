"""The launcher UltraRAG starts for our server (`retriever ultrarag-server <folder>` writes it):
`python <folder>/src/<folder>.py` runs `retriever serve --ultrarag` over stdio with the Python
that has mcp-retriever installed. The contract itself (server.yaml, UltraRAG's meanings) is
api/ultrarag.py's."""

from __future__ import annotations

from pathlib import Path

LAUNCHER = '''"""UltraRAG starts this server as `python {name}`: run mcp-retriever's retriever over stdio
in UltraRAG mode, with the Python that has it installed."""
import os
import sys

PYTHON = {python!r}
PARAMETERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "parameter.yaml")
os.execv(PYTHON, [PYTHON, "-m", "retriever", "serve", "--ultrarag", "--config", os.path.normpath(PARAMETERS),
                  *sys.argv[1:]])
'''


def write_launcher(folder: Path, python: str) -> Path:
    path = folder / "src" / f"{folder.name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(LAUNCHER.format(name=path.name, python=python), encoding="utf-8")
    return path
