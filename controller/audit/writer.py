"""The audit log as the engine runner sees it: :class:`AuditLog`.

It stands in front of the chain's writer (:class:`~controller.audit.chain.HashChainWriter`,
which seals, writes and fsyncs under one lock) and adds what a table needs around it:
the record kinds (``header``, ``input``, ``output``, any other ``kind``), the context every
record carries (table, shoe, round, state), and the anchors (the head published at every
round end, shoe end, table close, open and close; docs/audit-log.md).

Two ways to write:

* the dict methods (``header``, ``input``, ``output``, ``write``) check what they are
  given (context keys and types, float-free JSON) and go through a structlog bound
  logger over the writer (:func:`structlog.wrap_logger`; structlog's global
  configuration is never touched), so ad-hoc records — headers, recovery notes, device
  notes — can be processed like any structlog event;
* the card path, :meth:`AuditLog.input_event` and :meth:`AuditLog.outputs`, takes the
  typed values themselves (an input event, the engine's outputs) and hands their parts to
  :meth:`~controller.audit.chain.HashChainWriter.append`: one encoding, no check walk, no
  structlog pass (which only passed the record through, at a tenth of its cost), and the
  outputs of one input in one write (docs/architecture.md, "The audit writer").

The log knows no devices and no engine: what it writes are dicts and values that can
say themselves as dicts (``to_record()``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, MutableMapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, cast

import orjson

from controller.audit.anchors import Anchor, AnchorFileError
from controller.audit.canonical import canonical_bytes
from controller.audit.chain import (
    DURABILITY_POLICIES,
    FSYNC_KINDS,
    ContextKey,
    Durability,
    HashChainWriter,
    check_durability,
)
from controller.audit.errors import AuditLogError
from controller.audit.opening import TornCut, find_torn_tail
from controller.audit.timestamps import Clock, format_ts
from controller.audit.verify import ChainStart

if TYPE_CHECKING:
    from controller.audit.anchors import AnchorSink

__all__ = [
    "ANCHOR_STATES",
    "CONTEXT_KEYS",
    "DURABILITY_POLICIES",
    "FSYNC_KINDS",
    "AuditLog",
    "AuditLogError",
    "Clock",
    "Durability",
    "HashChainWriter",
    "Recordable",
    "TornCut",
    "check_durability",
    "find_torn_tail",
    "format_ts",
]

CONTEXT_KEYS = ("table", "shoe", "round", "state")
"""The context every record carries (``null`` where it does not apply)."""

ANCHOR_STATES = {"shoe_complete": "shoe_end", "closed": "table_close"}
"""A ``transition`` output into one of these states makes :class:`AuditLog` anchor its head
(the value is the anchor's ``reason``). So does the end of every round (reason
``round_end``, the round's ``note``): a cut of a live table's log can then take at most the
round in progress with it unnoticed — anchors cost one small fsynced line per round."""


class Recordable(Protocol):
    """A typed value the log can write: an input event or an engine output."""

    def to_record(self) -> dict[str, Any]: ...


_SORTED = orjson.OPT_SORT_KEYS
_dumps = orjson.dumps


def _key_of(context: ContextKey | Mapping[str, Any]) -> ContextKey:
    """A record's context as the card path's tuple (table, shoe, round, state)."""
    if type(context) is tuple:
        return context
    m = cast(Mapping[str, Any], context)
    return m["table"], m["shoe"], m["round"], m["state"]


def _encoded(value: Recordable) -> bytes:
    """A typed value's canonical encoding (orjson, sorted keys: the stdlib's bytes for
    everything a record holds; an integer beyond 64 bits goes to the stdlib)."""
    try:
        return _dumps(value.to_record(), option=_SORTED)
    except (orjson.JSONEncodeError, TypeError):
        return canonical_bytes(value.to_record())


class _Bound(Protocol):
    def record(self, fields: Mapping[str, Any]) -> dict[str, Any]: ...


@functools.cache
def _chain_logger() -> type:
    """The bound logger class with one method, ``record``, that runs the processors and
    calls ``msg``. It passes the fields as a dict (not as keyword arguments of a structlog
    method), so a payload key named ``event`` is an ordinary field.

    Built when the first log is opened: importing structlog takes 150 ms (its ``dev``
    module pulls in rich), which a command that writes no log (``check`` without
    ``--log``, the audit tools, ``--help``) need not pay."""
    import structlog

    class _ChainLogger(structlog.BoundLoggerBase):
        def record(self, fields: Mapping[str, Any]) -> dict[str, Any]:
            args, kw = self._process_event("msg", None, dict(fields))
            return self._logger.msg(*args, **kw)

    return _ChainLogger


def _as_kwargs(_logger: Any, _method: str,
               event_dict: MutableMapping[str, Any]) -> Mapping[str, Any]:
    """Last processor: hand the event dict over as ``**kwargs`` to ``HashChainWriter.msg``."""
    return event_dict


_MISSING = object()
_CONTEXT_TYPES = {"table": str, "state": str, "shoe": int, "round": int}


def _context_fields(context: Mapping[str, Any], *, require_all: bool) -> dict[str, Any]:
    if type(context) is dict and len(context) == len(CONTEXT_KEYS):
        out = {k: context.get(k, _MISSING) for k in CONTEXT_KEYS}
        if all(v is None or type(v) is _CONTEXT_TYPES[k] for k, v in out.items()):
            return out  # the engine's context(), as every input and output has it
    if not isinstance(context, Mapping):
        raise TypeError(f"context must be a mapping, got {type(context).__name__}")
    unknown = set(context) - set(CONTEXT_KEYS)
    if unknown:
        raise ValueError(
            f"unknown context key(s) {sorted(unknown)}; allowed: {', '.join(CONTEXT_KEYS)}"
        )
    if require_all:
        missing = [k for k in CONTEXT_KEYS if k not in context]
        if missing:
            raise ValueError(f"context is missing {missing}")
    out = {k: context.get(k) for k in CONTEXT_KEYS}
    for key in ("table", "state"):
        if out[key] is not None and not isinstance(out[key], str):
            raise TypeError(f"context {key!r} must be a str or None, got {out[key]!r}")
    for key in ("shoe", "round"):
        if out[key] is not None and type(out[key]) is not int:
            raise TypeError(f"context {key!r} must be an int or None, got {out[key]!r}")
    return out


class AuditLog:
    """The audit log as the engine runner sees it. Thread-safe; a context manager.

    Every dict method returns the sealed record it wrote (``seq``, ``ts``, ``prev`` and
    ``hash`` included); the card path's methods return nothing.
    """

    def __init__(self, writer: HashChainWriter, *, anchors: AnchorSink | None = None,
                 table: str | None = None) -> None:
        self._writer = writer
        self._anchors = anchors
        self._table = table
        #: anchors that could not be written (disk full, permissions …), in all
        self.anchor_failures = 0
        self._anchor_trouble: list[str] = []  # failures not yet taken (one per failing spell)
        self._anchors_failing = False
        self._encoded_outputs: dict[int, tuple[Recordable, bytes]] = {}
        import structlog

        self._log = structlog.wrap_logger(
            writer,
            processors=[_as_kwargs],
            wrapper_class=_chain_logger(),
            context_class=dict,
            cache_logger_on_first_use=False,
        )
        # bound once: the lazy proxy binds anew on every call (11% of a record's cost)
        self._bound: _Bound = self._log.bind()

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: str = "input",
        clock: Clock | None = None,
        key: bytes | None = None,
        anchors: AnchorSink | None = None,
        table: str | None = None,
        start: ChainStart | None = None,
        chain: Mapping[str, Any] | None = None,
        verify: bool = True,
        repair_torn: bool = False,
    ) -> AuditLog:
        """Open (create, or append to and continue the chain of) the log file at ``path``.

        The options are :meth:`HashChainWriter.open`'s, plus ``anchors`` (where
        the head is published: at open, shoe end, table close and close) and
        ``table`` (the table named in the anchors until a record names one).
        """
        anchored: list[Anchor] = []
        unread = None
        if anchors is not None and os.path.exists(path):  # (what they recorded of the
            # file: its tail is checked before it is continued; a new file has none)
            try:
                anchored = anchors.recorded(os.path.basename(os.fspath(path)))
            except AnchorFileError as exc:  # (the log is the evidence: it is not stopped)
                unread = (f"the anchor file could not be read to check this log's tail "
                          f"before continuing it: {exc}")
        writer = HashChainWriter.open(path, durability=durability, clock=clock, key=key,
                                      start=start, chain=chain, verify=verify,
                                      repair_torn=repair_torn, anchored=anchored)
        log = cls(writer, anchors=anchors, table=table)
        if unread is not None:
            log._anchor_trouble.append(unread)
        try:
            log.anchor("open")
        except BaseException:
            writer.close()
            raise
        return log

    @classmethod
    def to_stream(cls, stream: Any, clock: Clock | None = None) -> AuditLog:
        """A log on a text stream such as ``io.StringIO`` (tests): a new chain, no fsync."""
        return cls(HashChainWriter.to_stream(stream, clock=clock))

    @property
    def head(self) -> tuple[int, str]:
        """(last seq, last hash); (0, GENESIS) for an empty log."""
        return self._writer.head

    @property
    def writer(self) -> HashChainWriter:
        return self._writer

    @property
    def anchors(self) -> AnchorSink | None:
        return self._anchors

    @property
    def table(self) -> str | None:
        """The table of the last record that named one (or the one given at open)."""
        return self._table

    def anchor(self, reason: str) -> dict[str, Any] | None:
        """Publish the current head (seq, hash) to the anchor sink, if there is one.

        An anchor that cannot be written never stops the log (the log is the evidence; the
        anchor only guards its tail): it returns None, is counted in
        :attr:`anchor_failures`, and the first failure of a spell waits in
        :meth:`take_anchor_trouble` for the session to feed as an input, so the log says
        so and the pit is alerted."""
        if self._anchors is None:
            return None
        # an anchor never names a record that is not in the file yet — on the disk: a
        # record only written (an output, under the 'input' policy, anything under 'none')
        # may be lost to a power cut and written again by recovery with another hash, and
        # the anchor would then call a true log rewritten, or the restart refuse a log
        # whose anchors name records the power cut took (a review). One fsync an anchor
        # (a round end), whatever the policy
        self._writer.sync()
        seq, head = self._writer.head
        try:
            record = self._anchors.write(table=self._table, file=self._writer.name, seq=seq,
                                         hash=head, reason=reason,
                                         ts=format_ts(self._writer.clock()))
        except OSError as exc:
            self.anchor_failures += 1
            if not self._anchors_failing:
                self._anchor_trouble.append(
                    f"the {reason} anchor (seq {seq}) could not be written to "
                    f"{self._anchors.path or 'syslog'}: {exc.strerror or exc}")
            self._anchors_failing = True
            return None
        self._anchors_failing = False
        return record

    def take_anchor_trouble(self) -> list[str]:
        """Anchor failures not yet reported (at most one per spell of failures)."""
        trouble, self._anchor_trouble = self._anchor_trouble, []
        return trouble

    @property
    def logger(self) -> Any:
        """The structlog bound logger (lazy proxy) every record goes through."""
        return self._log

    def header(
        self,
        *,
        software: Mapping[str, Any],
        table: str | None,
        profile: Mapping[str, Any],
        settings: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Write a ``header`` record: software {name, version}, table, full profile, settings."""
        if not isinstance(software, Mapping) or not {"name", "version"} <= set(software):
            raise ValueError(f"software must be a dict with 'name' and 'version', got {software!r}")
        ctx = _context_fields({"table": table}, require_all=False)
        return self._emit(
            "header",
            ctx,
            {"software": dict(software), "profile": dict(profile), "settings": dict(settings)},
        )

    def input(
        self, event: Mapping[str, Any], *, line: int | None, context: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Write an ``input`` record: the event's canonical dict and its source line (if any)."""
        payload: dict[str, Any] = {"event": dict(event)}
        if line is not None:
            if type(line) is not int:
                raise TypeError(f"line must be an int or None, got {line!r}")
            payload["line"] = line
        return self._emit("input", _context_fields(context, require_all=True), payload)

    def output(self, output: Mapping[str, Any], *, context: Mapping[str, Any]) -> dict[str, Any]:
        """Write an ``output`` record (state change, prompt, deviation …).

        A transition into ``shoe_complete`` or ``closed`` then anchors the head
        (reasons ``shoe_end`` and ``table_close``) when there is an anchor sink.
        """
        record = self._emit(
            "output", _context_fields(context, require_all=True), {"output": dict(output)}
        )
        if self._anchors is not None:
            reason = self._anchor_reason(output)
            if reason is not None:
                self.anchor(reason)
        return record

    def input_event(self, event: Recordable, *, line: int | None,
                    context: ContextKey | Mapping[str, Any]) -> None:
        """The card path's ``input`` record: ``event`` is a typed input event and
        ``context`` the engine's own (``TableEngine.context_key()``, or as a dict with every
        key present). Fsynced at once under the ``input`` and ``every`` policies
        (write-ahead)."""
        key = _key_of(context)
        self._writer.append_input(_encoded(event), key, line)
        if key[0] is not None:
            self._table = key[0]

    def outputs(self, outputs: Sequence[Recordable], *,
                context: ContextKey | Mapping[str, Any]) -> None:
        """The card path's ``output`` records, one per output of one input, written together
        (one write; one fsync each under ``every``), each anchor right after the record that
        calls for it."""
        if not outputs:
            return
        writer = self._writer
        key = _key_of(context)
        if key[0] is not None:
            self._table = key[0]
        flush = writer.durability is not Durability.NONE
        if self._anchors is None:
            writer.append_outputs([self._output_bytes(o) for o in outputs], key, flush=flush)
            return
        for output in outputs:
            record = output.to_record()
            writer.append_outputs((_encoded(output),), key)
            reason = self._anchor_reason(record)
            if reason is not None:
                self.anchor(reason)  # its head is this record (anchor() flushes)
        if flush:
            writer.flush()

    def _output_bytes(self, output: Recordable) -> bytes:
        """An output's canonical encoding; the frequent ones are encoded once and kept.

        The engine makes one object per move and per prompt, never changed, and marks
        their types ``interned`` (``controller.outputs``): they are kept by identity (an
        equality look-up went through the dataclasses' Python ``__hash__`` and ``__eq__``
        and cost more than it saved). Each entry holds its object, so an id is never
        reused while it is cached. Notes and deviations, made anew and holding dicts, are
        encoded each time."""
        cache = self._encoded_outputs
        kept = cache.get(id(output))
        if kept is not None and kept[0] is output:
            return kept[1]
        encoded = _encoded(output)
        if getattr(output, "interned", False):
            if len(cache) >= 4096:
                cache.clear()
            cache[id(output)] = (output, encoded)
        return encoded

    @staticmethod
    def _anchor_reason(output: Mapping[str, Any]) -> str | None:
        kind = output.get("type")
        if kind == "transition":
            return ANCHOR_STATES.get(output.get("to"))  # type: ignore[arg-type]
        if kind == "note" and output.get("kind") == "round":
            return "round_end"
        return None

    def flush(self) -> None:
        """Write what the card path left waiting (``none`` policy); no fsync."""
        self._writer.flush()

    def write(self, kind: str, context: Mapping[str, Any], /, **payload: Any) -> dict[str, Any]:
        """Write a record of any ``kind``; context keys left out are written as null."""
        return self._emit(kind, _context_fields(context, require_all=False), payload)

    def _emit(
        self, kind: str, context: dict[str, Any], payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        clash = (set(CONTEXT_KEYS) | {"kind"}).intersection(payload)
        if clash:
            raise ValueError(f"payload keys {sorted(clash)} clash with the record's own fields")
        fields = {"kind": kind, **context, **payload}
        record = self._bound.record(fields)
        if context.get("table") is not None:
            self._table = context["table"]
        return record

    def sync(self) -> None:
        """fsync now, whatever the durability policy."""
        self._writer.sync()

    def close(self) -> None:
        """fsync (unless durability is ``none``), close the file and anchor its head; idempotent."""
        if self._writer.closed:
            return
        self._writer.close()
        if not self._writer.broken:
            self.anchor("close")

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
