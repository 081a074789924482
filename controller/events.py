"""Input events: the only way anything reaches the procedure engine.

Each event is a frozen dataclass parsed from one JSON object (one line of a
JSON Lines stream, a device driver, or the dealer console). Parsing is strict:
an unknown ``type``, a missing or ill-typed field, or a bad card raises
:class:`EventError`, which names the field, so ``shoewarden check`` can report
``line N: field: what is wrong`` and go on with the next line.

Every event may carry ``t``, an ISO-8601 UTC time stamp. Time reaches the
engine only this way: the engine never reads a clock (docs/architecture.md).

``to_record()`` gives the canonical dict that the audit log stores and that
``parse_event`` reads back, so a log replays to the same decisions. A
``deck_check`` is stored with its cards sorted: the composition is all the
rules need, and a sorted list can never reveal the order of a shuffled pack
(the log never holds a card before it left the shoe).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Final, Literal, get_type_hints

from controller.cards import Card, CardError, parse_card
from controller.validation import (
    Checker,
    Invalid,
    check_choice,
    checker,
    choices,
    printable,
    show,
)


class EventError(Invalid):
    """A malformed input event. ``field`` names the offending key ('' for the whole object)."""


MAX_DECKS = 24  # no game uses more than 8; a bigger number is a typo, not a pack
MAX_SEATS = 64
"""Most boxes or players a table can have (the largest layout seats 7–9); a bigger number
is a typo, and would make the engine lay out that many hands."""
MAX_CHECK_CARDS = 1_040
"""Most cards one deck check may list (20 packs; the drivers hold a check to the same)."""
MAX_TEXT = 1_000
"""Longest text any field accepts (names, details, ports, tokens)."""
MAX_DEPTH = 8
"""Deepest nesting of an event (a deck lot inside a list inside the event is 3)."""


def _within(lo: int, hi: int | None = None, **kw: Any) -> Any:
    """A count field's range (the parser checks it; see :mod:`controller.validation`)."""
    return field(metadata={"lo": lo, "hi": hi}, **kw)


def _parsed_by(check: Checker, **kw: Any) -> Any:
    """A field whose JSON form is not its type (a card token, a list of lots): ``check``
    turns the one into the other, or raises :class:`~controller.validation.Invalid`."""
    return field(metadata={"check": check}, **kw)


LotKind = Literal["paper", "plastic"]
ActionName = Literal["stand", "double", "split", "surrender", "accept", "decline"]
ACTIONS: tuple[str, ...] = choices(ActionName)


@dataclass(frozen=True, slots=True)
class DeckLot:
    """A lot of decks in use at the table (000 §1, 001 BP §1): its id, material and first use."""

    id: str
    kind: LotKind
    first_use: dt.date

    def to_record(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "first_use": self.first_use.isoformat()}


# ------------------------------------------------------- fields whose JSON form is not their type


def _card(where: str, value: Any) -> Card:
    try:
        return parse_card(value)
    except CardError as e:
        raise Invalid(where, str(e)) from None


def _name(where: str, value: Any) -> str:
    """A table or a dealer: its name, or a number standing for it."""
    if type(value) is int:
        return str(value)
    if isinstance(value, str) and value:
        return value
    raise Invalid(where, "missing" if value is None else f"bad {where} {show(value)}")


def _as_text(where: str, value: Any) -> str:
    """A sabot: any JSON value, kept as text (it is only ever compared)."""
    return str(value)


def _action(where: str, value: Any) -> str:
    try:
        return check_choice(where, value, ActionName)
    except Invalid as e:
        if isinstance(value, str) and value.strip():
            raise Invalid(where, f"unknown action: {e.why}") from None
        raise


def _boxes(where: str, boxes: Any) -> tuple[int, ...]:
    if not isinstance(boxes, list) or len(boxes) > MAX_SEATS or not all(
        type(b) is int and 1 <= b <= MAX_SEATS for b in boxes
    ):
        raise Invalid(where, f"expected a list of box numbers 1–{MAX_SEATS}, "
                             f"got {str(boxes)[:60]}")
    return tuple(boxes)


