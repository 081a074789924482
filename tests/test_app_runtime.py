"""The table runtime: one engine thread, write-ahead, diagnostics as inputs, never a silent
death. The devices here are the simulator's shoe model behind a memory transport, driven
from the test thread; the log is written to a string. No timed assertions."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from controller.app.runtime import (
    CONTROLLER,
    CONTROLLER_ERROR,
    DirectSequencer,
    TableRuntime,
    counted_flags,
)
from controller.audit import AuditLog
from controller.audit.records import LogRecord
from controller.audit.replay import Replayer
from controller.deviations import Deviation
from controller.events import (
    CardDrawn,
    CutCardSeen,
    DeckCheck,
    DeviceFault,
    DeviceOk,
    Event,
    Shuffle,
    parse_event,
)
from controller.profiles import load_profile
from controller.session import TableSession
from drivers.allowlist import Allowlist
from drivers.diagnostics import DeviceDiagnostic
from drivers.shoe import ShoeDriver
from drivers.transport import MemoryTransport
from simulators.devices import Shoe

T = "2026-11-21T10:00:00.000Z"


def records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.002)


class Table:
    """A runtime on a gr-blackjack session logging to a string, with one shoe model behind a
    memory transport (the test plays the device)."""

    def __init__(self, on_fed: Callable[..., None] | None = None, allow: bool = True,
                 tick: float = 5.0) -> None:
        self.stream = io.StringIO()
        self.session = TableSession(load_profile("gr-blackjack"),
                                    AuditLog.to_stream(self.stream), {"command": "test"})
        self.session.start("T1")
        self.device = Shoe()
        self.lock = threading.Lock()
        self.transport = MemoryTransport(on_write=self._from_controller)
        ident = self.device.identity
        entry = {"kind": ident.kind, "model": ident.model, "serial": ident.serial,
                 "firmware": ident.firmware, "firmware_hash": ident.firmware_hash}
        if not allow:
            entry["serial"] = "SOMEONE-ELSE"
        self.driver = ShoeDriver("shoe", self.transport, allowlist=Allowlist.from_config(
            {"allowlist": [entry]}), utc=lambda: T)
        self.fed: list[tuple[Event, list[Any], int | None]] = []
        self.logged_before_shown: list[bool] = []

        def fed(event: Event, outputs: list[Any], line: int | None) -> None:
            # write-ahead: the input record is in the log before anything is shown
            self.logged_before_shown.append(
                any(r["kind"] == "input" and r["event"] == event.to_record()
                    for r in records(self.stream)))
            self.fed.append((event, outputs, line))
            if on_fed is not None:
                on_fed(event, outputs, line)

        self.runtime = TableRuntime(self.session, devices={"shoe": self.driver},
                                    driver_names={"shoe": "swp-shoe"},
                                    sequencer=DirectSequencer(), on_fed=fed, tick=tick)

    def _from_controller(self, data: bytes) -> None:
        with self.lock:
            self.device.receive(data, time.monotonic())
        self.pump()

    def pump(self) -> None:
        with self.lock:
            out = self.device.tick(time.monotonic())
        if out:
            self.transport.inject(out)

    def draw(self, cards: list[str]) -> None:
        """The shoe deals ``cards``; their frames come in on the transport's reader thread."""
        with self.lock:
            self.device.load(cards)
            for _ in cards:
                self.device.draw()
        self.pump()

    def types(self) -> list[str]:
        return [e.type for e, _, _ in self.fed]

    def deviations(self) -> list[str]:
        return [o.code for _, outs, _ in self.fed for o in outs if isinstance(o, Deviation)]


