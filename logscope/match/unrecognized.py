"""Error-looking lines that no signature knows, grouped into masked templates."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..model import Line, Template

_MASKS = (
    (re.compile(r"(?:/[\w.@+-]+)+/?"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b[0-9a-fA-F]{12,}\b"), "<hex>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[T _]\d\d:\d\d:\d\d(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\[(?:Rank|rank) ?\d+\]"), "[rank <n>]"),
    (re.compile(r"(?<![A-Za-z])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"), "<n>"),
)
MAX_TEMPLATE = 300


def mask(message: str) -> str:
    """The template of a message: numbers, hex, paths, addresses, times and ranks masked."""
    text = message.strip()[:MAX_TEMPLATE]
    for rx, repl in _MASKS:
        text = rx.sub(repl, text)
    return re.sub(r"\s+", " ", text)


MAX_TEMPLATES = 10_000
"""Distinct templates kept; past this, new ones are dropped (known ones still count), so memory
is bounded."""


@dataclass(slots=True)
class Clusters:
    """Counts templates incrementally, keeping one example line per template."""

    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, Line] = field(default_factory=dict)

    def add(self, line: Line) -> None:
        key = mask(line.text)
        if not key:
            return
        if key in self.counts:
            self.counts[key] += 1
        elif len(self.counts) < MAX_TEMPLATES:
            self.counts[key] = 1
            self.first[key] = line

    def templates(self, limit: int = 50) -> list[Template]:
        """Templates by count (most frequent first), each with its first example line."""
        first = self.first
        ranked = sorted(
            self.counts, key=lambda k: (-self.counts[k], first[k].path, first[k].lineno)
        )
        return [Template(k, self.counts[k], first[k]) for k in ranked[:limit]]
