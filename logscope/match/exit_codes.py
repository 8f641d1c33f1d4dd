"""What a process's exit code says: a signal that killed it (torchelastic's negative signal, the
shell's 128 + N, Windows' NTSTATUS), or a code the program chose."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..model import Category

# Exit codes of workers killed by a signal, as torchelastic reports them (negative signal), and
# the shell's 128 + signal.
EXIT_SIGNALS: Mapping[int, tuple[str, Category]] = MappingProxyType(
    {
        -9: ("SIGKILL", "process_killed"),
        -11: ("SIGSEGV", "segfault"),
        -7: ("SIGBUS", "segfault"),
        -8: ("SIGFPE", "segfault"),
        -4: ("SIGILL", "segfault"),
        -6: ("SIGABRT", "unknown"),
        -15: ("SIGTERM", "process_killed"),
        -2: ("SIGINT", "cancelled"),
        137: ("SIGKILL", "process_killed"),
        139: ("SIGSEGV", "segfault"),
        # a Windows process that died of an exception exits with its NTSTATUS (ntstatus.h), as
        # torchrun and mp.spawn report it there: the native crashes
        3221225477: ("STATUS_ACCESS_VIOLATION", "segfault"),
        3221225501: ("STATUS_ILLEGAL_INSTRUCTION", "segfault"),
        3221225620: ("STATUS_INTEGER_DIVIDE_BY_ZERO", "segfault"),
        3221225725: ("STATUS_STACK_OVERFLOW", "segfault"),
        3221226356: ("STATUS_HEAP_CORRUPTION", "segfault"),
        3221226505: ("STATUS_STACK_BUFFER_OVERRUN", "segfault"),
    }
)

MAX_SIGNAL = 64
"""Linux's highest signal number (SIGRTMAX): a shell's exit code 128 + N above it is no signal."""


def signal_exit(code: int) -> bool:
    """An exit code that says a signal ended the process: torchelastic's negative signal, or the
    shell's 128 + N for a signal N (above that the program chose the code: `exit(-6)` is 250)."""
    return code < 0 or 128 < code <= 128 + MAX_SIGNAL


def chosen_exit(fields: Mapping[str, str]) -> bool:
    """A reported exit code the program chose: not 1 (Python's uncaught exception), not a
    signal's."""
    code = fields.get("exit_code", "")
    if not code.isdigit():
        return False
    n = int(code)
    return n not in (0, 1) and n not in EXIT_SIGNALS and not signal_exit(n)
