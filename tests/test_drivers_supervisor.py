"""The supervisor: capped exponential backoff, a device found again by its USB serial number
under a new port name, device_fault on loss and device_ok after a good re-handshake, and a
device whose identity changed refused.

Most tests use a device without threads (what it sends goes straight into the driver's
queue) and step the time by hand; one runs real ptys with a mocked ``comports``.
"""

from __future__ import annotations

import os
import select
import threading
import time
from dataclasses import replace
from itertools import count
from types import SimpleNamespace
from typing import Any

import pytest

from controller.events import DeviceConnected, DeviceFault, DeviceOk
from drivers.diagnostics import DeviceDiagnostic, DeviceNotice
from drivers.errors import DeviceIdentityError, DeviceNotFound
from drivers.framing import Frame, FrameDecoder, encode
from drivers.protocol import Identity, Kind
from drivers.serial_transport import SerialTransport
from drivers.shoe import ShoeDriver
from drivers.supervisor import Backoff, Supervisor
from drivers.transport import Transport, TransportFault

T = "2026-11-21T10:00:00.000Z"
SHOE = Identity("shoe", "SW-SHOE-1", "SH123456", "2.4.1", "sha256:9f2c")


def body(identity: Identity) -> dict[str, str]:
    return {"kind": identity.kind, "model": identity.model, "serial": identity.serial,
            "firmware": identity.firmware, "firmware_hash": identity.firmware_hash}


class SyncDevice(Transport):
    """A shoe with no reader thread: it answers HELLO at once, into the driver's queue."""

    description = "sync"

    def __init__(self, identity: Identity = SHOE) -> None:
        super().__init__()
        self.identity = identity
        self.present = True
        self.answers = True
        self.opens: list[float] = []
        self.now = 0.0
        self._open = False
        self._on_data: Any = None
        self._on_fault: Any = None

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> None:
        self.opens.append(self.now)
        if not self.present:
            raise DeviceNotFound("not plugged in")
        self._open = True

    def _close(self) -> None:
        self._open = False

    def start(self, on_data, on_fault):  # type: ignore[no-untyped-def]
        self._on_data, self._on_fault = on_data, on_fault
        return None

    def read(self) -> bytes:  # pragma: no cover - no reader thread here
        return b""

    def write(self, data: bytes) -> None:
        for f in FrameDecoder().feed(data):
            if isinstance(f, Frame) and f.type == Kind.HELLO and self.answers:
                self._on_data(encode(0, Kind.ACK, {"ack": f.seq})
                              + encode(1, Kind.IDENTITY, body(self.identity)))

    def unplug(self) -> None:
        self.present = False
        self._open = False
        self._on_fault(TransportFault("DISCONNECTED", "unplugged"))


def faults(out: list) -> list[tuple[str, str]]:
    return [(e.type, e.code) for e in out if isinstance(e, DeviceFault | DeviceOk)]


def run_until(sup: Supervisor, device: SyncDevice, start: float, end: float,
              step: float = 0.05) -> list:
    out: list = []
    t = start
    while t <= end + 1e-9:
        device.now = t
        out += sup.poll(t)
        t = round(t + step, 6)
    return out


# --------------------------------------------------------------------------- backoff


def test_backoff_doubles_and_is_capped() -> None:
    assert Backoff(0.5, 2.0, 4.0).delays(7) == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert Backoff().delay(1000) == 30.0
    assert Backoff(1.0, 1.0, 1.0).delays(3) == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        Backoff(initial=0)
    with pytest.raises(ValueError):
        Backoff(initial=5, cap=1)


