"""Bytes to and from one device, and the reader thread that never dies silently.

* :class:`Transport` — the ABC every transport implements (serial in
  :mod:`drivers.serial_transport`, USB in :mod:`drivers.usb_transport`, memory here):
  ``open``, ``write``, a ``read`` that blocks at most a short timeout, ``close``; it can
  be opened again after ``close`` (a reconnect).
* :class:`ReaderThread` — calls ``read()`` in a loop and hands the bytes on; every
  exception becomes a :class:`TransportFault`, which the driver turns into a
  ``device_fault``.
* :class:`MemoryTransport` — in memory, for tests and benches.

Kept apart from the drivers because it is the first step of a card's way in: bytes, with
no notion of frames or messages (those are :mod:`drivers.link`'s and the drivers').
"""

from __future__ import annotations

import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from drivers.diagnostics import DISCONNECTED, DRIVER_ERROR, IO_ERROR
from drivers.errors import DeviceDisconnected, DeviceNotFound

log = logging.getLogger("shoewarden.drivers")


@dataclass(frozen=True, slots=True)
class TransportFault:
    """A reader thread's report: ``DISCONNECTED`` (the reader stopped), ``IO_ERROR`` (it goes
    on), or ``DRIVER_ERROR`` (the data handler raised; it goes on)."""

    code: str
    detail: str
    error: BaseException | None = field(default=None, compare=False)


class ReaderThread(threading.Thread):
    """Calls ``read()`` in a loop and hands bytes to ``on_data``; NEVER dies silently.

    Every exception is caught and logged: from ``read`` it becomes a fault
    (``DeviceDisconnected`` → ``DISCONNECTED`` and the thread ends; anything else →
    ``IO_ERROR``, and after ``max_errors`` in a row → ``DISCONNECTED``); from ``on_data``
    it becomes ``DRIVER_ERROR`` and reading goes on. The thread's end is always
    reported, unless :meth:`stop` asked for it.
    """

    def __init__(self, read: Callable[[], bytes], on_data: Callable[[bytes], None],
                 on_fault: Callable[[TransportFault], None], *, name: str = "reader",
                 max_errors: int = 5, error_pause: float = 0.05) -> None:
        super().__init__(name=f"shoewarden-{name}", daemon=True)
        self._read = read
        self._on_data = on_data
        self._on_fault = on_fault
        self._stop_event = threading.Event()
        self.max_errors = max_errors
        self.error_pause = error_pause
        self.faults = 0

    def stop(self) -> None:
        self._stop_event.set()

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def _report(self, fault: TransportFault) -> None:
        self.faults += 1
        try:
            self._on_fault(fault)
        except Exception:
            log.exception("%s: fault handler failed for %s", self.name, fault.code)

    def run(self) -> None:
        errors = 0
        ended: TransportFault | None = None
        try:
            while not self._stop_event.is_set():
                try:
                    data = self._read()
                except Exception as e:
                    if self._stop_event.is_set():
                        break
                    if isinstance(e, DeviceDisconnected):
                        log.warning("%s: disconnected: %s", self.name, e)
                        ended = TransportFault(DISCONNECTED, str(e), e)
                        break
                    errors += 1
                    # a device's read error is expected: one line, the traceback for debugging
                    log.warning("%s: read error %d/%d: %s", self.name, errors, self.max_errors, e)
                    log.debug("%s: read error", self.name, exc_info=True)
                    if errors >= self.max_errors:
                        ended = TransportFault(DISCONNECTED, f"{errors} read errors in a row: {e}",
                                               e)
                        break
                    self._report(TransportFault(IO_ERROR, str(e), e))
                    self._stop_event.wait(self.error_pause)
                    continue
                errors = 0
                if not data:
                    continue
                try:
                    self._on_data(data)
                except Exception as e:
                    log.exception("%s: data handler raised", self.name)
                    self._report(TransportFault(DRIVER_ERROR, f"data handler raised {e!r}", e))
        except BaseException as e:  # not even this ends the thread unreported
            log.exception("%s: reader loop failed", self.name)
            ended = TransportFault(IO_ERROR, f"reader loop failed: {e!r}", e)
            raise
        finally:
            if ended is not None and not self._stop_event.is_set():
                self._report(ended)
            log.debug("%s: reader stopped", self.name)


class Transport(ABC):
    """Bytes to and from one device. ``read()`` blocks at most a short timeout and returns
    ``b""`` when nothing came; errors are raised as :mod:`drivers.errors` types, ``from``
    the underlying pyserial / pyusb error. A transport can be opened again after
    :meth:`close` (a reconnect)."""

    description = "transport"

    def __init__(self) -> None:
        self._reader: ReaderThread | None = None

    @property
    @abstractmethod
    def is_open(self) -> bool: ...

    @abstractmethod
    def open(self) -> None: ...

    @abstractmethod
    def _close(self) -> None:
        """Release the port / device (the reader thread is already stopped)."""

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def read(self) -> bytes: ...

    def cancel_read(self) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Wake a blocked ``read`` (optional)."""

    def start(self, on_data: Callable[[bytes], None],
              on_fault: Callable[[TransportFault], None]) -> ReaderThread:
        """Start the reader thread."""
        self.stop_reader()
        self._reader = ReaderThread(self.read, on_data, on_fault, name=self.description)
        self._reader.start()
        return self._reader

    @property
    def reader(self) -> ReaderThread | None:
        return self._reader

    def stop_reader(self, timeout: float = 1.0) -> None:
        reader, self._reader = self._reader, None
        if reader is None:
            return
        reader.stop()
        try:
            self.cancel_read()
        except Exception:
            log.debug("%s: cancel_read failed", self.description, exc_info=True)
        if reader is not threading.current_thread() and reader.is_alive():
            reader.join(timeout)
            if reader.is_alive():
                log.warning("%s: reader thread did not stop within %.1f s", self.description,
                            timeout)

    def close(self) -> None:
        """Stop the reader thread, then release the port. Safe to call twice."""
        self.stop_reader()
        try:
            self._close()
        except Exception:
            log.warning("%s: error while closing", self.description, exc_info=True)


class MemoryTransport(Transport):
    """An in-memory transport for tests and benches: ``inject()`` what the device sends,
    read ``written`` for what the controller sent, ``disconnect()`` to pull the plug."""

    description = "memory"

    def __init__(self, *, on_write: Callable[[bytes], None] | None = None,
                 available: bool = True) -> None:
        super().__init__()
        self.available = available
        self.on_write = on_write
        self.written: list[bytes] = []
        self.opened = 0
        self._incoming: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> None:
        if not self.available:
            raise DeviceNotFound("memory device not present")
        self._incoming = queue.SimpleQueue()
        self._open = True
        self.opened += 1

    def _close(self) -> None:
        self._open = False

    def inject(self, data: bytes) -> None:
        self._incoming.put(data)

    def disconnect(self) -> None:
        self._incoming.put(None)

    def write(self, data: bytes) -> None:
        if not self._open:
            raise DeviceDisconnected("memory transport is closed")
        self.written.append(bytes(data))
        if self.on_write is not None:
            self.on_write(bytes(data))

    def read(self) -> bytes:
        if not self._open:
            raise DeviceDisconnected("memory transport is closed")
        try:
            data = self._incoming.get(timeout=0.05)
        except queue.Empty:
            return b""
        if data is None:
            self._open = False
            raise DeviceDisconnected("memory device unplugged")
        return data

    def cancel_read(self) -> None:
        self._incoming.put(b"")
