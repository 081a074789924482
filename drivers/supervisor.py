"""Keeps one device connected: reconnects with capped exponential backoff.

:class:`Supervisor` wraps an :class:`~drivers.swp.SwpDriver`. When the connection is lost
(a ``DISCONNECTED`` transport fault, a failed handshake, a port that will not open) the
driver has already emitted ``device_fault`` ``DISCONNECTED``; the supervisor then
reopens the driver's transport after ``backoff.delay(0)``, ``delay(1)``, … seconds
(``initial * factor**n``, capped at ``cap``) until a handshake succeeds, and the driver
emits ``device_ok`` for every link fault once the device is identified again. A serial
transport configured with ``usb_serial`` looks its port up again on every attempt, so
the device is found under a new name (``/dev/ttyUSB0`` → ``/dev/ttyUSB1``).

A device that comes back as another device (any identity field changed) is refused
(:class:`~drivers.errors.DeviceIdentityError`, a ``DEVICE_IDENTITY`` diagnostic and
``device_fault``) and the supervisor stops trying until :meth:`Supervisor.resume`.

Non-blocking: call :meth:`poll` from the table's owner loop (the clock is injected, so
tests step time by hand). :meth:`run` is a blocking loop on top, with injectable
``clock`` and ``sleep``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from drivers.base import DriverState
from drivers.diagnostics import Output
from drivers.errors import DeviceError
from drivers.swp import SwpDriver

log = logging.getLogger("shoewarden.drivers.supervisor")


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays between reconnect attempts: ``initial * factor**n``, at most ``cap`` seconds."""

    initial: float = 0.5
    factor: float = 2.0
    cap: float = 30.0

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.factor < 1 or self.cap < self.initial:
            raise ValueError(f"bad backoff {self}")

    def delay(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (0 = the first retry)."""
        if attempt >= 64:  # factor**attempt would only overflow past the cap
            return self.cap
        return min(self.cap, self.initial * self.factor ** attempt)

    def delays(self, n: int) -> list[float]:
        return [self.delay(i) for i in range(n)]


class SupervisorState(StrEnum):
    """Where a supervisor is in its reconnect cycle (equal to its plain string)."""

    IDLE = "idle"  # not started
    CONNECTING = "connecting"  # the transport is open, the handshake under way
    UP = "up"  # the device is identified
    WAITING = "waiting"  # lost: the next attempt is due at ``next_attempt``
    REFUSED = "refused"  # the device's identity was refused: no retry until resumed
    STOPPED = "stopped"  # :meth:`Supervisor.stop` was called


class Supervisor:
    """``idle`` → ``connecting`` → ``up``; on loss ``waiting`` → ``connecting`` …; ``refused``
    after an identity change (until :meth:`resume`); ``stopped`` after :meth:`stop`."""

    def __init__(self, driver: SwpDriver, *, backoff: Backoff | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.driver = driver
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.sleep = sleep
        self.state = SupervisorState.IDLE
        self.failures = 0  # attempts in a row that did not reach "ready"
        self.next_attempt: float | None = None
        self.last_delay: float | None = None
        self.attempts = 0

    def start(self, now: float | None = None) -> list[Output]:
        """The first connection attempt."""
        now = self.clock() if now is None else now
        return self._attempt(now)

    def resume(self, now: float | None = None) -> list[Output]:
        """Try again after a refusal (a person has checked the device)."""
        now = self.clock() if now is None else now
        self.failures = 0
        return self._attempt(now)

    def stop(self) -> None:
        self.state = SupervisorState.STOPPED
        self.next_attempt = None
        self.driver.close()

    def poll(self, now: float | None = None) -> list[Output]:
        """The driver polled (links served, timers run), then the reconnect cycle: the state
        the driver is in now, and an attempt when one is due."""
        now = self.clock() if now is None else now
        if self.state in (SupervisorState.IDLE, SupervisorState.STOPPED):
            return []
        out = self.driver.poll(now)
        self._follow(now)
        if (self.state == SupervisorState.WAITING and self.next_attempt is not None
                and now >= self.next_attempt):
            out += self._attempt(now)
        return out

    def poll_received(self, now: float | None = None) -> list[Output] | None:
        """For the thread that has just queued the device's bytes (its reader thread): the
        driver polled as :meth:`poll` does, when the device is up, without the reconnect
        cycle's attempt (an attempt opens a transport and starts a reader thread: the owner
        thread's work). None, polling nothing, when the device is not up."""
        if self.state != SupervisorState.UP:
            return None
        now = self.clock() if now is None else now
        out = self.driver.poll(now)
        self._follow(now)
        return out

    def _follow(self, now: float) -> None:
        """The reconnect cycle follows the driver's state."""
        state = self.driver.state
        if state == DriverState.REFUSED:
            if self.state != SupervisorState.REFUSED:
                log.error("%s: refused; not reconnecting until resumed", self.driver.name)
            self.state = SupervisorState.REFUSED
            self.next_attempt = None
        elif state == DriverState.READY:
            if self.state != SupervisorState.UP:
                log.info("%s: up after %d attempt(s)", self.driver.name, self.attempts)
            self.state = SupervisorState.UP
            self.failures = 0
        elif state in (DriverState.LOST, DriverState.CLOSED) and self.state in (
                SupervisorState.UP, SupervisorState.CONNECTING):
            self._schedule(now)

    def _attempt(self, now: float) -> list[Output]:
        self.attempts += 1
        self.next_attempt = None
        try:
            self.driver.connect(now)
        except DeviceError as e:
            log.warning("%s: connect failed: %s", self.driver.name, e)
            out: list[Output] = [self.driver.note("CONNECT_FAILED", detail=str(e))]
            out += self.driver.lost(f"cannot connect: {e}", now)
            self._schedule(now)
            return out
        self.state = SupervisorState.CONNECTING
        return []

    def _schedule(self, now: float) -> None:
        delay = self.backoff.delay(self.failures)
        self.failures += 1
        self.last_delay = delay
        self.next_attempt = now + delay
        self.state = SupervisorState.WAITING
        log.info("%s: reconnect in %.2f s", self.driver.name, delay)

    def run(self, stop: threading.Event, on_output: Callable[[Output], None], *,
            interval: float = 0.01) -> None:
        """Blocking loop: start, then poll every ``interval`` until ``stop`` is set."""
        for o in self.start():
            on_output(o)
        while not stop.is_set():
            for o in self.poll():
                on_output(o)
            self.sleep(interval)
        self.stop()
