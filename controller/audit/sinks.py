"""Where the writer's bytes go: an append-only file descriptor, or a text stream (tests).

A sink takes whole records only (one or more lines per call) and either appends all of
them or leaves the file as it was: the log never ends in a half line of the writer's
making (a full disk is cut back to the last whole record).
"""

from __future__ import annotations

import os
from typing import Any, Protocol


class Sink(Protocol):
    name: str

    def write(self, data: bytes) -> None: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...


class FileSink:
    """An O_APPEND file descriptor: each record is one ``os.write`` (no user-space buffer)."""

    def __init__(self, fd: int, name: str) -> None:
        self.fd = fd
        self.name = name
        self.size = os.fstat(fd).st_size  # where the last whole record ends

    def write(self, data: bytes) -> None:
        """Append ``data`` whole, or leave the file as it was: a write that fails part way
        (a full disk) is cut back to the end of the last whole record, so the log never
        ends in a half line of this writer's making. The :class:`OSError` then carries
        ``cut_back = True`` (False when even the cut failed)."""
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError as exc:
            try:
                os.ftruncate(self.fd, self.size)
                exc.cut_back = True  # type: ignore[attr-defined]
            except OSError:
                exc.cut_back = False  # type: ignore[attr-defined]
            raise
        self.size += len(data)

    def sync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class StreamSink:
    """A text stream (e.g. ``io.StringIO``) for tests: write and flush, never fsync."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.name = getattr(stream, "name", None) or f"<{type(stream).__name__}>"

    def write(self, data: bytes) -> None:
        self.stream.write(data.decode("utf-8"))
        flush = getattr(self.stream, "flush", None)
        if flush is not None:
            flush()

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass  # the caller owns the stream
