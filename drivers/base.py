"""The driver model: a device driver turns a device's traffic into the engine's input events.

:class:`DeviceDriver` is the abstract driver (like python-can's ``BusABC``): ``name``,
``kind``, ``identity``, ``state``, ``open()``, ``close()``, ``poll(now) -> list[Output]``
(and an optional ``on_event`` callback), and the bookkeeping every driver shares: which
faults it has open, so a ``device_ok`` is only sent for a fault that is open, and the
bounds on what a device can make the controller hold. An output
(:mod:`drivers.diagnostics`) is an input event — for the engine, or about the device itself
(a ``device_diagnostic``, a ``device_connected``), logged as the driver made it — or a notice
for the text log.

The SWP/1 driver over a link and a transport is :class:`drivers.swp.SwpDriver`; the
transports are in :mod:`drivers.transport`. This module knows neither, so a vendor's
driver for another protocol needs only this one.

Threads: ``poll`` runs in the caller's (the table's owner) thread, which is where events
are produced. ``poll`` never raises for anything a device sends.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, ClassVar

from controller.events import DeviceFault, DeviceOk
from controller.validation import printable
from drivers.allowlist import Allowlist
from drivers.diagnostics import (
    DRIVER_FAULT_CODES,
    MAX_DIAGNOSTIC_DETAIL,
    PROTOCOL_ERROR,
    DeviceDiagnostic,
    DeviceNotice,
    Output,
    utc_now,
)
from drivers.protocol import Identity

# Bounds on what a device can make the controller hold (issue 8): a device's own fault
# codes are names, not essays, and a device cannot open faults without limit.
DEVICE_FAULT_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,31}")
MAX_OPEN_FAULTS = 16
MAX_DETAIL = 300

class DriverState(StrEnum):
    """Where a driver's connection is. Equal to its plain string (``"ready"``), so what
    logs and tests compare stays the same."""

    CLOSED = "closed"  # never opened, or closed by the runtime
    HANDSHAKE = "handshake"  # the transport is open, the device has not identified yet
    READY = "ready"  # identified and admitted: messages become events
    LOST = "lost"  # the connection went (or could not be made); the supervisor retries
    REFUSED = "refused"  # the device's identity was refused; a person must act


class DeviceDriver(ABC):
    """A card-handling device as the runtime sees it. Subclasses set :attr:`kind`.

    ``poll(now)`` returns input events (for ``TableSession.feed``, diagnostics included)
    and notices (for the text log) in the order they happened; with ``on_event`` set,
    each output is also passed to it. Faults the driver raised are remembered in
    :attr:`open_faults` so a ``device_ok`` is only sent for a fault that is open.
    """

    kind: ClassVar[str] = ""

    def __init__(self, name: str, *, on_event: Callable[[Output], None] | None = None,
                 utc: Callable[[], str] = utc_now,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.on_event = on_event
        self.utc = utc
        self.clock = clock
        self.open_faults: dict[str, str | None] = {}
        self._identity: Identity | None = None

    @property
    def identity(self) -> Identity | None:
        """The identity admitted at the last handshake (``None`` before one)."""
        return self._identity

    @property
    @abstractmethod
    def state(self) -> DriverState:
        """``closed``, ``handshake``, ``ready``, ``lost`` or ``refused``."""

    @abstractmethod
    def open(self, now: float | None = None) -> None:
        """Open the transport and start the handshake (does not wait for it)."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def poll(self, now: float | None = None) -> list[Output]: ...

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any], *,
                    allowlist: Allowlist | None = None, **kwargs: Any) -> DeviceDriver:
        """Build the driver from a table config's ``[devices.<name>]`` table."""
        raise NotImplementedError(f"{cls.__name__} cannot be built from config")

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        """The keys of ``[devices.<name>]`` this driver reads (``driver`` names it)."""
        return frozenset({"driver"})

    @classmethod
    def check_keys(cls, name: str, config: Mapping[str, Any]) -> None:
        """Refuse a key the driver does not read — a misspelt timeout must not go unnoticed
        (``devices.<name>.<key>: unknown key``, like an unknown top-level key)."""
        known = cls.config_keys()
        for key in config:
            if key not in known:
                raise ValueError(f"devices.{name}.{key}: unknown key for driver "
                                 f"{config.get('driver', cls.__name__)!s} (known: "
                                 f"{', '.join(sorted(known))})")

    def __enter__(self) -> DeviceDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # faults -------------------------------------------------------------------
    def fault(self, code: str, detail: str | None = None, *, t: str | None = None,
              repeat: bool = False) -> list[Output]:
        """A ``device_fault`` (once while open, unless ``repeat``: every unreadable card and
        every loss is news)."""
        if code in self.open_faults and not repeat:
            return []
        detail = printable(detail)[:MAX_DETAIL] if detail else detail
        self.open_faults[code] = detail
        return [DeviceFault(device=self.name, code=code, detail=detail or None,
                            t=t or self.utc())]

    def device_fault(self, code: str, detail: str | None = None, *,
                     t: str | None = None) -> list[Output]:
        """A fault code the device itself sent: a name of at most 32 capitals, digits and
        underscores, and at most :data:`MAX_OPEN_FAULTS` open at once. Anything else is
        still a fault — play stops — under the generic code ``FAULT``, the device's
        code in the detail; so no device can make the controller hold without limit."""
        raw = code.strip()
        code = raw.upper()
        if not DEVICE_FAULT_CODE.fullmatch(code) or code in DRIVER_FAULT_CODES:
            shown = raw[:40] + ("…" if len(raw) > 40 else "")
            return self.fault("FAULT", f"device fault code {shown!r}"
                              + (f": {detail}" if detail else ""), t=t)
        if code not in self.open_faults and len(self.open_faults) >= MAX_OPEN_FAULTS:
            return self.fault("FAULT", f"{code} (more than {MAX_OPEN_FAULTS} faults open)"
                              + (f": {detail}" if detail else ""), t=t)
        return self.fault(code, detail, t=t)

    def device_ok(self, code: str, detail: str = "cleared by the device", *,
                  t: str | None = None) -> list[Output]:
        """A fault the device itself says is over: one of its own codes only. The faults the
        driver raises (a lost frame, an unreadable card, a silent or disconnected link) are
        cleared by the driver or by a person, never by the device's word (nothing then)."""
        code = code.strip().upper()
        if code in DRIVER_FAULT_CODES:
            return []
        return self.ok(code, detail, t=t)

    def ok(self, code: str, detail: str | None = None, *, t: str | None = None) -> list[Output]:
        """A ``device_ok`` for an open fault (nothing if it is not open)."""
        if code not in self.open_faults:
            return []
        del self.open_faults[code]
        return [DeviceOk(device=self.name, code=code, detail=detail or None, t=t or self.utc())]

    def clear_fault(self, code: str) -> list[Output]:
        """A person dealt with a latched fault (``UNREADABLE_CARD``, ``LOST_FRAMES``, a door or
        jam the device never reported clear): the ``device_ok`` to feed, if it was open."""
        return self.ok(code, "cleared by a person")

    def restore_faults(self, codes: Iterable[str]) -> None:
        """After a restart: the faults the engine still has open for this device, so their
        clearing messages are forwarded."""
        for code in codes:
            self.open_faults.setdefault(code, None)

    def diagnostic(self, code: str, kind: str = "", *, count: int = 0, total: int = 0,
                   detail: str = "", t: str | None = None) -> DeviceDiagnostic:
        """A ``device_diagnostic`` input event, as the audit log keeps it: ``count`` and
        ``total`` only for a ``PROTOCOL_ERROR``, the detail cut to
        :data:`~drivers.diagnostics.MAX_DIAGNOSTIC_DETAIL` characters."""
        counted = code == PROTOCOL_ERROR
        return DeviceDiagnostic(device=self.name, code=code, kind=kind or None,
                                count=max(count, 0) if counted else None,
                                total=max(total, 0) if counted else None,
                                detail=printable(detail)[:MAX_DIAGNOSTIC_DETAIL] or None,
                                t=t or self.utc())

    def note(self, kind: str, *, detail: str = "",
             data: Mapping[str, Any] | None = None) -> DeviceNotice:
        """A notice for the text log (not an input)."""
        return DeviceNotice(self.name, kind, detail, data, self.utc())
