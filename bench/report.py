"""What the benchmarks share: SciFact's test queries, and writing one's section of RESULTS.md
(between its begin and end markers, replaced on each run)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT / "data" / "scifact"
RESULTS = ROOT / "bench" / "RESULTS.md"


def scifact_queries(n: int) -> list[str]:
    """The first `n` SciFact test queries (those with qrels), in qrels order."""
    qids = [line.split("\t")[0] for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    texts = {}
    for line in (SCIFACT / "queries.jsonl").read_text().splitlines():
        q = json.loads(line)
        texts[q["_id"]] = q["text"]
    return [texts[q] for q in dict.fromkeys(qids)][:n]


def judged(queries: Path, qrels: Path) -> tuple[list[str], dict[str, dict[str, int]], list[str]]:
    """The queries that have judgements, in qrels order: their ids, the qrels, their texts."""
    from retriever.search.evaluation import load_qrels, load_queries

    judgements, texts = load_qrels(qrels), load_queries(queries)
    qids = [q for q in judgements if q in texts]
    return qids, judgements, [texts[q] for q in qids]


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


def write_section(name: str, body: str, out: Path = RESULTS) -> None:
    """`body` as section `name` of `out`: in place of the last run's, or appended."""
    begin, end = markers(name)
    section = f"{begin}\n{body.strip()}\n{end}"
    old = out.read_text() if out.exists() else ""
    if begin in old and end in old:
        new = old[: old.index(begin)] + section + old[old.index(end) + len(end):]
    else:
        new = old.rstrip() + "\n\n" + section + "\n"
    out.write_text(new)


def checkout(rev: str | None, work: Path) -> Path:
    """The servers/ folder of commit `rev` (a git worktree made under `work`, kept for a next run
    there); None: this working tree's."""
    import subprocess

    if rev is None:
        return ROOT / "servers"
    tree = work / f"tree-{rev}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True,
                       capture_output=True)
    return tree / "servers"


def remove_checkouts(work: Path) -> None:
    """The git worktrees `checkout` made under `work`, removed."""
    import subprocess

    for tree in work.glob("tree-*"):
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False,
                       capture_output=True)
