"""The shuffler (SWP/1), batch and continuous, over serial or USB.

| message | output |
|---|---|
| SHUFFLE_DONE | ``shuffle`` |
| DECK_CHECK ``{"cards": [...]}`` | ``deck_check`` |
| DECK_CHECK ``{"cards": [...], "part": i, "parts": n}`` | joined: one ``deck_check`` at part n |
| DELIVERED ``{"card": "7H"}`` (continuous) | ``card`` (unreadable: ``UNREADABLE_CARD``) |
| DISCARDS_ACCEPTED ``{"count": n}`` | ``discards_returned`` |
| FAULT / FAULT_CLEARED ``{"code"}`` | ``device_fault`` / ``device_ok``, the shuffler's code |
| DOOR | ``device_fault`` / ``device_ok`` ``DOOR_OPEN`` |
| LOADED, SHUFFLE_STARTED, STATUS | notices for the text log (``data`` the payload) |

Commands (:meth:`ShufflerDriver.shuffle`, ``deck_check``, ``eject``, ``status``) are sent with
ACK + retry by the link; a NAK comes back as a ``NAK`` diagnostic, silence as a ``NO_ACK``
fault. The result arrives as the messages above.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller.events import DiscardsReturned, Shuffle, deck_check
from controller.validation import show
from drivers.diagnostics import UNREADABLE_CARD, Output
from drivers.link import Message
from drivers.payload import MAX_CHECK_CARDS, PayloadError, body_int, body_str
from drivers.protocol import Kind
from drivers.swp import SwpDriver
from drivers.transport import Transport

MAX_CHECK_PARTS = 64
"""Parts one split DECK_CHECK may come in (a 1 KB payload holds ~200 cards)."""


class ShufflerDriver(SwpDriver):
    kind: ClassVar[str] = "shuffler"
    accepts: ClassVar[frozenset[int]] = frozenset({
        Kind.LOADED, Kind.SHUFFLE_STARTED, Kind.SHUFFLE_DONE, Kind.DECK_CHECK, Kind.DELIVERED,
        Kind.DISCARDS_ACCEPTED, Kind.FAULT, Kind.FAULT_CLEARED, Kind.STATUS, Kind.DOOR})
    card_kinds: ClassVar[frozenset[int]] = frozenset({Kind.DELIVERED})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last_status: Mapping[str, Any] | None = None
        self._parts: tuple[int, list[list[Any]]] | None = None  # a split DECK_CHECK so far

    def handle(self, msg: Message, t: str) -> list[Output]:
        body = msg.body
        match msg.kind:
            case Kind.SHUFFLE_DONE:
                body_int(body, "count", optional=True)
                return [Shuffle(t=t)]
            case Kind.DECK_CHECK:
                cards = body.get("cards")
                if not isinstance(cards, list):
                    raise PayloadError("cards",
                                       f"expected a list of card strings, got {show(cards)}")
                if "part" in body or "parts" in body:
                    return self._deck_check_part(body, cards, t)
                out = self._abandon_parts("a whole DECK_CHECK came")
                return out + self._deck_check(cards, t)
            case Kind.DELIVERED:
                return self.card(body, t)
            case Kind.DISCARDS_ACCEPTED:
                count = body_int(body, "count")
                assert count is not None
                return [DiscardsReturned(count=count, t=t)]
            case Kind.FAULT:
                code = body_str(body, "code")
                assert code is not None
                detail = body.get("detail")
                return self.device_fault(code, detail if isinstance(detail, str) else None, t=t)
            case Kind.FAULT_CLEARED:
                code = body_str(body, "code")
                assert code is not None
                return self.device_ok(code, "cleared by the shuffler", t=t)
            case Kind.STATUS:
                self.last_status = dict(body)
                return [self.notice(msg)]
            case Kind.LOADED | Kind.SHUFFLE_STARTED:
                return [self.notice(msg)]
            case Kind.DOOR:
                return self.door(body, t)
        return []  # pragma: no cover

    def _deck_check(self, cards: list[Any], t: str) -> list[Output]:
        tokens = [c.strip().upper() for c in cards if isinstance(c, str) and c.strip()]
        out: list[Output] = []
        if len(tokens) != len(cards):
            out += self.fault(UNREADABLE_CARD, f"{len(cards) - len(tokens)} card(s) "
                              "unread in the shuffler's deck check", t=t, repeat=True)
        out.append(deck_check(tokens, t))
        return out

    def _deck_check_part(self, body: Mapping[str, Any], cards: list[Any],
                         t: str) -> list[Output]:
        """One frame of a split DECK_CHECK (``part`` i of ``parts`` n, 1-based): the parts are
        joined into one ``deck_check`` when the last arrives. A part out of turn drops what was
        gathered (a ``PROTOCOL_ERROR`` ``deck_check_parts``): no half check reaches the engine."""
        part = body_int(body, "part")
        parts = body_int(body, "parts")
        assert part is not None and parts is not None
        if not 1 <= part <= parts:
            raise PayloadError("part", f"part {part} of {parts} is out of range")
        if parts > MAX_CHECK_PARTS:
            raise PayloadError("parts", f"a DECK_CHECK in {parts} parts (at most "
                               f"{MAX_CHECK_PARTS})")
        out: list[Output] = []
        if part == 1:
            out += self._abandon_parts("a new DECK_CHECK began")
            self._parts = (parts, [])
        elif self._parts is None or self._parts[0] != parts or \
                len(self._parts[1]) != part - 1:
            got = 0 if self._parts is None else len(self._parts[1])
            self._parts = None
            return [self.protocol_error("deck_check_parts", f"DECK_CHECK part {part} of "
                                        f"{parts} after {got} part(s); the check is dropped")]
        assert self._parts is not None
        gathered_so_far = sum(len(chunk) for chunk in self._parts[1])
        if gathered_so_far + len(cards) > MAX_CHECK_CARDS:
            self._parts = None
            return [*out, self.protocol_error(
                "deck_check_parts", f"a DECK_CHECK of more than {MAX_CHECK_CARDS} cards; "
                "the check is dropped")]
        self._parts[1].append(cards)
        if part < parts:
            return out
        gathered = [c for chunk in self._parts[1] for c in chunk]
        self._parts = None
        return out + self._deck_check(gathered, t)

    def _abandon_parts(self, why: str) -> list[Output]:
        pending, self._parts = self._parts, None
        if pending is None:
            return []
        return [self.protocol_error("deck_check_parts", f"a DECK_CHECK in {pending[0]} parts "
                                    f"stopped after {len(pending[1])} ({why}); no deck_check "
                                    "from it")]

    def on_reset(self, why: str) -> list[Output]:
        return self._abandon_parts(why)

    def unusable(self, kind: int, detail: str) -> list[Output]:
        if kind == Kind.FAULT:  # a fault we cannot read is still a fault
            return self.fault("FAULT", f"unreadable FAULT message ({detail})"[:300])
        return super().unusable(kind, detail)

    # commands: each returns the command's seq; the outcome comes through poll()
    def shuffle(self, now: float | None = None) -> int:
        return self.command(Kind.CMD_SHUFFLE, {}, now)

    def deck_check(self, now: float | None = None) -> int:
        return self.command(Kind.CMD_DECK_CHECK, {}, now)

    def eject(self, now: float | None = None) -> int:
        return self.command(Kind.CMD_EJECT, {}, now)

    def status(self, now: float | None = None) -> int:
        return self.command(Kind.CMD_STATUS, {}, now)


class UsbShufflerDriver(ShufflerDriver):
    """The same shuffler over USB bulk endpoints (config key ``usb``)."""

    @classmethod
    def make_transport(cls, name: str, config: Mapping[str, Any]) -> Transport:
        from drivers.usb_transport import UsbTransport
        return UsbTransport.from_config(name, config)

    transport_keys: ClassVar[tuple[str, ...]] = ("usb", "usb_timeout_ms")