def _lots(where: str, raw: Any) -> tuple[DeckLot, ...]:
    if not isinstance(raw, list):
        raise Invalid(where, "expected a list of {id, kind, first_use}")
    lots = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise Invalid(at, "expected an object {id, kind, first_use}")
        unknown = set(item) - {"id", "kind", "first_use"}
        if unknown:
            raise Invalid(f"{at}.{sorted(unknown)[0]}", "unknown key")
        lot_id = item.get("id")
        if not isinstance(lot_id, str | int) or isinstance(lot_id, bool) or lot_id == "":
            raise Invalid(f"{at}.id", f"expected a lot id, got {show(lot_id)}")
        kind = check_choice(f"{at}.kind", item.get("kind"), LotKind)
        first = item.get("first_use")
        try:
            first_use = dt.date.fromisoformat(first) if isinstance(first, str) else None
        except ValueError:
            first_use = None
        if first_use is None:
            raise Invalid(f"{at}.first_use", f"expected a date YYYY-MM-DD, got {show(first)}")
        lots.append(DeckLot(str(lot_id), kind, first_use))
    return tuple(lots)


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every input event."""

    type: ClassVar[str] = ""
    t: str | None = field(default=None, kw_only=True)

    @property
    def time(self) -> dt.datetime | None:
        return parse_time(self.t) if self.t else None

    @property
    def local_date(self) -> dt.date | None:
        """The calendar day of this event's time where it was written (at its own UTC
        offset; a time in ``Z``, or naive, names a UTC day). A deck lot's first use is such
        a day: a table opening at 01:30 in Athens opens on that day, not on the UTC day
        before it."""
        return written_date(self.t) if self.t else None

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for name in _field_names(type(self)):
            value = getattr(self, name)
            if value is None:
                continue
            out[name] = _to_json(value)
        return out


_RECORD_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type[Event]) -> tuple[str, ...]:
    """An event type's field names, read once (``dataclasses.fields`` builds its tuple on
    every call: the better part of logging a ``bets_closed``)."""
    names = _RECORD_FIELDS.get(cls)
    if names is None:
        names = _RECORD_FIELDS[cls] = tuple(f.name for f in fields(cls))
    return names


def _to_json(value: Any) -> Any:
    if isinstance(value, Card):
        return str(value)
    if isinstance(value, DeckLot):
        return value.to_record()
    if isinstance(value, tuple):
        return [_to_json(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class TableOpen(Event):
    type: ClassVar[str] = "table_open"
    table: str = _parsed_by(_name)
    decks: int = _within(1, MAX_DECKS)
    sabot: str | None = _parsed_by(_as_text, default=None)
    deck_lots: tuple[DeckLot, ...] | None = _parsed_by(_lots, default=None)


@dataclass(frozen=True, slots=True)
class DeckCheck(Event):
    """A full read of the pack. ``cards`` holds parsed cards; ``foreign`` the tokens that are
    not one of the 52 (a joker, another game's card), kept so the deviation can name them."""

    type: ClassVar[str] = "deck_check"
    cards: tuple[Card, ...]
    foreign: tuple[str, ...] = ()
    deck_lots: tuple[DeckLot, ...] | None = _parsed_by(_lots, default=None)

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "cards": sorted(str(c) for c in self.cards)}
        out["cards"] += sorted(self.foreign)
        if self.deck_lots is not None:
            out["deck_lots"] = [lot.to_record() for lot in self.deck_lots]
        if self.t is not None:
            out["t"] = self.t
        return out


@dataclass(frozen=True, slots=True)
class Shuffle(Event):
    type: ClassVar[str] = "shuffle"


@dataclass(frozen=True, slots=True)
class Cut(Event):
    type: ClassVar[str] = "cut"
    offset: int


@dataclass(frozen=True, slots=True)
class CutCardPlaced(Event):
    type: ClassVar[str] = "cut_card_placed"
    behind: int | None = None


