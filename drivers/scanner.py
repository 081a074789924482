"""The deck scanner (SWP/1): ``SCAN_BEGIN``, one ``SCAN_CARD`` per card, ``SCAN_END`` → one
``deck_check`` with every card read.

Unreadable cards (``{"unreadable": true}``, or a malformed ``SCAN_CARD``) raise one
``device_fault`` ``UNREADABLE_CARD`` before the ``deck_check`` of what was read, so the
pack is rescanned or read by hand. Tokens that are not one of the 52 (``"JK"``) are
foreign cards in the ``deck_check`` (the engine flags ``DECK_FOREIGN_CARD``). A scan that
is restarted, cut off by a disconnect, or whose ``count`` disagrees with the cards
received is reported as a ``PROTOCOL_ERROR``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from controller.events import deck_check
from drivers.diagnostics import UNREADABLE_CARD, Output
from drivers.link import Message
from drivers.payload import MAX_CHECK_CARDS, body_int, body_str, unreadable
from drivers.protocol import Kind
from drivers.swp import SwpDriver


@dataclass
class Scan:
    expected: int | None
    tokens: list[str] = field(default_factory=list)
    unreadable: int = 0

    @property
    def seen(self) -> int:
        return len(self.tokens) + self.unreadable


class ScannerDriver(SwpDriver):
    kind: ClassVar[str] = "scanner"
    accepts: ClassVar[frozenset[int]] = frozenset({Kind.SCAN_BEGIN, Kind.SCAN_CARD,
                                                   Kind.SCAN_END, Kind.DOOR})
    card_kinds: ClassVar[frozenset[int]] = frozenset({Kind.SCAN_CARD})

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scan: Scan | None = None

    def handle(self, msg: Message, t: str) -> list[Output]:
        body = msg.body
        match msg.kind:
            case Kind.SCAN_BEGIN:
                expected = body_int(body, "expected", optional=True)
                out = self._abandon("a new scan began")
                self.scan = Scan(expected)
                return out
            case Kind.SCAN_CARD:
                if self.scan is None:
                    return [self.protocol_error("card_outside_scan",
                                                f"SCAN_CARD {body!r} without SCAN_BEGIN"[:200])]
                if self.scan.seen >= MAX_CHECK_CARDS:
                    out = self._abandon(f"more than {MAX_CHECK_CARDS} cards")
                    return out
                if unreadable(body):
                    self.scan.unreadable += 1
                else:
                    token = body_str(body, "card")
                    assert token is not None
                    self.scan.tokens.append(token.strip().upper())
                return []
            case Kind.SCAN_END:
                count = body_int(body, "count", optional=True)
                scan, self.scan = self.scan, None
                if scan is None:
                    return [self.protocol_error("scan_end_without_begin",
                                                f"SCAN_END count {count} without SCAN_BEGIN")]
                out = []
                if count is not None and count != scan.seen:
                    out.append(self.protocol_error(
                        "scan_count", f"SCAN_END says {count} cards, {scan.seen} were received"))
                if scan.unreadable:
                    out += self.fault(UNREADABLE_CARD, f"{scan.unreadable} card(s) unread in the "
                                      "deck check: rescan or read them by hand", t=t, repeat=True)
                out.append(deck_check(scan.tokens, t))
                return out
            case Kind.DOOR:
                return self.door(body, t)
        return []  # pragma: no cover

    def unusable(self, kind: int, detail: str) -> list[Output]:
        """A malformed SCAN_CARD is an unread card of the scan (reported with the check)."""
        if kind == Kind.SCAN_CARD and self.scan is not None:
            self.scan.unreadable += 1
            return []
        return super().unusable(kind, detail)

    def _abandon(self, why: str) -> list[Output]:
        scan, self.scan = self.scan, None
        if scan is None:
            return []
        return [self.protocol_error("scan_abandoned", f"a scan of {scan.seen} card(s) was not "
                                    f"finished ({why}); no deck_check from it")]

    def on_reset(self, why: str) -> list[Output]:
        return self._abandon(why)
