"""Replay a log: re-run the engine on the logged inputs and compare every output with the log.

Each ``header`` starts a fresh session built from the header alone: the
profile it records (``profile_from_dict``) and its ``settings`` (which carry
what the engine was given, e.g. the sabot history). Each ``input`` record's
event is handed to the engine; the outputs the engine returns must be exactly
the ``output`` records that follow, in order, and every record's context
(table, shoe, round, state) must be the engine's. Other kinds (``recovery`` …)
are skipped. Any difference is reported with its ``seq``.

This module uses the engine; the chain core of :mod:`controller.audit` does not.
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from controller import __version__
from controller.audit.records import LogReader, LogRecord, Meter
from controller.events import EventError, parse_event
from controller.profiles import ProfileError, profile_from_dict
from controller.session import TableSession

CONTEXT = ("table", "shoe", "round", "state")

def _dict_at(obj: Any, key: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object, else an empty one (a record read from a log)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _list_at(obj: Any, key: str) -> list[Any]:
    """``obj[key]`` when it is an array, else an empty one (a record read from a log)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []



class ReplayError(ValueError):
    """The log cannot be replayed at all (no header, a header without a valid profile …)."""


@dataclass(frozen=True)
class Difference:
    """One place where the replay and the log disagree."""

    seq: int | None  # the record's seq (the input's seq for an output the log lacks)
    file: str
    line: int | None
    what: str
    logged: Any = None
    replayed: Any = None

    def __str__(self) -> str:
        where = f"seq {self.seq}" if self.seq is not None else "?"
        text = f"{where} ({os.path.basename(self.file)}:{self.line}): {self.what}"
        if self.logged is not None or self.replayed is not None:
            text += f"\n    logged:   {self.logged}\n    replayed: {self.replayed}"
        return text


@dataclass
class Replayer:
    """Feeds log records one at a time; keeps the session and the differences found.

    The outputs logged after an input are compared with the engine's outputs for
    it as two sequences (difflib), so an output missing from the log, or one
    the engine did not produce, is named once and the rest still line up.
    """

    session: TableSession | None = None
    differences: list[Difference] = field(default_factory=list)
    inputs: int = 0
    outputs: int = 0
    headers: int = 0
    notes: list[str] = field(default_factory=list)
    _input_rec: LogRecord | None = None
    _replayed: list[dict[str, Any]] = field(default_factory=list)
    _logged: list[tuple[LogRecord, Any]] = field(default_factory=list)
    #: the engine's context after the last input (what its outputs carry): table, shoe,
    #: round, state
    _after_key: tuple[Any, ...] | None = None

    def feed(self, rec: LogRecord) -> None:
        kind = rec.record.get("kind")
        if kind == "header":
            self._flush()
            self._start(rec)
        elif kind == "input":
            self._flush()
            self._input(rec)
        elif kind == "output":
            self._output(rec)

    def finish(self) -> None:
        self._flush()

    def take_missing_tail(self) -> list[dict[str, Any]]:
        """Outputs of the last input that the log lacks at its end (crash recovery).

        Only when the logged outputs are exactly the first ones the engine gave;
        they are then no longer reported as differences.
        """
        logged = [out for _, out in self._logged]
        if self._input_rec is None or logged != self._replayed[: len(logged)]:
            return []
        missing = self._replayed[len(logged):]
        self._replayed = self._replayed[: len(logged)]
        return missing

    def _start(self, rec: LogRecord) -> None:
        r = rec.record
        profile_raw = r.get("profile")
        if not isinstance(profile_raw, dict):
            got = "" if profile_raw is None else \
                f": its profile is not a table of rules (got {str(profile_raw)[:60]!r})"
            raise ReplayError(f"{rec.file}: line {rec.line}: the header has no profile{got}")
        try:
            profile = profile_from_dict(profile_raw, f"header at seq {r.get('seq')}")
        except ProfileError as exc:
            raise ReplayError(f"{rec.file}: line {rec.line}: the header's profile: {exc}") from None
        settings = _dict_at(r, "settings")
        try:
            self.session = TableSession(profile, None, dict(settings))
        except (TypeError, ValueError) as exc:
            raise ReplayError(f"{rec.file}: line {rec.line}: the header's settings: {exc}") \
                from None
        self.session.start(r.get("table"))
        self.headers += 1
        self._input_rec = None
        self._after_key = None
        software = r.get("software")
        if isinstance(software, dict) and software.get("version") != __version__:
            self.notes.append(f"{os.path.basename(rec.file)}:{rec.line}: the log was written by "
                              f"version {software.get('version')}; replayed with {__version__}")

    def _context_check(self, rec: LogRecord, what: str,
                       expected: dict[str, Any] | None = None) -> None:
        """Record a difference where the logged context is not ``expected`` (the engine's
        context now, by default). The callers first compare :func:`_logged_key` with
        :attr:`_after_key`, the usual case, without building a dict."""
        assert self.session is not None
        if expected is None:
            expected = self.session.engine.context()
        r = rec.record
        logged = {k: r.get(k) for k in CONTEXT}
        if logged != expected:
            self.differences.append(Difference(rec.seq, rec.file, rec.line,
                                               f"the context {what} differs", logged, expected))

    def _input(self, rec: LogRecord) -> None:
        if self.session is None:
            raise ReplayError(f"{rec.file}: line {rec.line}: an input before any header "
                              "(the profile is unknown)")
        if self._after_key is None or _logged_key(rec.record) != self._after_key:
            # (the engine has not moved since its last input: the context it left then)
            self._context_check(rec, "before the input")
        self.inputs += 1
        self._input_rec = rec
        try:
            event = parse_event(rec.record.get("event"))
        except EventError as exc:
            self.differences.append(Difference(rec.seq, rec.file, rec.line,
                                               f"the logged event does not parse ({exc})",
                                               rec.record.get("event")))
            return
        outputs = self.session.feed(event, line=rec.record.get("line"))
        self._replayed = [o.to_record() for o in outputs] if outputs else []
        self._after_key = self.session.engine.context_key()

    def _output(self, rec: LogRecord) -> None:
        self.outputs += 1
        r = rec.record
        self._logged.append((rec, r.get("output")))
        if self.session is not None and _logged_key(r) != self._after_key:
            # names the difference: the engine's context now is the one it left after the
            # last input (no input is fed between an input and its outputs)
            self._context_check(rec, "of the output")

    def _flush(self) -> None:
        logged, replayed = self._logged, self._replayed
        if not logged and not replayed:  # (a card's input: no outputs either side)
            return
        self._logged, self._replayed = [], []
        if len(logged) == len(replayed) and list(map(_OUTPUT, logged)) == replayed:
            return  # the usual case: the same outputs (no encoding, no diff)
        anchor = self._input_rec
        first_new = len(self.differences)
        a = [_key(out) for _, out in logged]
        b = [_key(out) for out in replayed]
        if a == b:
            return
        for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if op == "equal":
                continue
            pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
            for k in range(pairs):
                rec, out = logged[i1 + k]
                self.differences.append(Difference(rec.seq, rec.file, rec.line,
                                                   "the output differs", out, replayed[j1 + k]))
            for rec, out in logged[i1 + pairs:i2]:
                self.differences.append(Difference(
                    rec.seq, rec.file, rec.line,
                    "the log has an output the engine did not produce here", out, None))
            for out in replayed[j1 + pairs:j2]:
                self.differences.append(Difference(
                    anchor.seq if anchor else None, anchor.file if anchor else "?",
                    anchor.line if anchor else None,
                    "the engine produced an output the log does not have (after this input)",
                    None, out))
        self.differences[first_new:] = sorted(self.differences[first_new:],
                                              key=lambda d: (d.file, d.line or 0))