@dataclass(frozen=True, slots=True)
class ShoeLoaded(Event):
    type: ClassVar[str] = "shoe_loaded"


@dataclass(frozen=True, slots=True)
class BetsClosed(Event):
    type: ClassVar[str] = "bets_closed"
    boxes: tuple[int, ...] | None = _parsed_by(_boxes, default=None)
    players: int | None = _within(1, MAX_SEATS, default=None)


DISCARD_NAMES = frozenset({"discard", "burn"})
"""A card's ``to`` (stripped, lower case) that names no hand: it went to the discard holder."""


@dataclass(frozen=True, slots=True)
class CardDrawn(Event):
    """A card left the shoe / shuffler and was read (``type`` ``card``)."""

    type: ClassVar[str] = "card"
    card: Card = _parsed_by(_card)
    exposed: bool = False
    unrequested: bool = False  # came out though no one asked (000 §7: offered to the next players)
    to: str | None = None  # where the card went, when the table knows (e.g. stud "P3", "dealer")

    @property
    def to_a_hand(self) -> bool:
        """``to`` names a hand, not the discard holder (:data:`DISCARD_NAMES`, any case)."""
        return self.to is not None and self.to.strip().lower() not in DISCARD_NAMES

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "card": str(self.card)}
        if self.exposed:
            out["exposed"] = True
        if self.unrequested:
            out["unrequested"] = True
        if self.to is not None:
            out["to"] = self.to
        if self.t is not None:
            out["t"] = self.t
        return out


@dataclass(frozen=True, slots=True)
class CutCardSeen(Event):
    """The shoe reader saw the cut card come out (``type`` ``cut_card``)."""

    type: ClassVar[str] = "cut_card"


@dataclass(frozen=True, slots=True)
class Action(Event):
    type: ClassVar[str] = "action"
    action: ActionName = _parsed_by(_action)


@dataclass(frozen=True, slots=True)
class StubCount(Event):
    type: ClassVar[str] = "stub_count"
    count: int


@dataclass(frozen=True, slots=True)
class RoundEnd(Event):
    type: ClassVar[str] = "round_end"


@dataclass(frozen=True, slots=True)
class DiscardsReturned(Event):
    type: ClassVar[str] = "discards_returned"
    count: int


@dataclass(frozen=True, slots=True)
class DealerChange(Event):
    type: ClassVar[str] = "dealer_change"
    dealer: str = _parsed_by(_name)


@dataclass(frozen=True, slots=True)
class PlayersLeft(Event):
    type: ClassVar[str] = "players_left"


@dataclass(frozen=True, slots=True)
class CardReplaced(Event):
    type: ClassVar[str] = "card_replaced"
    card: Card = _parsed_by(_card)


@dataclass(frozen=True, slots=True)
class DeviceFault(Event):
    type: ClassVar[str] = "device_fault"
    device: str
    code: str
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceOk(Event):
    type: ClassVar[str] = "device_ok"
    device: str
    code: str
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class TableClose(Event):
    type: ClassVar[str] = "table_close"


@dataclass(frozen=True, slots=True)
class DeviceConnected(Event):
    """A device was identified on a port (the runtime records it; the engine notes it).

    ``driver`` is the driver's registered name, ``port`` the port it was opened on (a pty's
    ``/dev/pts/N``, ``/dev/ttyUSB0``, a USB id), the rest the identity it reported.
    """

    type: ClassVar[str] = "device_connected"
    device: str
    driver: str | None = None
    port: str | None = None
    kind: str | None = None
    model: str | None = None
    serial: str | None = None
    firmware: str | None = None
    firmware_hash: str | None = None


AUDIT_DEVICE = "audit"
"""The device name under which the audit log reports on itself (its anchors)."""
ANCHOR_WRITE_FAILED: Final = "ANCHOR_WRITE_FAILED"
"""A ``device_diagnostic`` code: an anchor of the log could not be written."""