def test_reconnect_attempts_follow_the_capped_backoff_then_recover() -> None:
    device = SyncDevice()
    device.present = False
    shoe = ShoeDriver("shoe", device, utc=lambda: T)
    sup = Supervisor(shoe, backoff=Backoff(0.5, 2.0, 4.0))
    out = sup.start(0.0)
    assert faults(out) == [("device_fault", "DISCONNECTED")]
    assert [d.kind for d in out if isinstance(d, DeviceDiagnostic | DeviceNotice)] == [
        "CONNECT_FAILED"]
    out = run_until(sup, device, 0.0, 16.0)
    # tries at 0, then +0.5, +1, +2, +4 (capped), +4, +4
    assert device.opens == [0.0, 0.5, 1.5, 3.5, 7.5, 11.5, 15.5]
    assert faults(out) == []  # DISCONNECTED is raised once, not at every attempt
    device.present = True
    out = run_until(sup, device, 16.05, 20.0)
    assert device.opens[-1] == 19.5 and sup.state == "up" and shoe.state == "ready"
    assert faults(out) == [("device_ok", "DISCONNECTED")]
    # after a success the backoff starts again from the beginning
    device.unplug()
    device.present = False
    run_until(sup, device, 20.0, 21.0)
    assert device.opens[-1] == 20.5


def test_loss_is_a_fault_and_a_good_re_handshake_is_ok() -> None:
    device = SyncDevice()
    shoe = ShoeDriver("shoe", device, utc=lambda: T)
    sup = Supervisor(shoe, backoff=Backoff(0.5, 2.0, 8.0))
    sup.start(0.0)
    out = sup.poll(0.0)
    assert sup.state == "up" and faults(out) == []
    device.unplug()
    out = sup.poll(1.0)
    assert faults(out) == [("device_fault", "DISCONNECTED")] and sup.state == "waiting"
    assert sup.next_attempt == 1.5
    device.present = True
    out = run_until(sup, device, 1.05, 2.0)
    assert faults(out) == [("device_ok", "DISCONNECTED")] and sup.state == "up"


def test_the_reader_threads_poll_serves_an_up_device_and_leaves_reconnecting_to_the_owner(
        ) -> None:
    """``poll_received`` (a reader thread, right after it queued bytes) polls the driver only
    while the device is up; a loss it sees schedules the retry, and the attempt itself,
    due at once, is left to the owner's ``poll``."""
    device = SyncDevice()
    shoe = ShoeDriver("shoe", device, utc=lambda: T)
    sup = Supervisor(shoe, backoff=Backoff(0.5, 2.0, 8.0))
    assert sup.poll_received(0.0) is None  # not started
    sup.start(0.0)
    assert sup.state == "connecting" and sup.poll_received(0.0) is None  # the handshake: not up
    assert [e.type for e in sup.poll(0.0)] == ["device_connected"] and sup.state == "up"
    device._on_data(encode(2, Kind.CARD_OUT, {"card": "7H"}))
    out = sup.poll_received(0.1)
    assert out is not None and [e.type for e in out] == ["card"]
    device.unplug()
    out = sup.poll_received(1.0)
    assert out is not None and faults(out) == [("device_fault", "DISCONNECTED")]
    assert sup.state == "waiting" and sup.next_attempt == 1.5
    device.present = True
    assert sup.poll_received(5.0) is None and device.opens == [0.0]  # due, not attempted
    run_until(sup, device, 5.0, 5.05)
    assert device.opens == [0.0, 5.0] and sup.state == "up"


def test_a_device_that_does_not_answer_the_handshake_is_retried() -> None:
    device = SyncDevice()
    device.answers = False
    shoe = ShoeDriver("shoe", device, utc=lambda: T, handshake_timeout=2.0)
    sup = Supervisor(shoe, backoff=Backoff(1.0, 2.0, 8.0))
    sup.start(0.0)
    out = run_until(sup, device, 0.0, 6.0)
    # HELLO unanswered after its retries (1 s) → lost → retry after 1 s, then 2 s
    assert device.opens == [0.0, 2.0, 5.0]
    assert set(faults(out)) == {("device_fault", "NO_ACK"), ("device_fault", "DISCONNECTED")}
    device.answers = True
    out = run_until(sup, device, 6.05, 12.0)
    assert sup.state == "up"
    assert sorted(faults(out)) == [("device_ok", "DISCONNECTED"), ("device_ok", "NO_ACK")]


