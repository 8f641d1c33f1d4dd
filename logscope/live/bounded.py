"""Running a program for evidence: from an argument list, never through a shell, under a time
limit and a size cap; finding the programs (py-spy, srun)."""

from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_UNSAFE = re.compile(r"[^\w.-]+")


@dataclass(frozen=True, slots=True)
class Limits:
    pyspy_s: float = 10.0
    """Seconds one `py-spy dump` may take."""
    fr_s: float = 5.0
    """Seconds a rank may take to answer a Flight Recorder request."""
    node_s: float = 20.0
    """Seconds the collection on one machine may take in all (its ranks are worked through
    `parallel` at a time; what is left when they are spent is not collected)."""
    srun_s: float = 28.0
    """Seconds the `srun` that collects on every node may take (start-up and node_s)."""
    stack_bytes: int = 4 << 20
    fr_bytes: int = 32 << 20
    parallel: int = 8


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class Tools:
    pyspy: str | None
    srun: str | None


def find_tools(path: str | None = None, beside: str = sys.executable) -> Tools:
    """py-spy and srun on PATH; py-spy also beside the Python that runs logscope (a venv's
    bin/, where `pip install py-spy` puts it, need not be on PATH)."""
    pyspy = shutil.which("py-spy", path=path)
    if pyspy is None:
        candidate = Path(beside).parent / "py-spy"
        if os.access(candidate, os.X_OK):
            pyspy = str(candidate)
    return Tools(pyspy, shutil.which("srun", path=path))


@dataclass(frozen=True, slots=True)
class Ran:
    code: int | None
    """None when it was killed at its time limit."""
    out: bytes
    err: str
    truncated: bool


def run_bounded(argv: Sequence[str], timeout_s: float, cap: int) -> Ran:
    """Run without a shell; keep at most `cap` bytes of its output (killed past them) and the
    end of its error output; kill it (its whole session) after `timeout_s`. OSError when it
    cannot start."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    if proc.stdout is None or proc.stderr is None:  # pragma: no cover - PIPE gives both
        raise OSError("no pipes")
    out, err = bytearray(), bytearray()
    truncated = timed_out = False
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf: bytearray = key.data
                buf += chunk
                if buf is err and len(err) > 8192:
                    del err[:-4096]
            if len(out) > cap:
                del out[cap:]
                truncated = True
                break
    if timed_out or truncated:
        _kill(proc)
    code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return Ran(None if timed_out else code, bytes(out), err.decode("utf-8", "replace"), truncated)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()


def host_name() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


def safe_name(text: str) -> str:
    """`text` as a part of a file name."""
    return _UNSAFE.sub("_", text)[:64] or "_"
