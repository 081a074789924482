"""Read the records of log files, for replay, reports and recovery (not a verifier).

:class:`LogReader` yields every record of one or more files in order with the
file and line it came from. It does not check the chain (``audit verify``
does); it only needs each line to be a JSON object. A torn last line (no
``\\n``) is skipped and remembered in :attr:`LogReader.torn`; any other line
that is not a JSON object raises :class:`LogReadError` with file and line.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import orjson

from controller import jsontext
from controller.jsontext import JsonTextError


class LogReadError(ValueError):
    """A log line that cannot be read as a record."""

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        self.path, self.line = path, line
        super().__init__(f"{path}: " + (f"line {line}: " if line else "") + message)


class LogRecord(NamedTuple):
    """One record read from a log, with where it was read (a tuple: a day's log is hundreds
    of thousands of them, and a frozen dataclass took a fifth of a replay to build)."""

    file: str
    line: int
    record: dict[str, Any]

    @property
    def kind(self) -> Any:
        return self.record.get("kind")

    @property
    def seq(self) -> Any:
        return self.record.get("seq")


#: how far long work has got: called with a phase ("verifying", "reading") and the bytes
#: read since the last call, once per run of lines read (about 48 KiB; a terminal progress
#: bar; the audit layer itself shows nothing)
Meter = Callable[[str, int], None]


class LogReader:
    """Iterate over the records of ``paths`` (in the order given)."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]], *,
                 meter: Meter | None = None) -> None:
        self.paths = [os.fspath(p) for p in paths]
        self.torn: list[tuple[str, int]] = []
        self.meter = meter

    def __iter__(self) -> Iterator[LogRecord]:
        # each file's runs of records, each run iterated in C: the generator below
        # resumes once a run (about 128 records), not once a record. (A chain a file: a
        # caller that goes on after one file's error gets the next file's records, as
        # when the files' records were chained one by one.)
        return itertools.chain.from_iterable(map(self._records, self.paths))

    def _records(self, path: str) -> Iterator[LogRecord]:
        return itertools.chain.from_iterable(self._file(path))

    def _file(self, path: str) -> Iterator[Iterable[LogRecord]]:
        """A file's records, a run at a time (a run read line by line: a record at a
        time, so that what came before a bad line is handed on before its error)."""
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed in finally (generator)
        except FileNotFoundError:
            raise LogReadError("no such file", path=path) from None
        except OSError as exc:
            raise LogReadError(f"cannot read: {exc.strerror or exc}", path=path) from None
        try:
            n = 0
            while True:
                lines = f.readlines(READ_BYTES)
                if not lines:
                    return
                if self.meter is not None:
                    self.meter("reading", sum(map(len, lines)))
                records = _whole_run(lines)
                if records is not None:  # the usual case: every line a sound record
                    yield map(_new_record, itertools.repeat(LogRecord),  # C, no __new__
                              zip(itertools.repeat(path), itertools.count(n + 1), records))
                    n += len(lines)
                    continue
                for raw in lines:  # one by one: the first bad line is named
                    n += 1
                    if not raw.endswith(b"\n"):
                        self.torn.append((path, n))
                        return
                    try:
                        obj = jsontext.loads(raw)
                    except JsonTextError as exc:
                        raise LogReadError(f"not a JSON record ({exc})", path=path,
                                           line=n) from None
                    if not isinstance(obj, dict):
                        raise LogReadError("not a JSON object", path=path, line=n)
                    yield (LogRecord(path, n, obj),)
        except OSError as exc:
            raise LogReadError(f"cannot read: {exc.strerror or exc}", path=path) from None
        finally:
            f.close()


_new_record = tuple.__new__

#: every byte but ``[``, ``{`` and the newline (deleted by :func:`_whole_run`)
_NOT_OPENING = bytes(range(256)).translate(None, b"[{\n")

#: a line with more than jsontext.MAX_DEPTH opening brackets, in a run of lines whose
#: every other byte was deleted (tried at line starts only: unanchored, a run of lines of
#: 64 brackets each took twenty times as long, tried at every byte — a review)
_TOO_DEEP = re.compile(rb"^[^\n]{%d}" % (jsontext.MAX_DEPTH + 1), re.MULTILINE)

#: what :class:`LogReader` reads at a time (about 128 records of a card log)
READ_BYTES = 48 << 10


def _whole_run(lines: list[bytes]) -> list[dict[str, Any]] | None:
    """The records of a run of whole lines decoded by one call (the lines, newlines kept,
    as one JSON array), or None when any line might not pass :func:`jsontext.loads` on its
    own — torn, not JSON, not an object, or holding more than :data:`jsontext.MAX_DEPTH`
    brackets — so that the caller reads that run line by line and names the bad one."""
    if not lines[-1].endswith(b"\n"):
        return None
    joined = b",".join(lines)
    # each line's opening brackets: the run with all but them and the newlines deleted
    # (one C pass, where two counts a line took twice as long), searched for a line of
    # more than MAX_DEPTH of them (cutting it at the newlines took as long as the pass)
    if _TOO_DEEP.search(joined.translate(None, _NOT_OPENING)) is not None:
        return None  # might nest too deep: jsontext.loads decides, line by line
    try:
        records = orjson.loads(b"[" + joined + b"]")
    except orjson.JSONDecodeError:
        return None
    if len(records) != len(lines) or set(map(type, records)) != {dict}:
        return None
    return records