@dataclass(frozen=True, slots=True)
class DeviceDiagnostic(Event):
    """A driver's diagnostic (``type`` ``device_diagnostic``): malformed traffic
    (``PROTOCOL_ERROR``, with ``count`` this occurrence and ``total`` on the device), a refused
    identity (``DEVICE_IDENTITY``), a refused command (``NAK``), a driver bug caught
    (``DRIVER_ERROR``). Logged as an input so a replay reproduces the deviation it raises.

    One type from the driver to the log: a driver makes it (``DeviceDriver.diagnostic``), the
    runtime hands it on, the audit writer serialises it (``to_record``)."""

    type: ClassVar[str] = "device_diagnostic"
    device: str
    code: str
    kind: str | None = None
    count: int | None = None
    total: int | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class WitnessCheckpoint(Event):
    """The latest checkpoint of this table's chain that the floor signed as a witness
    (``shoewarden.witness.<table>``, docs/audit-log.md), recorded in the table's own log
    as it was received: the chain's ``table``, ``file``, ``chain_seq`` and ``chain_hash``,
    the floor's time ``signed_at``, its key id ``key`` and Ed25519 signature ``sig``.

    An input like any other (so a replay reproduces the log) that no procedure rule looks
    at: the engine notes nothing and moves nowhere. The table does not judge it either; the
    signature is checked by whoever verifies the log against the floor's public key."""

    type: ClassVar[str] = "witness_checkpoint"
    table: str
    file: str
    chain_hash: str
    signed_at: str
    key: str
    sig: str
    chain_seq: int = _within(1)


DEVICE_INFO_EVENTS = frozenset({"device_connected", "device_diagnostic"})
"""Events about the devices themselves: valid in every state, never play, never a transition."""

EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        TableOpen, DeckCheck, Shuffle, Cut, CutCardPlaced, ShoeLoaded, BetsClosed, CardDrawn,
        CutCardSeen, Action, StubCount, RoundEnd, DiscardsReturned, DealerChange, PlayersLeft,
        CardReplaced, DeviceFault, DeviceOk, TableClose, DeviceConnected, DeviceDiagnostic,
        WitnessCheckpoint,
    )
}


# --------------------------------------------------------------------------- parsing


def parse_time(text: str) -> dt.datetime:
    """ISO-8601 with an explicit UTC offset or ``Z``; naive times are taken as UTC. A time
    that has no UTC equivalent (``0001-01-01T00:00:00+01:00``) is not a time either.

    The last time read is kept: a stream's events come several to a second."""
    global _last_time
    last = _last_time  # one tuple, replaced whole: safe from any thread
    if text == last[0]:
        return last[1]
    value = _parse_time(text)
    _last_time = (text, value)
    return value


_last_time: tuple[Any, Any] = (None, None)  # (text, time): no text matches at first


def written_date(text: str) -> dt.date:
    """The calendar date of an ISO-8601 time at the UTC offset it was written with (a
    naive time's own date); raises :class:`EventError` as :func:`parse_time` does."""
    parse_time(text)  # the same checks, the same errors
    return _as_written(text).date()


def _as_written(text: str) -> dt.datetime:
    """The time at the offset it was written with (naive if none); ``ValueError`` if it is
    no ISO-8601 time."""
    try:  # the usual "…Z" directly (Python 3.11 reads Z); "z" and the rest below
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))


def _parse_time(text: str) -> dt.datetime:
    try:
        value = _as_written(text)
        if value.tzinfo is dt.UTC:
            return value
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)
    except OverflowError as e:
        raise EventError("t", f"a time with no UTC equivalent (out of range): {text[:60]!r}"
                         ) from e
    except ValueError as e:
        raise EventError("t", f"not an ISO-8601 time: {text[:60]!r}") from e


