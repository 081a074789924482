"""Where text enters the controller: one decoder for every JSON line and payload.

Text reaches the table from four places — a device's frame payload, a dealer console
line, a line of an event stream (``shoewarden check``), a line of an audit log being
verified or recovered — and each goes through :func:`loads`. The decision is made here,
once: **text that is not valid Unicode is refused**, as is anything else no later step
could handle. A refused text is a protocol error (device), a bad line (stream, log) or a
refused command (console), reported where it came from; nothing past this boundary ever
sees it.

Refused, each with a :class:`JsonTextError` that says why:

- bytes that are not UTF-8, and a ``\\ud800``-style escape of a lone surrogate (a string
  that could never be written back as UTF-8: it would stop the audit writer);
- not JSON, or JSON with ``NaN``/``Infinity``;
- a number too large for a 64-bit float (``1e400``, an integer of thousands of digits);
  integers beyond 64 bits read as floats, which no field of an event accepts;
- nesting deeper than :data:`MAX_DEPTH` (no record or event nests more than a few
  levels; a deep one would exhaust the recursion of any code that walks it).

orjson is the decoder: it already refuses every one of these but the depth bound, and it
is several times faster than the standard library's ``json``.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 64
"""Deepest nesting accepted. Events and audit records nest at most four levels."""


class JsonTextError(ValueError):
    """Text refused at the boundary. ``why`` says what is wrong; ``column`` (1-based, in
    characters of the decoded line, when known) where."""

    def __init__(self, why: str, column: int | None = None) -> None:
        self.why = why
        self.column = column
        super().__init__(f"{why} (column {column})" if column else why)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode one JSON text, or raise :class:`JsonTextError`. Never raises anything else."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        column = e.colno if e.pos else None
        if not isinstance(data, str) and "not valid UTF-8" in e.msg:
            column = _bad_utf8_column(bytes(data))
        raise JsonTextError(_why(e.msg, isinstance(data, str)), column) from None
    except (TypeError, RecursionError, MemoryError) as e:  # pragma: no cover - defensive
        raise JsonTextError(f"not decodable: {type(e).__name__}") from None
    # Cheap bound first: depth can be no greater than the number of opening brackets.
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_DEPTH and raw.count(b"[") + raw.count(b"{") > MAX_DEPTH \
            and _depth(value) > MAX_DEPTH:
        raise JsonTextError(f"nested deeper than {MAX_DEPTH} levels")
    return value


def _bad_utf8_column(raw: bytes) -> int | None:
    """The 1-based column (in characters) of the first byte that is not UTF-8."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return len(raw[:e.start].decode("utf-8")) + 1
    return None


def _why(msg: str, text: bool) -> str:
    if "not valid UTF-8" in msg:
        return "not valid Unicode text: a lone surrogate" if text else "not UTF-8 text"
    if "surrogate" in msg:
        return "not valid Unicode text: an escaped lone surrogate"
    if "infinity" in msg:
        return "a number out of range"
    if "depth" in msg or "recursion" in msg.lower():
        return f"nested deeper than {MAX_DEPTH} levels"
    return f"not valid JSON: {msg}"


def _depth(value: Any) -> int:
    """The nesting depth of a decoded value, without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            items: Any = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        if level > deepest:
            deepest = level
            if deepest > MAX_DEPTH:
                return deepest
        stack.extend((child, level + 1) for child in items)
    return deepest
