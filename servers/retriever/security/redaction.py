"""Secrets out of every message: replace the whole secret first, then cut the text to length.

Cutting first would leave the part of a key before the cut in the message (`...sk-ENVSEC...`),
which no later replacement of the whole key finds. The server's own folders are out of the
messages a remote client gets, too (paths_out).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

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


def paths_out(text: str, base: Path | None, folders: Iterable[Path] = ()) -> str:
    """`text` without the server's absolute folders, for a remote client: a path under `base` (the
    YAML's folder) is shown relative to it, one under another of `folders` from that folder's name."""
    labels: dict[str, str] = {}
    for folder in [*folders, *([base] if base is not None else [])]:
        for form in {str(folder), str(folder.resolve())}:
            labels[form] = _label(Path(form), base)
    for form in sorted(labels, key=len, reverse=True):
        if len(form) > 1:  # never the root folder itself
            text = re.sub(re.escape(form) + r"(/|(?![\w.-]))", _replace(labels[form]), text)
    return text


def _label(folder: Path, base: Path | None) -> str:
    for b in {base, base.resolve()} if base is not None else ():
        if folder == b or folder.is_relative_to(b):
            return folder.relative_to(b).as_posix().removeprefix(".")
    return folder.name


def _replace(label: str) -> Callable[[re.Match[str]], str]:
    def replace(m: re.Match[str]) -> str:
        return (f"{label}/" if label else "") if m.group(1) == "/" else (label or ".")

    return replace