def test_counted_flags() -> None:
    card = CardDrawn(card=parse_event({"type": "card", "card": "7H"}).card)  # type: ignore
    check = DeckCheck(cards=())
    outs = [DeviceOk(device="shoe", code="SHOE_EMPTY"), card, CutCardSeen(),
            DeviceFault(device="shoe", code="SILENT"), DeviceOk(device="shoe", code="SILENT"),
            DeviceFault(device="shoe", code="JAM"), DeviceOk(device="shoe", code="JAM"),
            DeviceFault(device="scanner", code="UNREADABLE_CARD"), check,
            DeviceFault(device="shoe", code="UNREADABLE_CARD"), Shuffle(),
            DeviceDiagnostic("shoe", "PROTOCOL_ERROR", "bad_crc"),
            DeviceFault(device="shoe", code="DEVICE_IDENTITY"),
            DeviceFault(device="shoe", code="LOST_FRAMES")]
    assert counted_flags(outs) == [False, True, True, False, False, True, True, False, True,
                                   True, True, False, False, False]


def test_device_events_are_fed_through_the_log_in_order() -> None:
    t = Table()
    t.runtime.start()
    try:
        wait_for(lambda: "device_connected" in t.types())
        with t.lock:
            t.device.load(["7H", "KD", "2C"])
            for _ in range(3):
                t.device.draw()
            t.device.cut_card_out()
        t.pump()  # the bytes come in on the reader thread, which wakes the engine thread
        wait_for(lambda: t.types().count("card") == 3 and "cut_card" in t.types())
    finally:
        t.runtime.request_stop()
        assert t.runtime.wait(10)
    assert t.runtime.error is None and t.runtime.stop_reason == "stop requested"
    assert t.types() == ["device_connected", "card", "card", "card", "cut_card"]
    assert [str(e.card) for e, _, _ in t.fed if isinstance(e, CardDrawn)] == ["7H", "KD", "2C"]
    assert all(t.logged_before_shown)
    connected = t.fed[0][0].to_record()
    assert connected["driver"] == "swp-shoe" and connected["serial"] == "SH000001"
    assert "port" not in connected  # a memory transport has no port
    assert t.runtime.stats.connects["shoe"] == 1 and t.driver.state == "closed"


def test_malformed_traffic_is_a_protocol_error_deviation_in_the_log() -> None:
    t = Table()
    t.runtime.start()
    try:
        wait_for(lambda: "device_connected" in t.types())
        t.transport.inject(b"\x00garbage-garbage")
        wait_for(lambda: "device_diagnostic" in t.types())
    finally:
        t.runtime.request_stop()
        assert t.runtime.wait(10)
    assert t.deviations() == ["PROTOCOL_ERROR"]
    ev = next(e for e, _, _ in t.fed if e.type == "device_diagnostic").to_record()
    assert ev["code"] == "PROTOCOL_ERROR" and ev["kind"] == "noise" and ev["count"] > 0
    # an input of the log: a replay makes the same deviation
    replayer = Replayer()
    for n, rec in enumerate(records(t.stream), 1):
        replayer.feed(LogRecord("<stream>", n, rec))
    replayer.finish()
    assert replayer.differences == [] and replayer.inputs == len(t.fed)


def test_a_refused_device_is_a_device_identity_deviation() -> None:
    t = Table(allow=False)
    t.runtime.start()
    try:
        wait_for(lambda: "device_fault" in t.types())
    finally:
        t.runtime.request_stop()
        assert t.runtime.wait(10)
    assert t.types()[:2] == ["device_diagnostic", "device_fault"]
    assert t.deviations() == ["DEVICE_IDENTITY"]
    assert t.session.engine.state == "device_fault"


def test_the_engine_thread_never_dies_silently() -> None:
    def explode(event: Event, outputs: list[Any], line: int | None) -> None:
        if event.type == "round_end":
            raise RuntimeError("display broke")

    t = Table(on_fed=explode, tick=0.02)
    t.runtime.start()
    t.runtime.post_event(parse_event({"type": "round_end"}))
    t.runtime.post_event(parse_event({"type": "table_close"}))  # never handled
    assert t.runtime.wait(10)
    assert t.runtime.error == "RuntimeError: display broke"
    last = [r for r in records(t.stream) if r["kind"] == "input"][-1]["event"]
    assert (last["type"], last["device"], last["code"]) == ("device_fault", CONTROLLER,
                                                            CONTROLLER_ERROR)
    assert "display broke" in last["detail"]
    assert t.session.engine.state == "device_fault" and t.driver.state == "closed"
    assert "table_close" not in t.types()


