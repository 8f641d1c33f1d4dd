"""Regex: a `regex` pattern compiled when first used, and pickled as its text. A log uses a
handful of the built-in signatures, and compiling them all would delay every worker's start; a
user's signature is compiled when it is loaded, so that a broken one is reported at once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import regex


class Regex:
    """A `regex` pattern and, once it was needed, its compiled form. Pickled as its text: a
    worker compiles what it uses."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str, compiled: regex.Pattern[str] | None = None) -> None:
        self.pattern = pattern
        self._compiled = compiled

    @property
    def compiled(self) -> regex.Pattern[str]:
        if self._compiled is None:
            self._compiled = regex.compile(self.pattern)
        return self._compiled

    def search(self, string: str, pos: int = 0) -> regex.Match[str] | None:
        return self.compiled.search(string, pos)

    @property
    def groupindex(self) -> Mapping[str, int]:
        names: Mapping[str, int] = self.compiled.groupindex
        return names

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return Regex, (self.pattern,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Regex) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})"
