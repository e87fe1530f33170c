"""What every tool returns: UltraRAG's keys (`ret_psg`, ...) built from hits, the reply budget,
and the reply that carries them.

Every reply's first text content is its JSON (UltraRAG's client reads `json.loads(content[0].text)`).
A small reply (under `TEXT_COPY_LIMIT` bytes: a status, ids and scores, a few short passages) also
carries it as `structuredContent`; one with more passages only as text, so passages never travel
twice (a tool with an output schema, the agent's, always sends structured content). The budget (`fit`) keeps each query's best hits,
rank by rank across queries, while the reply fits `max_bytes`; a cut is always announced in the
reply (`truncated`), with the offset to ask for the rest. `return_text=false` drops the passages.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from ..config import ReplyConfig
from ..search.results import regroup
from ..types import Hit

TEXT_COPY_LIMIT = 4 * 1024  # a top-10 SciFact reply (11 KB) travels once: 0.12 ms less a call over stdio
HTTP_EVENT_BYTES = 900_000  # the stock client refuses an SSE event over 1 MiB; leave room for the envelope
HIT_OVERHEAD = 48  # bytes of JSON per hit besides its text, id and metadata (score, separators, sources)


def clip(lists: list[list[Hit]], max_chars: int) -> tuple[list[list[Hit]], int]:
    """Each passage cut to `max_chars` characters (0: whole); and how many were cut."""
    if not max_chars:
        return lists, 0
    cut = sum(len(h.text) > max_chars for hits in lists for h in hits)
    if not cut:
        return lists, 0
    return [[replace(h, text=h.text[:max_chars]) if len(h.text) > max_chars else h for h in hits]
            for hits in lists], cut


def fit(lists: list[list[Hit]], max_bytes: int, with_text: bool, with_meta: bool) -> tuple[list[int], bool]:
    """How many hits of each list to keep so the reply stays under `max_bytes` (0: all): rank 1 of
    every list first, then rank 2, ..., so every query keeps its best hits. And whether any was cut."""
    keep = [len(hits) for hits in lists]
    if not max_bytes or _bound(lists, with_text, with_meta) <= max_bytes:
        return keep, False
    keep = [0] * len(lists)
    used = 0
    for rank in range(max((len(h) for h in lists), default=0)):
        for i, hits in enumerate(lists):
            if rank < len(hits):
                h = hits[rank]
                used += HIT_OVERHEAD + _size(h.id) + (_size(h.text) if with_text else 0) + (
                    _size(h.metadata) if with_meta else 0)
                if used > max_bytes:
                    return keep, True
                keep[i] += 1
    return keep, False


def _bound(lists: list[list[Hit]], with_text: bool, with_meta: bool) -> float:
    """At least what `fit` adds up over every hit, in one serialisation instead of one per part: the
    parts' JSON side by side in a list is their sizes' sum plus separators (inf: not measured so)."""
    parts = [[h.id, h.text if with_text else "", h.metadata if with_meta else None] for hits in lists for h in hits]
    try:
        return HIT_OVERHEAD * len(parts) + len(to_json(parts, inf_nan_mode="null"))
    except PydanticSerializationError:  # a lone surrogate: `fit` measures each part as json_bytes writes it
        return math.inf


def _size(value: Any) -> int:
    """The bytes of `value` in the reply's JSON (json_bytes')."""
    try:
        return len(to_json(value, inf_nan_mode="null"))
    except PydanticSerializationError:  # a lone surrogate: as json_bytes writes it then, escaped
        return len(json.dumps(_finite(value)))


def json_bytes(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON, strict (NaN and infinities as null), by pydantic-core's serialiser
    (a top-10 reply in a sixth of json.dumps' time); a lone surrogate (a client's text may hold one), which UTF-8 cannot carry,
    goes escaped (`\\ud800`)."""
    try:
        return to_json(value, inf_nan_mode="null")
    except PydanticSerializationError:
        return json.dumps(_finite(value), separators=(",", ":"), allow_nan=False).encode()


