"""Faults the simulated devices inject, and mistakes the simulated dealer makes, as data.

A **fault** happens on one device (``shoe``, ``scanner``, ``shuffler``) at a trigger:

- ``card = N``: the Nth card taken from that device's stack (shoe: CARD_OUT, scanner:
  SCAN_CARD, shuffler: DELIVERED; 1-based, counted over the whole run; an injected foreign
  card is not counted);
- ``time = T``: T seconds after the device's clock started (the pty host's start);
- ``shuffle = N`` (shuffler only): the Nth shuffle of that shuffler.

What a fault does is decided by its kind (:data:`FAULT_KINDS`): *wire* faults change the
bytes of one frame (the frame of the card at the trigger, or with a time trigger the next
frame sent, whatever it is), *pause* faults put something in the device's output before
that frame (a jam, an open door, silence, slowness, a disconnect, a changed identity), and
*content* faults change what the device reports (an unreadable or foreign card, a card
missing from a deck check, an unshuffled pack). The resend buffer always keeps the frame as
it should have been, so a RESEND repairs every wire fault.

A **mistake** is the simulated dealer doing a step wrong: a mutation of the
:func:`simulators.dealer.table_day` step list (:data:`MISTAKES`), each naming the
deviation code it should make the engine raise.

The scenario loader (:mod:`simulators.scenario`) validates both from TOML using the
parameter tables here, and docs/devices.md lists them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from controller.cards import pack
from controller.profiles import Profile
from controller.validation import Invalid, allowed_text, check_choice, checker, choices
from drivers.framing import HEADER, MAX_PAYLOAD, START, VERSION
from simulators.dealer import Step

Device = Literal["shoe", "scanner", "shuffler"]
Trigger = Literal["card", "time", "shuffle"]
DEVICES: tuple[str, ...] = choices(Device)
TRIGGERS: tuple[str, ...] = choices(Trigger)


class FaultError(ValueError):
    """A fault or mistake that cannot be built or applied; ``key`` names the parameter."""

    def __init__(self, key: str, why: str) -> None:
        self.key, self.why = key, why
        super().__init__(f"{key}: {why}" if key else why)


@dataclass(frozen=True)
class Param:
    """One parameter of a fault or mistake kind: its type (bool, int, float, str, or a
    ``Literal`` of words), range and default, checked by :mod:`controller.validation`."""

    type: Any
    default: Any
    lo: float | None = None
    hi: float | None = None
    doc: str = ""

    def check(self, key: str, value: Any) -> Any:
        try:
            return checker(self.type, self.lo, self.hi)(key, value)
        except Invalid as e:
            raise FaultError(key, e.why) from None

    def allowed(self) -> str:
        return allowed_text(self.type, self.lo, self.hi)


# --------------------------------------------------------------------------- fault kinds

class Layer(StrEnum):
    """Where a fault acts: on a frame's bytes, before a frame, or on what is reported."""

    WIRE = "wire"
    PAUSE = "pause"
    CONTENT = "content"


WIRE, PAUSE, CONTENT = Layer.WIRE, Layer.PAUSE, Layer.CONTENT


@dataclass(frozen=True)
class FaultKind:
    name: str
    layer: Layer
    devices: tuple[str, ...]
    doc: str
    params: Mapping[str, Param] = field(default_factory=dict)
    # what a time-triggered content fault waits for
    point: Literal["card", "shuffle", "check"] = "card"


_SECONDS = Param(float, 2.0, 0.0, 3600.0, "how long it lasts, seconds")
_ALL = DEVICES

