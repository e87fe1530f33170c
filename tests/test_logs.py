"""Logs on stderr: one format for every logger, and other libraries' chatter (faiss's loader,
bm25s, fastmcp's banner) only from WARNING up unless --log-level DEBUG."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, copy_built

pytestmark = pytest.mark.slow  # CLI subprocesses
LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<name>[\w.]+): ")
COMMANDS = [
    pytest.param(["search", "plants and sunlight", "--mode", "hybrid"], id="search"),  # loads FAISS and BM25
    pytest.param(["index", "--mode", "bm25", "--overwrite"], id="index-bm25"),  # bm25s logs at DEBUG
    pytest.param(["serve", "--init"], id="serve-stdio"),  # fastmcp has a format of its own
]


def stderr_of(args: list[str], config: Path, *options: str) -> str:
    done = subprocess.run([str(BIN / "retriever"), *options, *args, "--config", str(config)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def log_lines(stderr: str) -> list[str]:
    """The lines that are not progress bars (tqdm's end in a carriage return or a rate)."""
    return [line for line in stderr.splitlines() if line.strip() and "it/s]" not in line and "doc/s]" not in line
            and not line.startswith(("BM25S ", "Split strings", "embed:"))]


@pytest.mark.parametrize("args", COMMANDS)
def test_one_format_and_no_third_party_chatter_at_info(built_project: Path, tmp_path: Path, args: list[str]) -> None:
    lines = log_lines(stderr_of(args, copy_built(built_project, tmp_path / "p")))
    assert all(LINE.match(line) for line in lines), lines
    below_warning = [m for m in map(LINE.match, lines) if m and m["level"] in ("DEBUG", "INFO")]
    assert all(m["name"].split(".")[0] == "retriever" for m in below_warning), lines


def test_debug_shows_the_third_party_lines(built_project: Path, tmp_path: Path) -> None:
    text = stderr_of(["search", "plants and sunlight"], copy_built(built_project, tmp_path / "p"),
                     "--log-level", "DEBUG")
    assert " faiss.loader: " in text