def test_a_person_clears_a_fault_and_dealer_inputs_are_fed_in_order() -> None:
    t = Table(tick=0.02)
    t.runtime.start()
    try:
        for ev in ({"type": "table_open", "table": "T1", "decks": 6},
                   {"type": "device_fault", "device": "shoe", "code": "JAM"}):
            t.runtime.post_event(parse_event(ev))
        t.runtime.clear_fault("shoe", "JAM")  # no driver holds it: a device_ok directly
        seen: list[str] = []
        t.runtime.post_call(lambda: seen.append(t.session.engine.state))
        wait_for(lambda: bool(seen))
    finally:
        t.runtime.request_stop()
        assert t.runtime.wait(10)
    assert [e for e in t.types() if e != "device_connected"] == [
        "table_open", "device_fault", "device_ok"]
    assert seen == ["opening_check"] and t.deviations() == []


@pytest.mark.parametrize("code", ["SILENT", "JAM"])
def test_restored_faults_are_given_back_to_the_driver(code: str) -> None:
    t = Table()
    t.runtime = TableRuntime(t.session, devices={"shoe": t.driver}, restore_faults={
        "shoe": [code]}, tick=0.02)
    t.runtime.start()
    try:
        wait_for(lambda: t.driver.state == "ready")
    finally:
        t.runtime.request_stop()
        assert t.runtime.wait(10)
    # a link fault is cleared by the handshake; a jam stays until the device says so
    assert (code in t.driver.open_faults) == (code == "JAM")


def test_a_failing_device_thread_stops_the_runtime_with_a_clear_message() -> None:
    t = Table(tick=0.02)
    calls = {"n": 0}
    plain = t.runtime.slots["shoe"].supervisor.poll

    def poll(now: float | None = None) -> list[Any]:
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError("the USB hub browned out")
        return plain(now)

    t.runtime.slots["shoe"].supervisor.poll = poll  # type: ignore[method-assign]
    t.runtime.start()
    assert t.runtime.wait(10)
    assert t.runtime.error is not None and "the device thread failed" in t.runtime.error
    assert "USB hub browned out" in t.runtime.error
    last = [r for r in records(t.stream) if r["kind"] == "input"][-1]["event"]
    assert (last["device"], last["code"]) == (CONTROLLER, CONTROLLER_ERROR)
    assert t.driver.state == "closed"  # the device thread closed its drivers on the way out


def _card_makers(t: Table) -> list[str]:
    """Record, per card a driver made, the thread that polled it (both ways in)."""
    slot = t.runtime.slots["shoe"]
    makers: list[str] = []
    received, polled = slot.supervisor.poll_received, slot.supervisor.poll

    def note(out: list[Any] | None) -> list[Any] | None:
        makers.extend(threading.current_thread().name for o in out or ()
                      if isinstance(o, CardDrawn))
        return out

    slot.supervisor.poll_received = lambda now=None: note(received(now))  # type: ignore
    slot.supervisor.poll = lambda now=None: note(polled(now))  # type: ignore
    return makers


def test_a_card_is_decoded_and_posted_by_the_reader_thread_that_read_it() -> None:
    """No hand-over to the device thread on a card's way in (each cost a GIL hand-over):
    the shoe's reader thread polls its driver itself while the shoe is up. The device
    thread (its tick: 5 s) polls nothing meanwhile."""
    t = Table()
    makers = _card_makers(t)
    t.runtime.start()
    try:
        wait_for(lambda: "device_connected" in t.types())
        t.draw(["7H", "KD", "2C"])
        wait_for(lambda: t.types().count("card") == 3)
    finally:
        t.runtime.request_stop()
        assert t.runtime.wait(10)
    assert t.runtime.error is None
    assert makers == ["shoewarden-memory"] * 3
    assert [str(e.card) for e, _, _ in t.fed if isinstance(e, CardDrawn)] == ["7H", "KD", "2C"]


