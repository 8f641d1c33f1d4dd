"""`--format json`: the stable document, pretty-printed."""

from __future__ import annotations

import json
from typing import TextIO

from ..model import Analysis
from .document import document


def render(analysis: Analysis, out: TextIO) -> None:
    json.dump(document(analysis), out, indent=2, ensure_ascii=False)
    out.write("\n")
