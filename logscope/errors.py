"""Errors the CLI reports as a message, not a traceback: unreadable inputs, invalid signature
libraries, a worker process that died."""

from __future__ import annotations


class LogscopeError(Exception):
    """Base class: the CLI prints the message and exits 2, never a traceback."""


class InputError(LogscopeError):
    """A log input that cannot be read."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class WorkerError(LogscopeError):
    """A worker process of `--jobs` died: the analysis cannot go on."""


class PatternError(LogscopeError):
    """A signature library that is not valid."""

    def __init__(self, path: str, message: str, signature: str | None = None) -> None:
        self.path = path
        self.signature = signature
        self.message = message
        where = f"{path}: {signature}" if signature else path
        super().__init__(f"{where}: {message}")
