"""What a driver puts out besides input events, and the codes it uses for them.

A driver's ``poll`` returns :data:`Output`: an input event (:mod:`controller.events`) for
the engine, or a :class:`DeviceDiagnostic` for the runtime to log — malformed traffic
(``PROTOCOL_ERROR``, with counts), a refused identity (``DEVICE_IDENTITY``), a NAK, a
notice. The codes live here, apart from the driver classes, because the transports (their
reader threads report ``DISCONNECTED`` / ``IO_ERROR`` / ``DRIVER_ERROR``), the drivers,
the supervisor and the runtime all speak them. They stay plain strings: they go into
audit records as they are.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.events import Event
from drivers.errors import DeviceError

# device_fault codes raised by the drivers themselves (the device's own come from its messages)
DISCONNECTED = "DISCONNECTED"
IO_ERROR = "IO_ERROR"
DRIVER_ERROR = "DRIVER_ERROR"
UNREADABLE_CARD = "UNREADABLE_CARD"
DEVICE_IDENTITY = "DEVICE_IDENTITY"

# DeviceDiagnostic codes
PROTOCOL_ERROR = "PROTOCOL_ERROR"
NAK = "NAK"
NOTICE = "NOTICE"


@dataclass(frozen=True, slots=True)
class DeviceDiagnostic:
    """Something the runtime logs that is not an input event.

    ``code``: ``PROTOCOL_ERROR`` (malformed traffic; ``kind`` says which, ``count`` this
    occurrence, ``total`` the running count of that kind on this device),
    ``DEVICE_IDENTITY`` (a refused device; ``error`` is the :class:`DeviceIdentityError`),
    ``NAK`` (a command refused; ``kind`` the command), ``DRIVER_ERROR`` (a bug caught) or
    ``NOTICE`` (``kind`` IDENTIFIED, LOADED, SHUFFLE_STARTED, STATUS, BUTTON, CONNECT_FAILED,
    HANDSHAKE_FAILED, …; ``data`` the payload).
    """

    device: str
    code: str
    kind: str = ""
    count: int = 0
    total: int = 0
    detail: str = ""
    data: Mapping[str, Any] | None = None
    t: str | None = None
    error: DeviceError | None = field(default=None, compare=False)

    @property
    def level(self) -> int:
        if self.code == NOTICE:
            return logging.INFO
        return logging.ERROR if self.code in (DEVICE_IDENTITY, DRIVER_ERROR) else logging.WARNING

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "device_diagnostic", "device": self.device,
                               "code": self.code}
        for key in ("kind", "count", "total", "detail", "t"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.data is not None:
            out["data"] = dict(self.data)
        return out


Output = Event | DeviceDiagnostic


def utc_now() -> str:
    """The wall-clock time stamp put on events (``t``), ISO-8601 UTC with milliseconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
