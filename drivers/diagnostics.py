"""What a driver puts out besides play events, and the codes it uses for them.

A driver's ``poll`` returns :data:`Output`: input events (:mod:`controller.events`) — play
events for the engine, and the events about the devices themselves that the runtime logs
as they are: a :class:`~controller.events.DeviceDiagnostic` (malformed traffic,
``PROTOCOL_ERROR`` with counts; a refused identity, ``DEVICE_IDENTITY``; a ``NAK``; a
``DRIVER_ERROR``) and a :class:`~controller.events.DeviceConnected` (an identified device)
— or a :class:`DeviceNotice` for the text log only. So the object a driver makes is the one
the audit writer serialises: one type, one ``to_record``. The codes live here, apart from
the driver classes, because the transports (their reader threads report ``DISCONNECTED`` /
``IO_ERROR`` / ``DRIVER_ERROR``), the drivers, the supervisor and the runtime all speak
them. They stay plain strings: they go into audit records as they are.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.events import DeviceDiagnostic, Event

__all__ = ["DeviceDiagnostic", "DeviceNotice", "Output", "level_of", "utc_now"]

# device_fault codes raised by the drivers themselves (the device's own come from its messages)
DISCONNECTED = "DISCONNECTED"
IO_ERROR = "IO_ERROR"
DRIVER_ERROR = "DRIVER_ERROR"
UNREADABLE_CARD = "UNREADABLE_CARD"
DEVICE_IDENTITY = "DEVICE_IDENTITY"
# the link's (drivers/link.py)
SILENT = "SILENT"
NO_ACK = "NO_ACK"
LOST_FRAMES = "LOST_FRAMES"
DRIVER_FAULT_CODES = frozenset({DISCONNECTED, IO_ERROR, DRIVER_ERROR, UNREADABLE_CARD,
                                DEVICE_IDENTITY, SILENT, NO_ACK, LOST_FRAMES})
"""The codes the drivers raise themselves: a device's own message never raises one (it is
the generic ``FAULT`` then) nor clears one (a person or the driver does)."""

# device_diagnostic codes
PROTOCOL_ERROR = "PROTOCOL_ERROR"
NAK = "NAK"
NOTICE = "NOTICE"
"""The code of a :class:`DeviceNotice` (never a ``device_diagnostic``: notices are not logged)."""

MAX_DIAGNOSTIC_DETAIL = 300
"""Longest ``detail`` a diagnostic carries into the log."""


@dataclass(frozen=True, slots=True)
class DeviceNotice:
    """Something a device said or a driver noticed that is news for the text log only, not
    an input: ``kind`` LOADED, SHUFFLE_STARTED, STATUS, BUTTON, CONNECT_FAILED,
    HANDSHAKE_FAILED, …; ``data`` the message's payload."""

    device: str
    kind: str
    detail: str = ""
    data: Mapping[str, Any] | None = None
    t: str | None = None

    code = NOTICE


Output = Event | DeviceNotice


def level_of(o: DeviceDiagnostic | DeviceNotice) -> int:
    """The text log's level for a diagnostic or a notice."""
    if isinstance(o, DeviceNotice):
        return logging.INFO
    return logging.ERROR if o.code in (DEVICE_IDENTITY, DRIVER_ERROR) else logging.WARNING


def utc_now() -> str:
    """The wall-clock time stamp put on events (``t``), ISO-8601 UTC with milliseconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
