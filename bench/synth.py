"""A deterministic synthetic corpus for scale runs: `python bench/synth.py N OUT.jsonl [--seed S]`.

- Vocabulary: 60,000 pronounceable words (syllables), drawn with a Zipf law (s = 1.07, as English
  word frequencies), so BM25's posting lists and document frequencies look like a real corpus's.
- Lengths: log-normal words per document (median 80, sigma 0.7, cut to 5..2,000), like abstracts
  and web passages; sentences of 8-25 words.
- Metadata for filters: `year` (1990-2025, more recent more often), `category` (30, Zipfian), `lang`
  (en 80%, de, fr, es), `score` (0-1 uniform).
- Queries (`--queries Q.jsonl`): 3-6 words of a random document, in BEIR form with that document
  as the one relevant (`qrels` beside it): a sanity check that search finds what was written.

The same N and seed give the same bytes on every machine (numpy's PCG64).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

VOCAB = 60_000
CONSONANTS = list("bcdfghjklmnprstvwz") + ["ch", "sh", "th", "tr", "st", "br", "gr", "pl"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io"]
CATEGORIES = 30
LANGS = ["en", "de", "fr", "es"]


def vocabulary(rng: np.random.Generator) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < VOCAB:
        n = int(rng.integers(1, 5))
        word = "".join(CONSONANTS[int(rng.integers(len(CONSONANTS)))] + VOWELS[int(rng.integers(len(VOWELS)))]
                       for _ in range(n))
        words.setdefault(word + ("n" if rng.random() < 0.3 else ""), None)
    return list(words)


def zipf_sampler(rng: np.random.Generator, n: int, s: float = 1.07) -> tuple[np.ndarray, np.random.Generator]:
    weights = 1.0 / np.arange(1, n + 1) ** s
    return np.cumsum(weights / weights.sum()), rng


def documents(n: int, seed: int = 0, more: int | None = None):  # noqa: ANN201 - a generator of dicts
    """`n` documents; `more`: documents of the same vocabulary and laws, drawn with that seed
    instead (new documents for a corpus of `seed`)."""
    rng = np.random.default_rng(seed)
    words = np.array(vocabulary(rng))
    cdf, _ = zipf_sampler(rng, VOCAB)
    cat_cdf, _ = zipf_sampler(rng, CATEGORIES, 1.2)
    if more is not None:
        rng = np.random.default_rng([seed, more])
    for i in range(n):
        length = int(np.clip(rng.lognormal(np.log(80), 0.7), 5, 2000))
        ids = np.searchsorted(cdf, rng.random(length))
        tokens = words[ids]
        out, start = [], 0
        while start < length:
            end = min(start + int(rng.integers(8, 26)), length)
            sentence = " ".join(tokens[start:end])
            out.append(sentence[:1].upper() + sentence[1:] + ".")
            start = end
        yield {"id": f"d{i}", "contents": " ".join(out),
               "year": int(2025 - min(int(rng.exponential(8)), 35)),
               "category": f"c{int(np.searchsorted(cat_cdf, rng.random()))}",
               "lang": LANGS[int(np.searchsorted([0.8, 0.88, 0.95, 1.0], rng.random()))],
               "score": round(float(rng.random()), 4)}


def write(n: int, out: Path, seed: int = 0, queries: Path | None = None, n_queries: int = 1000) -> None:
    rng = np.random.default_rng(seed + 1)
    picked = set(rng.choice(n, size=min(n_queries, n), replace=False).tolist()) if queries else set()
    qrows = []
    with out.open("w", encoding="utf-8") as f:
        for doc in documents(n, seed):
            f.write(json.dumps(doc) + "\n")
            if int(doc["id"][1:]) in picked:
                words = doc["contents"].rstrip(".").lower().replace(".", "").split()
                start = int(rng.integers(0, max(len(words) - 6, 1)))
                qrows.append((f"q{doc['id'][1:]}", " ".join(words[start : start + int(rng.integers(3, 7))]), doc["id"]))
    if queries is not None:
        queries.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t, _ in qrows))
        queries.with_suffix(".qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                                      "".join(f"{q}\t{d}\t1\n" for q, _, d in qrows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int)
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--queries", type=Path, help="also write BEIR queries (and .qrels.tsv) here")
    args = p.parse_args()
    write(args.n, args.out, args.seed, args.queries)
    print(f"{args.out}: {args.n} documents, {args.out.stat().st_size / 1e6:.1f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
