"""Renderers: a finished Analysis as text, JSON, Markdown or HTML; the fleet summary; `tail`'s
output."""

from __future__ import annotations

from enum import StrEnum


class ReportFormat(StrEnum):
    html = "html"
    md = "md"


class Format(StrEnum):
    text = "text"
    json = "json"
    md = "md"


class FleetFormat(StrEnum):
    text = "text"
    json = "json"
    csv = "csv"