def _finite(value: Any) -> Any:
    """`value` with NaN and infinities as null: strict JSON (a corpus file may hold them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# what else a caller can do when the budget is reached, in the arguments its tool has
MORE = ", or return_text=false for ids and scores only, or max_bytes=0 for all (where the server allows it)"
AGENT_MORE = ", or a smaller top_k; get_document reads a hit whole"


def budgeted(lists: list[list[Hit]], offset: int, max_bytes: int, max_chars: int, with_text: bool,
             with_meta: bool, more: str = MORE) -> tuple[list[list[Hit]], dict[str, Any] | None]:
    """The hits to send (from rank `offset + 1` on, passages clipped, within the budget) and, if
    anything was left out or cut, the note that says what and how to get it (`more`: the other
    ways, in the arguments of the caller's tool). A cut reply sends every query the same number of
    hits (fewer where a query has fewer), the most that fit for all, so the next page starts at one
    `next_offset` for all of them; where not even one hit per query fits, each query's next hit
    comes cut to its share of the budget, so a page is never empty and paging always progresses."""
    lists, clipped = clip(lists, max_chars if with_text else 0)
    keep, cut = fit(lists, max_bytes, with_text, with_meta)
    if not cut and not clipped:
        return lists, None
    note: dict[str, Any] = {}
    if cut:
        found = [len(hits) for hits in lists]
        page = min(k for k, n in zip(keep, found) if k < n)
        if page:  # one page size for every query, so offset + page resends none and skips none
            keep = [min(k, page) for k in keep]
        else:
            lists, shrunk = cut_to_fit(lists, max_bytes, with_text, with_meta)
            page, keep = 1, [min(1, n) for n in found]
            note["hits_cut"] = shrunk
        next_offset = offset + page
        note.update(hits_sent=keep, hits_found=found, next_offset=next_offset,
                    how=f"the reply budget ({max_bytes} bytes) was reached: each query keeps its best hits and "
                    f"the rest were left out; call again with the same arguments and offset={next_offset} for the "
                    f"following ones{more}")
        if note.get("hits_cut"):
            note["how"] += ("; hits_cut hits were each over their query's share of the budget: their text (and "
                            "metadata, where that alone was over) cut")
    if clipped:
        note["passages_clipped"] = clipped
        note["max_chars"] = max_chars
    return [hits[:k] for hits, k in zip(lists, keep)], note


def cut_to_fit(lists: list[list[Hit]], max_bytes: int, with_text: bool, with_meta: bool) -> tuple[list[list[Hit]], int]:
    """Each query's first hit cut to an equal share of `max_bytes` (its metadata emptied where that
    alone is over the share, then its text cut to what is left); and how many were cut."""
    share = max_bytes // max(1, sum(1 for hits in lists if hits))
    out, shrunk = [], 0
    for hits in lists:
        if not hits:
            out.append(hits)
            continue
        h = hits[0]
        room = share - HIT_OVERHEAD - _size(h.id)
        meta = h.metadata
        if with_meta:
            meta = meta if _size(meta) <= room else {}
            room -= _size(meta)
        text = cut_text(h.text, room) if with_text else h.text
        if meta is not h.metadata or text is not h.text:
            shrunk += 1
            h = replace(h, text=text, metadata=meta)
        out.append([h, *hits[1:]])
    return out, shrunk


def cut_text(text: str, room: int) -> str:
    """`text` itself if its JSON fits `room` bytes, else its longest head that does (binary search)."""
    if _size(text) <= room:
        return text
    lo, hi = 0, min(len(text), max(0, room))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _size(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def format_hits(results: list[list[Hit]], return_text: bool = True, return_metadata: bool = False,
                fused: bool = False) -> dict[str, Any]:
    """UltraRAG's `ret_psg` plus `ret_ids` and `ret_scores` in the same nesting; for a fused search
    also `ret_sources` (empty when no hit is left), so every reply of a tool has the same keys."""
    out: dict[str, Any] = {}
    if return_text:
        out["ret_psg"] = [[h.text for h in hits] for hits in results]
    out["ret_ids"] = [[h.id for h in hits] for hits in results]
    out["ret_scores"] = [[round(h.score, 6) for h in hits] for hits in results]
    if return_metadata:
        out["ret_meta"] = [[h.metadata for h in hits] for hits in results]
    if fused:
        names = next((list(h.sources) for hits in results for h in hits if h.sources), [])
        out["ret_sources"] = {name: _source_columns(results, name) for name in names}
    return out


def _source_columns(results: list[list[Hit]], name: str) -> dict[str, list[list[Any]]]:
    """Per retriever, its rank and score of each fused hit (null where it did not find it), in
    the nesting of ret_ids: columns keep a large reply small."""
    cells = [[(h.sources or {}).get(name) for h in hits] for hits in results]
    return {
        "rank": [[c[0] if c else None for c in row] for row in cells],
        "score": [[round(c[1], 6) if c else None for c in row] for row in cells],
    }


def format_batch(groups: list[list[list[Hit]]], return_text: bool = True, return_metadata: bool = False,
                 fused: bool = False) -> dict[str, Any]:
    """`ret_psg_ls` (and `ret_ids_ls`, `ret_scores_ls`): one more level, one entry per group."""
    per_group = [format_hits(g, return_text, return_metadata, fused) for g in groups]
    keys = per_group[0].keys() if per_group else ()
    return {f"{k}_ls": [g[k] for g in per_group] for k in keys}


def reply(payload: dict[str, Any], structured: bool = False) -> tuple[str, dict[str, Any] | None]:
    """The JSON as text always; as structured content too when small (see the module doc), or
    always where the tool declares an output schema (`structured`: MCP's structured output)."""
    text = json_bytes(payload).decode()
    return text, payload if structured or len(text) <= TEXT_COPY_LIMIT else None


def reply_bytes(payload: dict[str, Any], structured: bool = False) -> bytes:
    """MCP's tool result of `reply(payload, structured)` as JSON (mcp/core.py tool_result's keys, in
    its order), the payload serialised once: its bytes are the structured content as they are, and
    the text is them as a JSON string. A reply written as one dict serialises the payload twice."""
    data = json_bytes(payload)
    text = data.decode()
    copy = structured or len(text) <= TEXT_COPY_LIMIT
    return (b'{"content":[{"type":"text","text":' + json_bytes(text) + b'}],"isError":false'
            + (b',"structuredContent":' + data if copy else b"") + b"}")


@dataclass(frozen=True)
class Shape:
    """How a search reply is shaped: from the call's arguments and the YAML's `reply` section."""

    offset: int = 0
    max_bytes: int = 0
    max_chars: int = 0
    return_text: bool = True
    return_metadata: bool = False
    fused: bool = False

    @classmethod
    def of(cls, cfg: ReplyConfig, shared: bool, offset: int, max_bytes: int | None, max_chars: int | None,
           return_text: bool, return_metadata: bool, fused: bool = False) -> Shape:
        budget = cfg.max_bytes if max_bytes is None else max_bytes
        if shared:  # over HTTP no event may pass what the stock client accepts
            budget = min(budget or HTTP_EVENT_BYTES, HTTP_EVENT_BYTES)
        return cls(offset, budget, cfg.max_chars if max_chars is None else max_chars, return_text, return_metadata,
                   fused)

    def hits(self, results: list[list[Hit]], collections: bool = False) -> dict[str, Any]:
        """One list per query; `collections`: add each hit's collection (fan-out)."""
        lists, note = budgeted([h[self.offset:] for h in results], self.offset, self.max_bytes, self.max_chars,
                               self.return_text, self.return_metadata)
        out = format_hits(lists, self.return_text, self.return_metadata, self.fused)
        if collections:
            out["ret_collections"] = [[h.collection for h in row] for row in lists]
        return {**out, "truncated": note} if note else out

    def batch(self, groups: list[list[list[Hit]]]) -> dict[str, Any]:
        flat = [h[self.offset:] for g in groups for h in g]
        lists, note = budgeted(flat, self.offset, self.max_bytes, self.max_chars, self.return_text,
                               self.return_metadata)
        payload = format_batch(regroup(lists, [len(g) for g in groups]), self.return_text, self.return_metadata, self.fused)
        return {**payload, "truncated": note} if note else payload
