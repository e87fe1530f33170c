"""Auto-merging (Haystack's AutoMergingRetriever rule): when more than `threshold` of a parent
chunk's children are among the hits, the parent replaces them, at the place of its best child
and with its score; repeated up the hierarchy until nothing merges. Parents are found by id
(O(1)); each chunk lists its children's ids (documents/split.py)."""

from __future__ import annotations

from ..security.visibility import Rule
from ..store.collection import Collection
from ..types import Hit


def merge_once(collection: Collection, hits: list[Hit], threshold: float,
               rule: Rule | None = None) -> tuple[list[Hit], bool]:
    """One round of merging; a parent `rule` (the caller's, security/visibility.py) does not see stays out."""
    groups: dict[str, list[Hit]] = {}
    for h in hits:
        parent = h.metadata.get("parent_id")
        if parent:
            groups.setdefault(parent, []).append(h)
    merged: dict[str, Hit] = {}
    for parent_id, children in groups.items():
        row = collection.row_of.get(parent_id)
        if row is None:
            continue
        parent = collection.get(row)
        if rule is not None and not rule.sees(parent.metadata):
            continue
        total = len(parent.metadata.get("children_ids") or ())
        if total and len(children) / total > threshold:
            merged[parent_id] = Hit(row, parent_id, parent.text, max(c.score for c in children),
                                    {**parent.metadata, "merged_ids": [c.id for c in children]},
                                    collection=children[0].collection)
    if not merged:
        return hits, False
    out, placed = [], set()
    for h in hits:
        parent = h.metadata.get("parent_id")
        if parent in merged:
            if parent not in placed:
                out.append(merged[parent])
                placed.add(parent)
        elif h.id not in placed:
            out.append(h)
    return out, True


def auto_merge(collection: Collection, results: list[list[Hit]], threshold: float,
               rule: Rule | None = None) -> list[list[Hit]]:
    out = []
    for hits in results:
        changed = True
        while changed:
            hits, changed = merge_once(collection, hits, threshold, rule)
        out.append(hits)
    return out
