"""Lines that differ only in their digits, and the regexes that read them all alike. A regex
whose every character class and literal holds all ten digits or none of them cannot tell two
lines of one shape (digits blanked) apart: one match places every field of all of them."""

from __future__ import annotations

import functools
import re
from re import _constants as sre_constants  # type: ignore[attr-defined]  # Python 3.11+
from re import _parser as sre_parse  # type: ignore[attr-defined]
from types import MappingProxyType
from typing import Any

_DIGITS = range(ord("0"), ord("9") + 1)


@functools.lru_cache(maxsize=256)
def digit_blind(pattern: str) -> bool:
    """The regex treats every digit alike (see the module's docstring); False when in doubt
    (a syntax Python's own parser does not read)."""
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, ValueError, TypeError):
        return False
    return _blind(parsed)


def _blind(items: Any) -> bool:
    c = sre_constants
    for op, av in items:
        if op in (c.LITERAL, c.NOT_LITERAL):
            if av in _DIGITS:
                return False
        elif op is c.IN:
            if not _uniform_set(av):
                return False
        elif op in (c.GROUPREF, c.GROUPREF_EXISTS):
            return False
        elif op in (c.SUBPATTERN,):
            if not _blind(av[-1]):
                return False
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            if not _blind(av[2]):
                return False
        elif op is c.BRANCH:
            if not all(_blind(branch) for branch in av[1]):
                return False
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if not _blind(av[1]):
                return False
        elif op is getattr(c, "ATOMIC_GROUP", None):
            if not _blind(av):
                return False
        elif op not in (c.ANY, c.AT):
            return False  # an element this check does not know
    return True


_CATEGORY_HAS_DIGITS = MappingProxyType(
    {
        "CATEGORY_DIGIT": True,
        "CATEGORY_NOT_DIGIT": False,
        "CATEGORY_WORD": True,
        "CATEGORY_NOT_WORD": False,
        "CATEGORY_SPACE": False,
        "CATEGORY_NOT_SPACE": True,
    }
)


def _uniform_set(items: Any) -> bool:
    """A character set holds all ten digits or none of them."""
    c = sre_constants
    held = set()
    for op, av in items:
        if op is c.NEGATE:
            continue
        if op is c.LITERAL:
            if av in _DIGITS:
                held.add(av)
        elif op is c.RANGE:
            held.update(d for d in _DIGITS if av[0] <= d <= av[1])
        elif op is c.CATEGORY:
            has = _CATEGORY_HAS_DIGITS.get(str(av))
            if has is None:
                return False
            if has:
                held.update(_DIGITS)
        else:
            return False
    # a negated set holds the complement of the digits it names: uniform iff they are
    return len(held) in (0, len(_DIGITS))
