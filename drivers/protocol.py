"""The reference protocol's messages: frame type codes and their payload fields.

docs/protocol.md is the specification; this table is its machine-readable half
(a test checks that every code here is documented there). Device drivers map
device messages to the engine's input events; simulators produce them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Kind(IntEnum):
    # link layer, every device
    HELLO = 0x01  # controller → device: {"controller": str}
    IDENTITY = 0x02  # device → controller: {kind, model, serial, firmware, firmware_hash}
    HEARTBEAT = 0x03  # device → controller: {} every heartbeat period
    ACK = 0x04  # either way: {"ack": seq}
    NAK = 0x05  # either way: {"nak": seq, "reason": str}
    RESEND = 0x06  # controller → device: {"from": seq} resend frames from seq on
    # card-reading shoe
    CARD_OUT = 0x10  # {"card": "7H"} or {"unreadable": true}
    CUT_CARD_OUT = 0x11  # {}
    SHOE_EMPTY = 0x12  # {}
    DOOR = 0x13  # {"open": bool}
    JAM = 0x14  # {"detail": str} ; cleared by JAM_CLEARED
    JAM_CLEARED = 0x15  # {}
    BUTTON = 0x16  # {"button": str} (optional dealer buttons)
    # deck scanner
    SCAN_BEGIN = 0x20  # {"expected": int | null}
    SCAN_CARD = 0x21  # {"card": "AS"} or {"unreadable": true}
    SCAN_END = 0x22  # {"count": int}
    # shuffler (batch and continuous)
    LOADED = 0x30  # {"count": int}
    SHUFFLE_STARTED = 0x31  # {}
    SHUFFLE_DONE = 0x32  # {"count": int}
    DECK_CHECK = 0x33  # {"cards": [str, ...]} the shuffler's own full read
    DELIVERED = 0x34  # {"card": "7H"} continuous shufflers deal through their own shoe
    DISCARDS_ACCEPTED = 0x35  # {"count": int}
    FAULT = 0x36  # {"code": "JAM"|"DOOR_OPEN"|"COUNT_MISMATCH"|..., "detail": str}
    FAULT_CLEARED = 0x37  # {"code": str}
    STATUS = 0x38  # {"state": str, "cards": int}
    # commands, controller → device; each answered by ACK (or NAK) then its result
    CMD_SHUFFLE = 0x40
    CMD_DECK_CHECK = 0x41
    CMD_EJECT = 0x42
    CMD_STATUS = 0x43


COMMANDS = frozenset({Kind.CMD_SHUFFLE, Kind.CMD_DECK_CHECK, Kind.CMD_EJECT, Kind.CMD_STATUS,
                      Kind.HELLO, Kind.RESEND})


@dataclass(frozen=True, slots=True)
class Identity:
    """What a device says it is; checked against the table's allowlist."""

    kind: str  # "shoe" | "scanner" | "shuffler"
    model: str
    serial: str
    firmware: str
    firmware_hash: str

    @classmethod
    def from_body(cls, body: dict) -> Identity:
        missing = [k for k in ("kind", "model", "serial", "firmware", "firmware_hash")
                   if not isinstance(body.get(k), str) or not body.get(k)]
        if missing:
            raise ValueError(f"identity lacks {', '.join(missing)}")
        return cls(body["kind"], body["model"], body["serial"], body["firmware"],
                   body["firmware_hash"])


# Link timing (seconds); tables may override in their config.
HEARTBEAT_PERIOD = 1.0
HEARTBEAT_TIMEOUT = 3.0
ACK_TIMEOUT = 0.25
COMMAND_RETRIES = 3