def _check_values(obj: Mapping[str, Any]) -> None:
    """Every string valid Unicode text of sane length, every nesting shallow, every value a
    JSON value: what no later step — the engine, the audit writer, a report —
    could fail on. Walks without recursion, so no input can exhaust the stack."""
    for key, value in obj.items():  # the usual event: flat, short ASCII text and numbers
        kind = type(value)
        if type(key) is not str:
            break
        if kind is str:
            if len(value) > MAX_TEXT or not value.isascii():
                break
        elif kind is not int and kind is not bool and value is not None:
            break
    else:
        return
    for key in obj:
        if not isinstance(key, str):
            raise EventError("", "keys must be text")
    stack: list[tuple[str, Any, int]] = [(k, v, 1) for k, v in obj.items()]
    while stack:
        where, value, depth = stack.pop()
        if isinstance(value, str):
            if len(value) > MAX_TEXT:
                raise EventError(where, f"text longer than {MAX_TEXT} characters")
            if value.isascii():  # the usual case, and never a surrogate
                continue
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise EventError(where, "not valid Unicode text (a lone surrogate)") from None
        elif isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise EventError(where, f"nested deeper than {MAX_DEPTH} levels")
            if len(value) > MAX_CHECK_CARDS:
                raise EventError(where, f"more than {MAX_CHECK_CARDS} items")
            if type(value) is list and _short_ascii_texts(value):
                continue  # (a pack's card tokens: nothing in them to name)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                if not isinstance(k, str | int):
                    raise EventError(where, "keys must be text")
                stack.append((f"{where}.{k}" if isinstance(k, str) else f"{where}[{k}]",
                              v, depth + 1))
        elif value is not None and not isinstance(value, bool | int | float):
            raise EventError(where, f"not a JSON value: {type(value).__name__}")


def _short_ascii_texts(items: list[Any]) -> bool:
    """Is every item a text of at most :data:`MAX_TEXT` ASCII characters? Then the walk
    has nothing to find in the list: a deck check's 416 card tokens are passed in three
    C-level passes, where one by one they took ~0.9 µs a card (a third of a count's
    parsing). Anything else is walked item by item, which names what is wrong."""
    return (set(map(type, items)) <= {str} and max(map(len, items), default=0) <= MAX_TEXT
            and "".join(items).isascii())


Parser = Callable[[Mapping[str, Any], "str | None"], Event]
_ABSENT = object()


def _fields_parser(cls: type[Event]) -> Parser:
    """The parser of one event type, read off its fields once: each field's check comes
    from its declared type (and range) through :func:`controller.validation.checker`, or
    from its ``_parsed_by`` metadata; a field without a default is required, and an optional
    one given ``null`` is taken as absent (its default: a producer that writes every optional
    field, ``"exposed": null`` among them, lost every card as bad input — a review). Fields
    are checked in declared order, so the first bad one is the one named."""
    hints = get_type_hints(cls)
    specs: list[tuple[str, Checker, bool, bool, Any]] = []
    for f in fields(cls):
        if f.name == "t":  # checked before any field: every event carries it
            continue
        check = f.metadata.get("check") or checker(hints[f.name], f.metadata.get("lo", 0),
                                                   f.metadata.get("hi"))
        assert f.default_factory is dataclasses.MISSING, f"{cls.__name__}.{f.name}"
        required = f.default is dataclasses.MISSING
        specs.append((f.name, check, required, not required, f.default))
    table = tuple(specs)
    if not table:
        return lambda obj, t: cls(t=t)

    def parse(obj: Mapping[str, Any], t: str | None) -> Event:
        values: list[Any] = []  # positional, in declared order: the quickest construction
        for name, check, required, nullable, default in table:
            value = obj.get(name, _ABSENT)
            if value is _ABSENT or (value is None and nullable):
                if required:
                    raise EventError(name, "missing")
                values.append(default)
            else:
                values.append(check(name, value))
        return cls(*values, t=t)

    return parse


_CARD_ORDER = operator.attrgetter("rank", "suit")
"""A card's order as a tuple: the order ``Card`` defines, compared in C (a pack of eight
decks is 3,000 comparisons: a twentieth of checking a day's stream, compared in Python)."""