def test_an_identity_change_is_refused_and_not_retried_until_resumed() -> None:
    device = SyncDevice()
    shoe = ShoeDriver("shoe", device, utc=lambda: T)
    sup = Supervisor(shoe, backoff=Backoff(0.5, 2.0, 8.0))
    sup.start(0.0)
    sup.poll(0.0)
    device.unplug()
    sup.poll(0.1)
    device.identity = replace(SHOE, serial="SH000001")  # another shoe plugged in
    device.present = True
    out = run_until(sup, device, 0.15, 1.0)
    assert sup.state == "refused" and shoe.state == "refused"
    assert ("device_fault", "DEVICE_IDENTITY") in faults(out)
    refused = [d for d in out if isinstance(d, DeviceDiagnostic) and d.code == "DEVICE_IDENTITY"]
    assert len(refused) == 1 and isinstance(shoe.refusal, DeviceIdentityError)
    assert "serial" in refused[0].detail
    opens = len(device.opens)
    run_until(sup, device, 1.05, 60.0, step=1.0)
    assert len(device.opens) == opens  # no more attempts
    device.identity = SHOE  # a person put the right shoe back
    sup.resume(61.0)
    out = sup.poll(61.0)
    assert sup.state == "up"
    assert sorted(faults(out)) == [("device_ok", "DEVICE_IDENTITY"), ("device_ok", "DISCONNECTED")]


def test_run_loop_uses_the_injected_clock_and_sleep() -> None:
    device = SyncDevice()
    shoe = ShoeDriver("shoe", device, utc=lambda: T)
    clock = [0.0]
    stop = threading.Event()
    seen: list = []

    def sleep(dt: float) -> None:
        clock[0] += dt
        if clock[0] >= 1.0:
            stop.set()

    sup = Supervisor(shoe, clock=lambda: clock[0], sleep=sleep)
    sup.run(stop, seen.append, interval=0.1)
    assert any(isinstance(o, DeviceConnected) and o.device == "shoe" for o in seen)
    assert sup.state == "stopped" and shoe.state == "closed"


# --------------------------------------------------------------------------- real ptys


class PtyShoe:
    """A fake shoe on a pty master: answers HELLO with ACK + IDENTITY."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.path = os.ttyname(self.slave)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        decoder = FrameDecoder()
        seq = count()
        while not self._stop.is_set():
            if not select.select([self.master], [], [], 0.02)[0]:
                continue
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            for f in decoder.feed(data):
                if isinstance(f, Frame) and f.type == Kind.HELLO:
                    seq = count()
                    os.write(self.master, encode(next(seq), Kind.ACK, {"ack": f.seq})
                             + encode(next(seq), Kind.IDENTITY, body(SHOE)))

    def unplug(self) -> None:
        self._stop.set()
        self._thread.join(2)
        for fd in (self.master, self.slave):
            if fd >= 0:
                os.close(fd)
        self.master = self.slave = -1


def test_the_device_is_found_again_by_usb_serial_under_a_new_name() -> None:
    first = PtyShoe()
    ports = [SimpleNamespace(device=first.path, serial_number="A10K3F")]
    transport = SerialTransport("/dev/ttyUSB0", usb_serial="A10K3F", comports=lambda: list(ports))
    shoe = ShoeDriver("shoe", transport)
    sup = Supervisor(shoe, backoff=Backoff(0.01, 2.0, 0.05))
    out: list = []
    second: PtyShoe | None = None

    def until(what: str, check) -> None:  # type: ignore[no-untyped-def]
        end = time.monotonic() + 10
        while time.monotonic() < end:
            out.extend(sup.poll())
            if check():
                return
            time.sleep(0.002)
        raise AssertionError(f"gave up waiting for {what}: {out}")

    try:
        out += sup.start()
        until("up", lambda: sup.state == "up")
        assert transport.current == first.path
        second = PtyShoe()  # made now so that the kernel gives it another name
        ports.clear()  # unplugged: gone from the system's port list too
        first.unplug()
        until("DISCONNECTED", lambda: ("device_fault", "DISCONNECTED") in faults(out))
        until("a failed retry", lambda: any(getattr(o, "kind", "") == "CONNECT_FAILED"
                                            for o in out))
        ports.append(SimpleNamespace(device=second.path, serial_number="A10K3F"))  # back
        until("device_ok", lambda: ("device_ok", "DISCONNECTED") in faults(out))
        assert sup.state == "up" and transport.current == second.path != first.path
    finally:
        sup.stop()
        first.unplug()
        if second is not None:
            second.unplug()
