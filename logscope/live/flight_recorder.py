"""A rank's Flight Recorder: asked for now over torch's worker-server socket, or the dump the
rank wrote itself, copied. torch (2.13) has no dump-on-demand pipe for gloo: the debug-info pipe
is ProcessGroupNCCL's."""

from __future__ import annotations

import http.client
import socket
from pathlib import Path

from .bounded import Limits
from .ranks import STOPPED, RankProcess, listening_sockets


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def ask_flight_recorder(sock_path: str, timeout_s: float, cap: int) -> bytes:
    """A rank's Flight Recorder, as JSON, from its worker server (torch's control plane: the
    job wraps its main in `torch.distributed.elastic.control_plane.worker_main()` and sets
    TORCH_WORKER_SERVER_SOCKET); the server is a C++ thread, so a rank stuck in Python answers.
    Raises OSError (or http.client's errors) when it does not answer in time."""
    conn = _UnixHTTP(sock_path, timeout_s)
    try:
        conn.request("POST", "/handler/fr_trace_json")
        resp = conn.getresponse()
        body = resp.read(cap + 1)
    finally:
        conn.close()
    if resp.status != 200:
        raise OSError(f"HTTP {resp.status}: {body[:200].decode('utf-8', 'replace').strip()}")
    return body[:cap]


def served(r: RankProcess) -> tuple[str, ...]:
    """The rank's worker-server sockets: the Unix sockets it listens on, where its job uses
    TORCH_WORKER_SERVER_SOCKET (the variable may have been changed per rank in Python, which
    /proc/PID/environ does not show, so the socket is found from the process's own fds)."""
    if "TORCH_WORKER_SERVER_SOCKET" not in r.env:
        return ()
    return listening_sockets(r.pid)


NO_SERVER = (
    "records a Flight Recorder (TORCH_FR_BUFFER_SIZE) but serves no worker-server socket to "
    "ask it by (torch.distributed.elastic.control_plane.worker_main with "
    "TORCH_WORKER_SERVER_SOCKET); torch has no dump-on-demand pipe for gloo"
)


def flight_recorder(
    r: RankProcess, out_dir: Path, stem: str, limits: Limits
) -> tuple[tuple[str, ...], str | None]:
    """Ask a serving rank for its Flight Recorder now; copy a dump it wrote earlier (torch
    writes TORCH_FR_DUMP_TEMP_FILE + rank, e.g. on a collective's timeout)."""
    files, errors = [], []
    sockets = served(r)
    if sockets and (r.state in STOPPED or r.state == "Z"):
        errors.append(f"not asked: the process is {r.state_name}")
    elif sockets:
        try:
            body = ask_flight_recorder(sockets[0], limits.fr_s, limits.fr_bytes)
        except (OSError, http.client.HTTPException) as err:
            errors.append(f"no answer from {sockets[0]} in {limits.fr_s:g} s: {err}")
        else:
            (out_dir / f"fr-{stem}.json").write_bytes(body)
            files.append(f"fr-{stem}.json")
    prefix = r.env.get("TORCH_FR_DUMP_TEMP_FILE")
    written = Path(f"{prefix}{r.rank}") if prefix and r.rank is not None else None
    if written is not None and written.is_file():
        try:
            with written.open("rb") as f:
                (out_dir / f"fr-{stem}.pickle").write_bytes(f.read(limits.fr_bytes))
            files.append(f"fr-{stem}.pickle")
        except OSError as err:
            errors.append(f"{written}: {err.strerror or err}")
    if not files and not errors and not sockets and r.env.get("TORCH_FR_BUFFER_SIZE", "0") != "0":
        errors.append(NO_SERVER)
    return tuple(files), "; ".join(errors) or None
