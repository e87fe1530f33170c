"""A real Milvus 2.3.5 standalone server for the `milvus_server` tests (tests/conftest.py's session
fixture `milvus_server_uri`) and the benches, started and stopped by the run.

The PyPI package `milvus==2.3.5` ships `milvus-server`; `make milvus-server` installs it into its
own venv (.cache/milvus-venv, or MILVUS_SERVER_BIN names the script). The server listens on every
interface, so it only starts inside a private network namespace that has nothing but loopback:
`make test` runs these tests under `unshare --net --fork` after `ip link set lo up`. Anything that
keeps the server from starting fails the tests (never a skip), with the reason and the log tail.
Start it once per network namespace: a second start in the same namespace after a stop did not
become healthy here (seen with the bench), so the bench runs each invocation in its own `unshare`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from .projects import ROOT

DEFAULT_BIN = ROOT / ".cache" / "milvus-venv" / "bin" / "milvus-server"
PROXY_PORT = 19530
HEALTH = "http://127.0.0.1:9091/healthz"
START_TIMEOUT_S = 120


def _interfaces() -> list[str]:
    lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    return [line.split(":")[0].strip() for line in lines]


def _healthy() -> bool:
    try:
        with urllib.request.urlopen(HEALTH, timeout=1) as reply:
            return reply.status == 200 and reply.read().strip() == b"OK"
    except OSError:
        return False


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else "(no log)"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(proc: subprocess.Popen, timeout: float = 60) -> None:
    """SIGINT to the server's process group; wait until every process in it is gone (SIGKILL late)."""
    pgid = proc.pid  # start_new_session: the group is the wrapper and the milvus binary it runs
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while _group_alive(pgid) and time.monotonic() < deadline:
        proc.poll()  # reap the wrapper so its zombie does not keep the group alive
        time.sleep(0.2)
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)
    proc.wait()


class ServerError(RuntimeError):
    """milvus-server could not be started here; the message says why."""


@contextlib.contextmanager
def running_milvus_server(data: Path) -> Iterator[str]:
    """Start milvus-server with its data under `data`; yield its uri; stop it with SIGINT."""
    binary = Path(os.environ.get("MILVUS_SERVER_BIN", DEFAULT_BIN))
    if not binary.exists():
        raise ServerError(f"{binary} is missing: run `make milvus-server` (a venv with milvus==2.3.5)")
    others = [name for name in _interfaces() if name != "lo"]
    if others:
        raise ServerError(
            f"milvus-server listens on every interface and this network namespace has {others}: run it "
            "inside `unshare --net --fork sh -c 'ip link set lo up && ...'` (make test does)"
        )
    if _healthy():
        raise ServerError("something already answers on 127.0.0.1:9091; stop it first")
    data.mkdir(parents=True, exist_ok=True)
    log = data / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(binary), "--data", str(data / "data"), "--proxy-port", str(PROXY_PORT)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _healthy():
            if proc.poll() is not None:
                raise ServerError(f"milvus-server exited with {proc.returncode}:\n{_tail(log)}")
            if time.monotonic() > deadline:
                raise ServerError(f"milvus-server not healthy after {START_TIMEOUT_S} s:\n{_tail(log)}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{PROXY_PORT}"
    finally:
        _stop(proc)
