"""The client's messages off stdin, for the stdio server (stdio.py): newline-delimited lines out of
chunks of bytes as they arrive (Lines), read on the event loop where it can watch fd 0, else on a
thread of their own; a plain reading of a file descriptor's lines (read_lines); and the answer of a
server that cannot start (refuse_requests)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterator

from .jsonrpc import INTERNAL_ERROR, error, valid_id


class Lines:
    """Newline-delimited messages out of chunks of bytes as they arrive."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` completes."""
        lines, start = [], 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self.parts.append(chunk[start:end])
            lines.append(b"".join(self.parts))
            self.parts, start = [], end + 1
        if start < len(chunk):
            self.parts.append(chunk[start:])
        return lines

    def rest(self) -> list[bytes]:
        """The last line, where the stream ended without its newline."""
        return [b"".join(self.parts)] if self.parts else []


def read_lines(fd: int) -> Iterator[bytes]:
    """The lines of file descriptor `fd` until its end (or an error reading it), read with os.read:
    sys.stdin's buffer would hold a lock while it waits, and a process forked meanwhile (OpenVINO's
    telemetry forked one from a thread at `import openvino`, before imports.py left its converter,
    which starts it, out; a library may still) inherits that lock held: its
    multiprocessing start-up closes sys.stdin and waits forever, keeping the client's pipes open
    after the client exits."""
    lines = Lines()
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        yield from lines.feed(chunk)
    yield from lines.rest()


def refuse_requests(message: str) -> None:
    """A server that cannot start still answers its client: every request on stdin (the client's
    `initialize` first) gets `message` as a JSON-RPC error, until the client closes stdin, so the
    client shows the configuration problem instead of "Connection closed" (exiting at once would
    race the reply). Returns at once when stdin is a terminal (a person reads stderr)."""
    if os.isatty(0):
        return
    for line in read_lines(0):
        try:
            request = json.loads(line)
        except (ValueError, RecursionError):  # not JSON: not a request this can answer
            continue
        if isinstance(request, dict) and "method" in request and valid_id(request.get("id")):
            os.write(1, json.dumps(error(request["id"], INTERNAL_ERROR, message)).encode() + b"\n")


def read_on_loop(loop: asyncio.AbstractEventLoop, take: Callable[[bytes | None], None]) -> bool:
    """Read stdin on the event loop when it becomes readable (a pipe, a socket, a terminal): a
    message then wakes the loop alone, not a reading thread that wakes the loop in turn (one
    hand-off less per call). Each line goes to `take` as it is read, then None at the end. False
    where the loop cannot watch it (a regular file, /dev/null)."""
    got = Lines()

    def readable() -> None:
        try:
            chunk = os.read(0, 1 << 16)  # readable: returns what is there without waiting
        except OSError:
            chunk = b""
        for line in got.feed(chunk) if chunk else [*got.rest(), None]:
            take(line)
        if not chunk:
            loop.remove_reader(0)

    try:
        loop.add_reader(0, readable)
    except (OSError, ValueError, NotImplementedError):
        return False
    return True


def read_on_thread(loop: asyncio.AbstractEventLoop, take: Callable[[bytes | None], None]) -> None:
    """Read stdin on a thread of its own, each line given to `take` on the loop, then None."""
    def read() -> None:
        try:
            for line in read_lines(0):
                loop.call_soon_threadsafe(take, line)
        finally:
            loop.call_soon_threadsafe(take, None)

    threading.Thread(target=read, name="stdin", daemon=True).start()