FAULT_KINDS: dict[str, FaultKind] = {k.name: k for k in (
    FaultKind("garble", WIRE, _ALL, "flip bits of the frame's payload/CRC: it fails its CRC",
              {"bits": Param(int, 1, 1, 8, "bits flipped")}),
    FaultKind("drop", WIRE, _ALL, "the frame is not sent (its seq is skipped: a gap)"),
    FaultKind("duplicate", WIRE, _ALL, "the frame is sent twice (the same seq twice)"),
    FaultKind("noise", WIRE, _ALL, "random bytes (never A5) on the line before the frame",
              {"bytes": Param(int, 16, 1, 4096, "noise bytes")}),
    FaultKind("oversized", WIRE, _ALL,
              "before the frame, a frame whose header claims a payload over 1024 bytes "
              "(its bytes follow); it reuses the next frame's seq, so nothing is lost",
              {"size": Param(int, 1500, MAX_PAYLOAD + 1, 65535, "claimed payload length")}),
    FaultKind("disconnect", PAUSE, _ALL,
              "the link goes away (pty closed and its path removed, USB unplugged) once "
              "everything sent so far was read, and comes back after `seconds` on the same "
              "path; the device waits for HELLO, then numbers from 0 again",
              {"seconds": Param(float, 1.0, 0.0, 3600.0, "time unplugged")}),
    FaultKind("jam", PAUSE, ("shoe", "shuffler"),
              "JAM (shuffler: FAULT code JAM), `seconds` later JAM_CLEARED (FAULT_CLEARED), "
              "then the card", {"seconds": _SECONDS,
                                "detail": Param(str, "card jammed at the exit", doc="text")}),
    FaultKind("door", PAUSE, ("shoe", "shuffler"),
              "DOOR open, `seconds` later DOOR closed, then the card", {"seconds": _SECONDS}),
    FaultKind("slow", PAUSE, _ALL,
              "for `seconds`, every frame (ACKs included) leaves `delay` seconds late",
              {"delay": Param(float, 0.5, 0.0, 60.0, "added latency, seconds"),
               "seconds": Param(float, 5.0, 0.0, 3600.0, "how long the device is slow")}),
    FaultKind("silent", PAUSE, _ALL,
              "nothing at all for `seconds` (no heartbeat, no ACK); what was held follows",
              {"seconds": Param(float, 5.0, 0.0, 3600.0, "silence, seconds")}),
    FaultKind("wrong_identity", PAUSE, _ALL,
              "from then on the device answers HELLO with another identity (by default its "
              "serial prefixed FOREIGN-): seen at the next handshake (time = 0: the first; "
              "else pair it with a disconnect)",
              {"model": Param(str, None), "serial": Param(str, None),
               "firmware": Param(str, None), "firmware_hash": Param(str, None)}),
    FaultKind("unreadable", CONTENT, ("shoe", "scanner", "shuffler"),
              "the card is reported as {\"unreadable\": true} (it still leaves the device)"),
    FaultKind("foreign", CONTENT, ("shoe", "scanner", "shuffler"),
              "a card from another pack comes out just before the card: `face` if given, else "
              "the scanner reads JK (not one of the 52) and a shoe/shuffler the face dealt most "
              "often since it was loaded (a duplicate)",
              {"face": Param(str, None, doc="the foreign card's face, e.g. 7H or JK")}),
    FaultKind("missing", CONTENT, ("scanner", "shuffler"),
              "scanner: the card is not read (SCAN_END counts one fewer); shuffler: the next "
              "DECK_CHECK leaves one card out", point="check"),
    FaultKind("unshuffled", CONTENT, ("shuffler",),
              "the shuffle reports SHUFFLE_STARTED/SHUFFLE_DONE but leaves the pack in the "
              "order it was loaded", point="shuffle"),
    FaultKind("riffle", CONTENT, ("shuffler",),
              "the shuffle is only `times` Gilbert–Shannon–Reeds riffles of the pack as loaded "
              "(simulators/shuffles.py), or with `of = \"last\"` of the last shoe's "
              "discards as the dealer brought them (round after round, each round's hands "
              "from right to left, each whole in the order dealt, then the cards never "
              "dealt; the pack it last gave out, where none were brought)",
              {"times": Param(int, 1, 1, 20, "riffles"),
               "of": Param(Literal["loaded", "last"], "loaded", doc="which order is riffled")},
              point="shuffle"),
    FaultKind("shelf", CONTENT, ("shuffler",),
              "the shuffle is one pass of a `shelves`-shelf shuffler over the pack as loaded "
              "(Diaconis, Fulman & Holmes 2013)",
              {"shelves": Param(int, 10, 2, 100, "shelves")}, point="shuffle"),
    FaultKind("slug", CONTENT, ("shuffler",),
              "a false shuffle: a fair shuffle, except that `cards` consecutive cards of the "
              "last shoe's discards as the dealer brought them (as for `riffle` with `of = "
              "\"last\"`; from card `start`, 1-based) stay together, in order, from card "
              "`at` of the new pack",
              {"cards": Param(int, 40, 1, 416, "cards in the slug"),
               "start": Param(int, 1, 1, 416, "the slug's first card in the last pack"),
               "at": Param(int, 1, 1, 416, "where the slug goes in the new pack")},
              point="shuffle"),
)}


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` on ``device`` at exactly one trigger, with its parameters."""

    kind: str
    device: str
    card: int | None = None
    time: float | None = None
    shuffle: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> FaultKind:
        return FAULT_KINDS[self.kind]

    @property
    def layer(self) -> Layer:
        return self.spec.layer

    def __getitem__(self, name: str) -> Any:
        return self.params.get(name, self.spec.params[name].default)

    def trigger(self) -> tuple[str, float]:
        for name in TRIGGERS:
            value = getattr(self, name)
            if value is not None:
                return name, value
        raise FaultError("", "no trigger")

    def describe(self) -> dict[str, Any]:
        name, value = self.trigger()
        return {"kind": self.kind, "device": self.device, name: value,
                **{k: v for k, v in self.params.items() if v is not None}}


def _kind_of(raw: Any, key: str, table: str, kinds: Mapping[str, Any]) -> str:
    """The validated ``kind`` of one ``[[fault]]`` / ``[[mistake]]`` table."""
    if not isinstance(raw, Mapping):
        raise FaultError(key, f"expected a table [[{table}]]")
    kind = raw.get("kind")
    if kind is None:
        raise FaultError(f"{key}.kind", "missing")
    if not isinstance(kind, str) or kind not in kinds:
        raise FaultError(f"{key}.kind", f"{kind!r} is not one of {', '.join(kinds)}")
    return kind


def make_fault(raw: Mapping[str, Any], key: str = "fault") -> Fault:
    """Validate one ``[[fault]]`` table; errors name ``key.<field>``."""
    kind = _kind_of(raw, key, "fault", FAULT_KINDS)
    spec = FAULT_KINDS[kind]
    for k in raw:
        if k not in ("kind", "device", *TRIGGERS, *spec.params):
            raise FaultError(f"{key}.{k}", f"unknown key for a {kind} fault")
    device = raw.get("device")
    if device is None:
        raise FaultError(f"{key}.device", "missing")
    try:
        device = check_choice(f"{key}.device", device, Device)
    except Invalid as e:
        raise FaultError(e.field, e.why) from None
    if device not in spec.devices:
        raise FaultError(f"{key}.device", f"a {device} cannot have a {kind} fault "
                         f"(devices: {', '.join(spec.devices)})")
    given = [t for t in TRIGGERS if t in raw]
    if len(given) != 1:
        raise FaultError(key, "give exactly one trigger: card = N, time = SECONDS or "
                         "shuffle = N" + (f" (got {', '.join(given)})" if given else ""))
    trig = given[0]
    value = raw[trig]
    if trig == "time":
        value = Param(float, 0, 0.0, 86400.0).check(f"{key}.time", value)
    else:
        value = Param(int, 1, 1, 1_000_000).check(f"{key}.{trig}", value)
    if trig == "shuffle" and device != "shuffler":
        raise FaultError(f"{key}.shuffle", "only a shuffler has a shuffle trigger")
    if trig == "card" and spec.point == "shuffle":
        raise FaultError(f"{key}.card", f"{kind} takes a shuffle or time trigger")
    if trig == "card" and kind == "missing" and device == "shuffler":
        raise FaultError(f"{key}.card", "a shuffler's missing card needs a shuffle or time "
                         "trigger (it applies to the next DECK_CHECK)")
    params = {p: spec_p.check(f"{key}.{p}", raw[p]) for p, spec_p in spec.params.items()
              if p in raw}
    return Fault(kind, device, params=params, **{trig: value})


# --------------------------------------------------------------------------- wire transforms


def garble(frame: bytes, rng: random.Random, bits: int = 1) -> bytes:
    """Flip ``bits`` distinct bits after the header (payload bits 0–6, CRC any bit): the
    header stays intact, so the receiver reads the whole frame and its CRC fails."""
    data = bytearray(frame)
    body = HEADER.size
    candidates = [(i, b) for i in range(body, len(data) - 2) for b in range(7)]
    candidates += [(i, b) for i in range(len(data) - 2, len(data)) for b in range(8)]
    for i, b in rng.sample(candidates, min(bits, len(candidates))):
        data[i] ^= 1 << b
    return bytes(data)


def noise(rng: random.Random, n: int) -> bytes:
    """``n`` random bytes without 0xA5 (so no start marker can appear in them)."""
    return bytes(rng.choice([x for x in range(256) if x != 0xA5]) for _ in range(n))


def oversized(seq: int, type_: int, size: int) -> bytes:
    """A frame claiming ``size`` > 1024 payload bytes, with that many bytes and a CRC field."""
    head = HEADER.pack(START, VERSION, seq % 65536, type_, size)
    return head + b"x" * size + b"\x00\x00"


# --------------------------------------------------------------------------- dealer mistakes


@dataclass(frozen=True)
class MistakeKind:
    name: str
    code: str  # the deviation it makes the engine raise
    doc: str
    apply: Callable[[list[Step], Profile, Mapping[str, Any]], list[Step]]
    params: Mapping[str, Param] = field(default_factory=dict)


@dataclass(frozen=True)
class Mistake:
    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> MistakeKind:
        return MISTAKES[self.kind]

    def __getitem__(self, name: str) -> Any:
        return self.params.get(name, self.spec.params[name].default)


def _where(steps: list[Step], phase: str, **kw: Any) -> list[int]:
    return [i for i, s in enumerate(steps) if s.phase == phase
            and all(getattr(s, k) == v for k, v in kw.items())]


def _one(steps: list[Step], phase: str, what: str, **kw: Any) -> int:
    found = _where(steps, phase, **kw)
    if not found:
        raise FaultError("", f"the day has no {what}")
    return found[0]


def _move(steps: list[Step], i: int, before: int) -> list[Step]:
    out = list(steps)
    step = out.pop(i)
    out.insert(before if before < i else before - 1, step)
    return out


def _burn_four(steps: list[Step], profile: Profile, p: Mapping[str, Any]) -> list[Step]:
    if profile.burn.mode == "none":
        raise FaultError("kind", f"profile {profile.name} burns no cards")
    burns = _where(steps, "burn", shoe=p["shoe"])
    if not burns:
        raise FaultError("shoe", f"shoe {p['shoe']} has no burn")
    # the last burn card stays in the shoe, under the cards still to come: the rounds are
    # dealt exactly as scripted (a moved card would also upset the dealing rules)
    return steps[:burns[-1]] + steps[burns[-1] + 1:]


def _cut_too_shallow(steps: list[Step], profile: Profile, p: Mapping[str, Any]) -> list[Step]:
    i = _one(steps, "cut", f"cut in shoe {p['shoe']}", shoe=p["shoe"])
    offset = p["offset"] if p["offset"] is not None else max(0, profile.cut.min_each_side - 1)
    out = list(steps)
    s = out[i]
    out[i] = Step(s.phase, {**s.event, "offset": offset}, s.shoe, s.round)
    return out


def _deal_before_bets(steps: list[Step], profile: Profile, p: Mapping[str, Any]) -> list[Step]:
    bets = _one(steps, "bets_closed", f"round {p['round']}", round=p["round"])
    cards = [i for i, s in enumerate(steps) if s.event["type"] == "card"
             and s.round == p["round"] and s.phase not in ("burn", "dealer_change_burn")]
    if not cards:
        raise FaultError("round", f"round {p['round']} deals no card")
    return _move(steps, cards[0], bets)


def _play_past_last(steps: list[Step], profile: Profile, p: Mapping[str, Any]) -> list[Step]:
    if not profile.has_cut_card:
        raise FaultError("kind", f"profile {profile.name} has no cut card, so no last hand")
    ends = _where(steps, "round_end", shoe=p["shoe"])
    if not ends:
        raise FaultError("shoe", f"shoe {p['shoe']} has no round")
    end = ends[-1]
    decks = next(s.event["decks"] for s in steps if s.event["type"] == "table_open")
    seen = Counter(s.event["card"] for s in steps
                   if s.event["type"] == "card" and s.shoe == p["shoe"])
    stub = sorted((Counter(str(c) for c in pack(decks)) - seen).elements())
    if len(stub) < p["cards"]:
        raise FaultError("cards", f"only {len(stub)} card(s) are left behind the cut card")
    ref = steps[end]
    t = ref.event.get("t")
    extra = [{"type": "bets_closed"}, *({"type": "card", "card": c} for c in stub[:p["cards"]]),
             {"type": "round_end"}]
    new = [Step("past_last_hand", {**e, **({"t": t} if t else {})}, ref.shoe, ref.round + 1)
           for e in extra]
    return steps[:end + 1] + new + steps[end + 1:]


def _skip_shuffle(steps: list[Step], profile: Profile, p: Mapping[str, Any]) -> list[Step]:
    i = _one(steps, "shuffle", f"shuffle for shoe {p['shoe']}", shoe=p["shoe"])
    return steps[:i] + steps[i + 1:]


def _skip_closing(steps: list[Step], profile: Profile, p: Mapping[str, Any]) -> list[Step]:
    i = _one(steps, "closing_check", "closing check")
    return steps[:i] + steps[i + 1:]


_SHOE = Param(int, 1, 1, 1000, "which shoe (shuffle cycle), 1-based")

MISTAKES: dict[str, MistakeKind] = {m.name: m for m in (
    MistakeKind("burn_four", "BURN_COUNT",
                "burns one card short (four of five; by value: one fewer); the card left "
                "stays in the shoe, the rounds are dealt as scripted", _burn_four,
                {"shoe": _SHOE}),
    MistakeKind("cut_too_shallow", "CUT_TOO_SHALLOW",
                "reports a cut `offset` cards deep (default: one less than the profile's "
                "minimum each side, 0 at least)", _cut_too_shallow,
                {"shoe": _SHOE, "offset": Param(int, None, 0, 416 * 2, "cut depth")}),
    MistakeKind("deal_before_bets_close", "CARD_BEFORE_BETS_CLOSED",
                "deals the round's first card before closing bets", _deal_before_bets,
                {"round": Param(int, 2, 1, 100_000, "which round, 1-based over the day")}),
    MistakeKind("play_past_last_hand", "PLAY_AFTER_LAST_HAND",
                "after the shoe's last round, deals another with `cards` cards from behind "
                "the cut card", _play_past_last,
                {"shoe": _SHOE, "cards": Param(int, 2, 1, 20, "cards dealt")}),
    MistakeKind("skip_shuffle", "SHUFFLE_MISSING", "does not shuffle before the shoe",
                _skip_shuffle, {"shoe": Param(int, 2, 1, 1000, "which shoe, 1-based")}),
    MistakeKind("skip_closing_check", "CHECK_MISSING", "closes the table without the "
                "closing deck check", _skip_closing),
)}


def make_mistake(raw: Mapping[str, Any], key: str = "mistake") -> Mistake:
    """Validate one ``[[mistake]]`` table; errors name ``key.<field>``."""
    kind = _kind_of(raw, key, "mistake", MISTAKES)
    spec = MISTAKES[kind]
    for k in raw:
        if k != "kind" and k not in spec.params:
            raise FaultError(f"{key}.{k}", f"unknown key for a {kind} mistake")
    params = {p: ps.check(f"{key}.{p}", raw[p]) for p, ps in spec.params.items() if p in raw}
    return Mistake(kind, params)


def apply_mistakes(steps: list[Step], profile: Profile, mistakes: list[Mistake] | tuple,
                   key: str = "mistake") -> list[Step]:
    """The step list with each mistake applied in order; :class:`FaultError` names the
    ``mistake[N].param`` that does not fit this profile's day."""
    out = list(steps)
    for n, m in enumerate(mistakes, 1):
        try:
            out = m.spec.apply(out, profile, m)
        except FaultError as e:
            raise FaultError(f"{key}[{n}]" + (f".{e.key}" if e.key else ""), e.why) from e
    return out