def deck_check(tokens: Iterable[object], t: str | None,
               deck_lots: tuple[DeckLot, ...] | None = None) -> DeckCheck:
    """A ``deck_check`` from card tokens, as a scanner, a shuffler or a JSON line gives them:
    tokens that are not one of the 52 (a joker, another game's card, a number) are kept apart
    as ``foreign`` (the engine names them). The one place a pack's tokens become a check."""
    cards: list[Card] = []
    foreign: list[str] = []
    if not isinstance(tokens, list | tuple):
        tokens = list(tokens)  # (read twice below when a token is no card)
    try:  # the usual pack, every token a card: one C-level pass
        cards = list(map(parse_card, tokens))
    except CardError:  # a token that is no card: one by one, to keep the cards apart
        cards = []
        for token in tokens:
            try:
                cards.append(parse_card(token))
            except CardError:  # (a token too long for the log is kept cut short, as shown)
                foreign.append(printable(token) if isinstance(token, str)
                               and len(token) <= 250 else show(token))
    return DeckCheck(cards=tuple(sorted(cards, key=_CARD_ORDER)),
                     foreign=tuple(sorted(foreign)),
                     deck_lots=deck_lots, t=t)


def _deck_check(obj: Mapping[str, Any], t: str | None) -> Event:
    if "cards" not in obj:
        raise EventError("cards", "missing")
    raw = obj["cards"]
    if not isinstance(raw, list):
        raise EventError("cards", "expected a list of card strings")
    lots = obj.get("deck_lots")
    return deck_check(raw, t, None if lots is None else _lots("deck_lots", lots))


_PARSERS: dict[str, Parser] = {
    kind: _deck_check if cls is DeckCheck else _fields_parser(cls)
    for kind, cls in EVENT_TYPES.items()
}


def parse_event(obj: object) -> Event:
    """Build a typed event from one decoded JSON value, or raise :class:`EventError` — and
    nothing else, whatever the value: this is where every input becomes an event (a stream
    line, a console command, a device message), so what passes it is safe to log and to
    feed."""
    if type(obj) is dict and obj.get("type") == "card" and len(obj) <= 3:
        card = _plain_card(obj)
        if card is not None:
            return card
    return _parse_event(obj)


def _plain_card(obj: dict[str, Any]) -> CardDrawn | None:
    """The most common event of all, ``{"type": "card", "card": "7H", "t": "…"}`` and
    nothing else, without the general walk: the same checks (short ASCII text, a card, an
    ISO time) in a few steps. None for anything else, even a bad card: the general path
    then decides, and names what is wrong (tests/test_events.py holds them equal)."""
    token = obj.get("card")
    t = obj.get("t")
    if type(token) is not str or len(obj) != (2 if t is None else 3) or not token.isascii():
        return None
    if t is not None and (type(t) is not str or len(t) > MAX_TEXT or not t.isascii()):
        return None
    try:
        card = parse_card(token)
    except CardError:
        return None
    if t is not None:
        parse_time(t)  # EventError("t", …), as the general path raises it
    return _card_drawn(card, t)


def _slot_setters(cls: type) -> tuple[Any, ...]:
    """The ``__set__`` of each of a slotted dataclass's fields, in field order."""
    return tuple(getattr(cls, f.name).__set__ for f in fields(cls))


_NEW = object.__new__
_SET_T, _SET_CARD, _SET_EXPOSED, _SET_UNREQUESTED, _SET_TO = _slot_setters(CardDrawn)


def _card_drawn(card: Card, t: str | None) -> CardDrawn:
    """``CardDrawn(card, t=t)``, every other field at its default, made by setting its
    slots: a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, and this is the most common event of all (1.4 µs a card there,
    0.6 here; tests/test_events.py holds the two equal)."""
    event = _NEW(CardDrawn)
    _SET_T(event, t)
    _SET_CARD(event, card)
    _SET_EXPOSED(event, False)
    _SET_UNREQUESTED(event, False)
    _SET_TO(event, None)
    return event