def test_bytes_that_find_the_driver_busy_are_polled_by_the_device_thread() -> None:
    """While another thread polls the driver (here: the test holds its lock), the reader
    thread does not wait for it: it wakes the device thread, which polls once the lock is
    free. Nothing is fed before."""
    t = Table()
    makers = _card_makers(t)
    slot = t.runtime.slots["shoe"]
    wakes: list[str] = []
    wake = t.runtime._devices_wake.set
    t.runtime._devices_wake.set = lambda: (  # type: ignore[method-assign]
        wakes.append(threading.current_thread().name), wake())[-1]
    t.runtime.start()
    try:
        wait_for(lambda: "device_connected" in t.types())
        with slot.lock:
            wakes.clear()  # (the handshake's)
            t.draw(["9S"])
            wait_for(lambda: "shoewarden-memory" in wakes)
            assert "card" not in t.types()
        wait_for(lambda: "card" in t.types())
    finally:
        t.runtime.request_stop()
        assert t.runtime.wait(10)
    assert t.runtime.error is None and makers == ["shoewarden-devices"]


def test_a_failing_poll_on_a_reader_thread_stops_the_runtime_with_a_clear_message() -> None:
    t = Table()
    slot = t.runtime.slots["shoe"]
    plain = slot.supervisor.poll_received

    def poll_received(now: float | None = None) -> list[Any] | None:
        if slot.supervisor.state == "up":  # (a card: the reader thread polls)
            raise OSError("the frame buffer tore")
        return plain(now)

    slot.supervisor.poll_received = poll_received  # type: ignore[method-assign]
    t.runtime.start()
    wait_for(lambda: "device_connected" in t.types())
    t.draw(["7H"])
    assert t.runtime.wait(10)
    assert t.runtime.error is not None and "shoe's reader thread failed" in t.runtime.error
    assert "the frame buffer tore" in t.runtime.error
    last = [r for r in records(t.stream) if r["kind"] == "input"][-1]["event"]
    assert (last["device"], last["code"]) == (CONTROLLER, CONTROLLER_ERROR)
    assert "card" not in t.types() and t.driver.state == "closed"


def test_a_person_alone_cannot_clear_a_refused_identity() -> None:
    """Issue 8: `k shoe DEVICE_IDENTITY` used to clear the refusal while the device stayed
    refused. It now only asks for the device to be tried again; the fault clears when the
    device identifies as an allowed device."""
    t = Table(allow=False, tick=0.02)
    t.runtime.start()
    try:
        wait_for(lambda: "device_fault" in t.types())
        t.runtime.clear_fault("shoe", "DEVICE_IDENTITY")  # the same device: refused again
        wait_for(lambda: t.deviations().count("DEVICE_IDENTITY") == 2)
        states: list[str] = []
        t.runtime.post_call(lambda: states.append(t.session.engine.state))
        wait_for(lambda: bool(states))
        assert states == ["device_fault"] and "device_ok" not in t.types()
        ident = t.device.identity  # a person puts the right device on the allowlist …
        t.driver.allowlist = Allowlist.from_config({"allowlist": [{
            "kind": ident.kind, "model": ident.model, "serial": ident.serial,
            "firmware": ident.firmware, "firmware_hash": ident.firmware_hash}]})
        t.runtime.clear_fault("shoe", "DEVICE_IDENTITY")  # … and asks again: it identifies
        wait_for(lambda: "device_ok" in t.types())
        t.runtime.post_call(lambda: states.append(t.session.engine.state))
        wait_for(lambda: len(states) == 2)
    finally:
        t.runtime.request_stop()
        assert t.runtime.wait(10)
    retries = [e for e, _, _ in t.fed if e.type == "device_diagnostic"
               and e.code == "IDENTITY_RETRY"]
    assert len(retries) == 2
    ok = next(e for e, _, _ in t.fed if e.type == "device_ok")
    assert (ok.device, ok.code) == ("shoe", "DEVICE_IDENTITY")
    assert "identified" in (ok.detail or "")
    assert states[1] != "device_fault"
