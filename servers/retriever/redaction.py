"""Secrets out of every message: replace the whole secret first, then cut the text to length.

Cutting first would leave the part of a key before the cut in the message (`...sk-ENVSEC...`),
which no later replacement of the whole key finds.
"""

from __future__ import annotations

from collections.abc import Iterable

DETAIL_CHARS = 300  # what an error quotes of a server's body


def redact(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def detail(text: str, secrets: Iterable[str | None], limit: int = DETAIL_CHARS) -> str:
    """A server's message for an error: one line, secrets replaced, then cut to `limit` characters."""
    text = redact(" ".join(str(text).split()), secrets)
    return text[:limit] + "..." if len(text) > limit else text
