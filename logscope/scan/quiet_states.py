"""Candidate lines that say nothing: a progress bar redrawn with `\\r` (tqdm's, Lightning's,
Keras's) holds a trigger (`Epoch `, `loss`) in each of its states, yet no signature reads it and
it has no prefix, time or error words. The per-line path decodes and matches each of its states
and finds nothing; `QuietStates` finds the same nothing once per state shape (digits blanked)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import regex

from ..lines.decode import parse_line
from ..lines.layers import Layers
from ..match.events import inert
from ..match.signatures import Library
from .line_shapes import digit_blind


@dataclass(slots=True)
class QuietStates:
    library: Library
    path: str
    year: int | None
    layers: Layers | None = None
    """The input's prefix layers: they are read at a physical line's start, its first state."""
    _known: dict[tuple[bool, bytes, tuple[int, ...]], bool] = field(default_factory=dict)
    """Per (first state, state shape, the line's candidates): whether every such state is quiet
    (kept where that holds whatever the digits)."""
    _blind: dict[int, regex.Pattern[str] | None] = field(default_factory=dict)

    def all_quiet(self, raw: bytes, shape: bytes, found: tuple[int, ...]) -> bool:
        """Every `\\r` state of the line `raw` (`shape`: its digits NUL; `found`: the indexes of
        the signatures whose triggers it holds) says nothing the engine keeps, as the per-line
        path would decode and match it (prefilter.matched)."""
        return self.judge(raw, shape, found) is not False

    def judge(self, raw: bytes, shape: bytes, found: tuple[int, ...]) -> bool | None:
        """`all_quiet`, as True when it holds of every line of this shape (each state's verdict
        holds of its shape: `_shape_wide`), None when of this line only, False when a state
        says something, whatever its digits."""
        if self.layers is not None and self.layers.edge is not None:
            return False  # a multiplexer's panes: a state is no record of its own
        wide = True
        for i, (part, key) in enumerate(zip(raw.split(b"\r"), shape.split(b"\r"), strict=True)):
            k = (i == 0, key, found)
            quiet = self._known.get(k)
            if quiet is None:
                texts = self._texts(part, i == 0, found)
                if texts is None:
                    quiet = False
                elif self._shape_wide(texts, found):
                    quiet = True
                else:
                    wide = False  # quiet, for these digits only: not kept
                    continue
                if len(self._known) >= _MAX_CACHED:
                    self._known.clear()
                self._known[k] = quiet
            if not quiet:
                return False
        return True if wide else None

    def _texts(self, state: bytes, first: bool, found: tuple[int, ...]) -> list[str] | None:
        """The messages of a quiet state, None if it says something. A signature matches a
        record when its trigger is in the record's physical line (`found`) and its regex in the
        record's message (Library.match)."""
        text = state.decode("utf-8", "replace")
        layers = self.layers if first else None
        sigs = self.library.signatures
        out: list[str] = []
        for line in parse_line(text, self.path, 1, self.year, layers):
            if not inert(line) or any(
                sigs[i].regex.search(line.text) for i in found if i < len(sigs)
            ):
                return None
            out.append(line.text)
        return out

    def _shape_wide(self, texts: list[str], found: tuple[int, ...]) -> bool:
        """No candidate can match any state of this shape: each candidate's regex, or a
        superset of it, reads every digit alike and matches none of these messages. (Prefixes,
        times and error words read digits alike too: a redrawn bar differs only in its digits.)"""
        for i in found:
            if i >= len(self.library.signatures):
                continue  # the failure-block words: inert() looked at those
            wide = self._blind_regex(i)
            if wide is None or any(wide.search(t) for t in texts):
                return False
        return True

    def _blind_regex(self, i: int) -> regex.Pattern[str] | None:
        """Signature i's regex if it reads every digit alike (line_shapes.digit_blind); else a
        superset of it that does (its back-references widened to any text, its groups renamed
        apart), or None."""
        if i not in self._blind:
            wide = _superset(self.library.signatures[i].regex.pattern)
            try:
                self._blind[i] = regex.compile(wide) if digit_blind(wide) else None
            except regex.error:
                self._blind[i] = None  # a conditional on a group's name: no superset this way
        return self._blind[i]


_MAX_CACHED = 4096
_BACKREF = re.compile(r"\(\?P=\w+\)")
_GROUP = re.compile(r"\(\?P<\w+>")


def _superset(pattern: str) -> str:
    """A pattern that matches wherever `pattern` does: a back-reference (which repeats what its
    group took) becomes any text, and every named group an unnamed one (a name given twice,
    which `regex` allows and Python's parser does not, then parses)."""
    return _GROUP.sub("(?:", _BACKREF.sub("(?:.*?)", pattern))
