"""The tools .ci/run measures itself with: scripts/tree_rss.py, the peak of a phase's whole process
tree (pytest's workers and the servers its tests start run side by side)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from retriever.testing.projects import ROOT

HOLD = "import sys, time; x = bytearray({mb} << 20); x[::4096] = b'1' * len(x[::4096]); time.sleep(3)"


def test_the_tree_s_peak_is_the_sum_of_its_processes_at_once(tmp_path: Path) -> None:
    out = tmp_path / "peak"
    two = (f"{sys.executable} -c \"{HOLD.format(mb=200)}\" & "
           f"{sys.executable} -c \"{HOLD.format(mb=150)}\"; wait")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "tree_rss.py"), str(out), "--", "sh", "-c", two],
                          timeout=60)
    assert proc.returncode == 0
    peak = int(out.read_text())
    assert 350 <= peak < 600, peak  # both at once (each alone is 200 or 150, plus an interpreter each)


def test_the_command_s_exit_status_is_kept(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "tree_rss.py"), str(tmp_path / "p"), "--",
                           "sh", "-c", "exit 3"], timeout=60)
    assert proc.returncode == 3 and (tmp_path / "p").is_file()
