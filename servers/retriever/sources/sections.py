"""What a parser gives: sections of text with their place (page or slide, heading path), and
the builder that makes them as headings come and go."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Section:
    text: str
    page: int | None = None  # PDF page or slide, from 1
    heading: tuple[str, ...] = ()  # the headings above the text, outermost first


@dataclass(frozen=True)
class Parsed:
    sections: tuple[Section, ...]
    format: str
    title: str | None = None
    meta: dict[str, str] = field(default_factory=dict)  # e.g. the encoding a text file was read in


class Sections:
    """Builds sections from paragraphs as headings come and go."""

    def __init__(self) -> None:
        self.path: list[tuple[int, str]] = []
        self.paras: list[str] = []
        self.done: list[Section] = []
        self.title: str | None = None

    def heading(self, level: int, text: str) -> None:
        self.flush()
        if self.title is None and level == 1:
            self.title = text
        self.path = [(lv, t) for lv, t in self.path if lv < level] + [(level, text)]

    def add(self, text: str) -> None:
        if text.strip():
            self.paras.append(text.strip())

    def flush(self) -> None:
        if self.paras:
            self.done.append(Section("\n\n".join(self.paras), heading=tuple(t for _, t in self.path)))
            self.paras = []

    def parsed(self, fmt: str, meta: dict[str, str] | None = None) -> Parsed:
        self.flush()
        return Parsed(tuple(self.done), fmt, self.title, meta or {})