_OUTPUT = operator.itemgetter(1)  # a logged (record, output) pair's output


def _logged_key(record: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
    """A record's (or the engine's) context as one tuple: table, shoe, round, state (None
    for a key it lacks). Every record and the engine's context hold all four (compiled,
    four look-ups are C; an ``itemgetter`` would be a call through Python)."""
    try:
        return record["table"], record["shoe"], record["round"], record["state"]
    except KeyError:
        return record.get("table"), record.get("shoe"), record.get("round"), record.get("state")



def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


@dataclass
class ReplayResult:
    inputs: int
    outputs: int
    headers: int
    differences: list[Difference]
    torn: list[tuple[str, int]]
    notes: list[str]
    session: TableSession | None

    @property
    def identical(self) -> bool:
        return not self.differences


def _follows(last: LogRecord, first: LogRecord, differences: list[Difference]) -> None:
    """A difference unless ``first`` (a file's first record) goes on from ``last`` (the
    file before's last) or starts a chain of its own."""
    if last.record.get("table") != first.record.get("table"):
        return  # another table's log: its own chain (a review: called records missing)
    seq, end = first.record.get("seq"), last.record.get("seq")
    if type(end) is int and seq != end + 1 and not _new_chain(first):
        differences.append(Difference(
            seq if type(seq) is int else None, first.file, first.line,
            f"the file begins at seq {seq}, the file before it "
            f"({os.path.basename(last.file)}) ended at seq {end}: records or files are "
            "missing, moved or out of order (audit verify names the damage)"))


def _new_chain(rec: LogRecord) -> bool:
    """A file's first record that starts a chain of its own (``chain.new_chain``, its seq
    from 1 again)."""
    chain = rec.record.get("chain")
    return isinstance(chain, dict) and "new_chain" in chain


def replay(paths: Iterable[str | os.PathLike[str]], *,
           meter: Meter | None = None) -> ReplayResult:
    """Replay the logs (in order) and compare; raises ReplayError / LogReadError if unreadable."""
    reader = LogReader(paths, meter=meter)
    replayer = Replayer()
    # Where one file of the set ends and the next begins, the next must go on from the
    # seq the last ended at: each file's header starts a session of its own, so a day
    # deleted, two days swapped or a day's last record cut replayed "identical" (a
    # review). Within a file the outputs compared already catch a record missing.
    before: LogRecord | None = None  # the record read before this one
    feed = replayer.feed
    for rec in reader:
        if before is not None and rec.file != before.file:
            _follows(before, rec, replayer.differences)
        feed(rec)
        before = rec
    replayer.finish()
    if replayer.headers == 0:
        raise ReplayError("no header record: nothing to replay")
    notes = list(replayer.notes)
    given = reader.paths
    for path, line in reader.torn:
        if given and path != given[-1]:  # only the set's last file can end in a crash
            replayer.differences.append(Difference(
                None, path, line, "a torn line in a file that a later file follows: damage, "
                "not a crash (audit verify names it)"))
        else:
            notes.append(f"{path}: line {line}: torn last line ignored")
    return ReplayResult(replayer.inputs, replayer.outputs, replayer.headers,
                        replayer.differences, reader.torn, notes, replayer.session)
