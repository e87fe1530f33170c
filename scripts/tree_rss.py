"""Run a command and write the peak of its process tree's summed RSS (MB) to a file: what the
machine must hold at once while a phase of .ci/run runs, where pytest's workers, the servers the
tests start and their clients run side by side (GNU time's %M gives the largest process only).

    python3 scripts/tree_rss.py OUT -- COMMAND [ARG...]

Stdlib only (it runs before any venv exists): the tree is read from /proc every half second, so a
peak shorter than that can be missed. Exits with the command's status."""

from __future__ import annotations

import os
import subprocess
import sys
import time

PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _children() -> dict[int, list[int]]:
    """Each live process's children, from /proc/*/stat's parent pid."""
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(name))
    return kids


def tree_kb(root: int) -> int:
    """The summed resident set of `root` and every descendant, in KB."""
    kids, todo, total = _children(), [root], 0
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, ()))
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * PAGE_KB
        except (OSError, IndexError, ValueError):
            pass
    return total


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    out, command = argv[0], argv[2:]
    proc = subprocess.Popen(command)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_kb(proc.pid))
        time.sleep(0.5)
    with open(out, "w") as f:
        f.write(f"{peak // 1024}\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
