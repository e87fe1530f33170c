"""What every tool returns: UltraRAG's keys (`ret_psg`, ...) built from hits, and the reply
that carries them.

Replies are lean. The result travels once, as `structuredContent`; a small result (under
`TEXT_COPY_LIMIT` bytes of JSON) is also given as compact JSON text for clients that read only
text, as the MCP spec suggests, while a large one (a batch of passages) gets a one-line note
instead of a second copy. `return_text=false` drops the passages and keeps ids and scores.
"""

from __future__ import annotations

import json
from typing import Any

from fastmcp.tools.base import ToolResult
from mcp.types import TextContent

from .types import Hit

TEXT_COPY_LIMIT = 64 * 1024


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


def _passage_chars(payload: dict[str, Any]) -> int:
    """Characters of passage text in a reply: a cheap lower bound of its JSON size."""
    psg = payload.get("ret_psg") or [g for groups in payload.get("ret_psg_ls", []) for g in groups]
    return sum(len(t) for hits in psg for t in hits)


def reply(payload: dict[str, Any]) -> ToolResult:
    """Structured content once; a JSON text copy only when it is small (see the module doc)."""
    text = None
    if _passage_chars(payload) <= TEXT_COPY_LIMIT:
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    if text is None or len(text) > TEXT_COPY_LIMIT:
        text = f"results in structuredContent (keys: {', '.join(payload)}); not repeated as text to keep the reply lean"
    return ToolResult(content=[TextContent(type="text", text=text)], structured_content=payload)