def _parse_event(obj: object) -> Event:
    if not isinstance(obj, dict):
        raise EventError("", f"expected a JSON object, got {type(obj).__name__}")
    kind = obj.get("type")
    if kind is None:
        raise EventError("type", "missing")
    if not isinstance(kind, str):
        raise EventError("type", f"expected an event type name, got {type(kind).__name__}")
    parse = _PARSERS.get(kind)
    if parse is None:
        raise EventError("type", f"unknown event type {kind[:40]!r}")
    _check_values(obj)
    t = obj.get("t")
    if t is not None:
        if not isinstance(t, str):
            raise EventError("t", f"expected an ISO-8601 string, got {show(t)}")
        parse_time(t)
    try:
        return parse(obj, t)
    except EventError:
        raise
    except Invalid as e:
        raise EventError(e.field, e.why) from None


def _field_checks(cls: type[Event]) -> dict[str, tuple[Checker, bool]]:
    """Each field's check (and whether it is required), for :func:`attach`; fields with no
    JSON form to check (a deck check's parsed cards) are left out."""
    hints = get_type_hints(cls)
    out: dict[str, tuple[Checker, bool]] = {}
    for f in fields(cls):
        if f.name == "t":
            continue
        check = f.metadata.get("check")
        if check is None:
            try:
                check = checker(hints[f.name], f.metadata.get("lo", 0), f.metadata.get("hi"))
            except TypeError:
                continue
        out[f.name] = (check, f.default is dataclasses.MISSING)
    return out


_ATTACH_CHECKS = {cls: _field_checks(cls) for cls in EVENT_TYPES.values()}
_FIELD_NAMES = {cls: frozenset(f.name for f in fields(cls)) for cls in EVENT_TYPES.values()}


def attach(event: Event, extra: Mapping[str, Any]) -> Event:
    """``event`` with fields a console line adds to it (``t``, a stud card's ``to``, a new
    pack's ``deck_lots``: what the device's wire does not carry), each checked as
    :func:`parse_event` checks it, merged with :func:`dataclasses.replace` — the typed event
    stays typed. A key that is no field of the event is ignored (as by :func:`parse_event`).
    Raises :class:`EventError` for a bad value, another ``type``, or a field that has no JSON
    check here (a deck check's cards)."""
    _check_values(extra)
    checks = _ATTACH_CHECKS[type(event)]
    changes: dict[str, Any] = {}
    for name, value in extra.items():
        if name == "t":
            if value is not None:
                if not isinstance(value, str):
                    raise EventError("t", f"expected an ISO-8601 string, got {show(value)}")
                parse_time(value)
            changes["t"] = value
            continue
        spec = checks.get(name)
        if spec is None:
            if name == "type" and value == event.type:
                continue
            if name == "type" or name in _FIELD_NAMES[type(event)]:
                raise EventError(name, f"cannot be attached to a {event.type}")
            continue  # not a field of this event: ignored, as parse_event ignores it
        check, required = spec
        if value is None:
            if required:
                raise EventError(name, "missing")
            changes[name] = None
            continue
        try:
            changes[name] = check(name, value)
        except EventError:
            raise
        except Invalid as e:
            raise EventError(e.field, e.why) from None
    return dataclasses.replace(event, **changes) if changes else event


def screen(event: Event) -> None:
    """What :func:`parse_event` would refuse in an event a driver built itself: text too
    long or not Unicode, a list too long. The typed path's safety check (the drivers decode
    device text strictly, so this only ever catches what they let through by mistake);
    raises :class:`EventError` naming the field."""
    for f in fields(event):
        value = getattr(event, f.name)
        if type(value) is str:
            if len(value) <= MAX_TEXT and value.isascii():
                continue
        elif type(value) is not tuple or not value:
            continue
        _check_values({f.name: _to_json(value)})
    if isinstance(event, DeckCheck) and len(event.cards) + len(event.foreign) > MAX_CHECK_CARDS:
        raise EventError("cards", f"more than {MAX_CHECK_CARDS} items")
