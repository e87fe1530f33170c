"""Prompt templates: the defaults below, or `llm.prompts.<name>` from the YAML. Templates are
`str.format` strings; each names the fields it is given (write `{{` and `}}` for literal braces)."""

from __future__ import annotations

from ..config.serving import LLMConfig
from ..errors import ConfigError

DEFAULTS = {
    "rewrite": (
        "Rewrite the search query below into {n} different queries that a search engine over documents would "
        "answer well: keep its meaning, vary the wording, add missing key terms.{hint}\n"
        "Query: {query}\n"
        'Answer as {{"queries": ["...", ...]}}.'),
    "judge": (
        "Do the passages below contain enough to answer the question? Say how sure you are (0 to 1) and, if "
        "not enough, what is missing.\n"
        "Question: {query}\n"
        "Passages:\n{passages}\n"
        'Answer as {{"sufficient": true|false, "confidence": 0.0-1.0, "missing": "..."}}.'),
    "rerank_listwise": (
        "Rank the passages below by how well they answer the query, best first.\n"
        "Query: {query}\n"
        "Passages:\n{passages}\n"
        'Answer as {{"order": [passage numbers, best first]}}, every number once.'),
    "rerank_pointwise": (
        "Score each passage below from 0 (irrelevant) to 10 (answers the query fully).\n"
        "Query: {query}\n"
        "Passages:\n{passages}\n"
        'Answer as {{"scores": [one number per passage, in order]}}.'),
    "triples": (
        "Extract the facts of the text below as (subject, relation, object) triples; use short noun phrases "
        "for subjects and objects, as written in the text.\n"
        "Text: {text}\n"
        'Answer as {{"triples": [["subject", "relation", "object"], ...]}}.'),
    "filters": (
        "A collection's documents carry this metadata: {description}\n"
        "Write the metadata filter the query below implies, or null if it implies none. Filter language: "
        '{{"field": "meta.<key>", "operator": "==|!=|>|>=|<|<=|in|not in", "value": ...}}, combined with '
        '{{"operator": "AND|OR|NOT", "conditions": [...]}}.\n'
        "Query: {query}\n"
        'Answer as {{"filter": {{...}} or null}}.'),
}
FIELDS = {"rewrite": ("n", "hint", "query"), "judge": ("query", "passages"), "rerank_listwise": ("query", "passages"),
          "rerank_pointwise": ("query", "passages"), "triples": ("text",), "filters": ("description", "query")}


def render(cfg: LLMConfig, name: str, **fields: object) -> str:
    template = getattr(cfg.prompts, name) or DEFAULTS[name]
    try:
        return template.format(**fields)
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigError(f"llm.prompts.{name}: the template does not format ({type(e).__name__}: {e}); its fields "
                          f"are {', '.join('{' + f + '}' for f in FIELDS[name])}, literal braces are written {{{{ }}}}")\
            from None


def numbered(texts: list[str], max_chars: int = 1500) -> str:
    """Passages as `[1] text` lines, each cut to `max_chars`."""
    return "\n".join(f"[{i}] {' '.join(t.split())[:max_chars]}" for i, t in enumerate(texts, start=1))
