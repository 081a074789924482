"""The serial transport over a real pty pair and ``loop://``; the reader thread never dies
silently.

A pty's slave path is opened exactly as a ``/dev/ttyUSB0`` would be
(``serial_for_url(path, exclusive=True, timeout=0.05)``); a tiny fake device on the master
end answers HELLO with IDENTITY and sends frames. Waits poll until something happens (with
a generous limit); nothing asserts on elapsed time.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import threading
import time
from collections.abc import Callable
from itertools import count
from types import SimpleNamespace
from typing import Any

import pytest
import serial

from controller.cards import parse_card
from controller.events import CardDrawn, DeviceFault, Event
from drivers.diagnostics import DeviceDiagnostic
from drivers.errors import DeviceDisconnected, DeviceError, DeviceNotFound
from drivers.framing import FrameDecoder, encode
from drivers.protocol import Kind
from drivers.serial_transport import SerialTransport, find_port, is_gone
from drivers.shoe import ShoeDriver
from drivers.transport import ReaderThread, TransportFault

IDENT = {"kind": "shoe", "model": "SW-SHOE-1", "serial": "SH123456", "firmware": "2.4.1",
         "firmware_hash": "sha256:9f2c"}
LIMIT = 10.0  # seconds to wait for something that takes a millisecond


def wait_for(check: Callable[[], Any], what: str, limit: float = LIMIT) -> Any:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.002)
    raise AssertionError(f"gave up waiting for {what}")


class PtyDevice:
    """A fake shoe on the master end of a pty: answers HELLO, ACKs commands, sends frames."""

    def __init__(self, ident: dict[str, str] = IDENT) -> None:
        self.master, self.slave = os.openpty()
        self.path = os.ttyname(self.slave)
        self.ident = ident
        self.received: list[tuple[int, int]] = []
        self._seq = count()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def send(self, kind: int, body: dict | None = None) -> None:
        with self._lock:
            os.write(self.master, encode(next(self._seq), kind, body or {}))

    def _run(self) -> None:
        decoder = FrameDecoder()
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.02)
            if not ready:
                continue
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            for f in decoder.feed(data):
                if not hasattr(f, "seq"):
                    continue
                self.received.append((f.seq, f.type))
                if f.type == Kind.HELLO:
                    self._seq = count()  # numbering restarts with the handshake
                    self.send(Kind.ACK, {"ack": f.seq})
                    self.send(Kind.IDENTITY, self.ident)
                else:
                    self.send(Kind.ACK, {"ack": f.seq})

    def close_slave(self) -> None:
        if self.slave >= 0:
            os.close(self.slave)
            self.slave = -1

    def unplug(self) -> None:
        self._stop.set()
        self._thread.join(2)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
        self.close_slave()


@pytest.fixture
def pty_device():
    devices: list[PtyDevice] = []

    def make(ident: dict[str, str] = IDENT) -> PtyDevice:
        devices.append(PtyDevice(ident))
        return devices[-1]

    yield make
    for d in devices:
        d.unplug()


def collect(driver: ShoeDriver, into: list) -> Callable[[], list]:
    def step() -> list:
        into.extend(driver.poll())
        return into
    return step


def test_a_shoe_on_a_pty_handshakes_and_reports_cards(pty_device) -> None:
    dev = pty_device()
    shoe = ShoeDriver("shoe", SerialTransport(dev.path, name="shoe"))
    shoe.open()
    dev.close_slave()
    try:
        identity = shoe.wait_identified(LIMIT)
        assert identity.serial == "SH123456" and shoe.state == "ready"
        assert (0, Kind.HELLO) in dev.received
        for c in ("7H", "KD", "AS"):
            dev.send(Kind.CARD_OUT, {"card": c})
        out: list = []
        step = collect(shoe, out)
        wait_for(lambda: len([o for o in step() if isinstance(o, CardDrawn)]) == 3, "3 cards")
        assert [o.card for o in out if isinstance(o, CardDrawn)] == [
            parse_card("7H"), parse_card("KD"), parse_card("AS")]
        assert not [o for o in out if isinstance(o, DeviceDiagnostic) and o.code != "NOTICE"]
    finally:
        shoe.close()


def test_closing_the_master_end_is_a_disconnected_fault_never_a_silent_stop(pty_device) -> None:
    dev = pty_device()
    transport = SerialTransport(dev.path, name="shoe")
    shoe = ShoeDriver("shoe", transport)
    shoe.open()
    dev.close_slave()
    try:
        shoe.wait_identified(LIMIT)
        reader = transport.reader
        assert reader is not None and reader.is_alive()
        dev.unplug()
        out: list = []
        step = collect(shoe, out)
        faults = wait_for(lambda: [o for o in step() if isinstance(o, DeviceFault)],
                          "a device_fault")
        assert [(f.device, f.code) for f in faults] == [("shoe", "DISCONNECTED")]
        assert shoe.state == "lost"
        reader.join(LIMIT)
        assert not reader.is_alive() and transport.reader is None and not transport.is_open
        with pytest.raises(DeviceDisconnected):
            shoe.command(Kind.CMD_STATUS)
    finally:
        shoe.close()


def test_exclusive_open_refuses_a_second_user(pty_device) -> None:
    dev = pty_device()
    first = SerialTransport(dev.path)
    first.open()
    try:
        with pytest.raises(DeviceError, match="in use") as info:
            SerialTransport(dev.path).open()
        assert isinstance(info.value.__cause__, serial.SerialException)
    finally:
        first.close()


def test_a_missing_port_is_device_not_found_from_the_serial_error() -> None:
    with pytest.raises(DeviceNotFound) as info:
        SerialTransport("/dev/ttyUSB-shoewarden-none").open()
    assert isinstance(info.value.__cause__, serial.SerialException)


# --------------------------------------------------------------------------- loop:// and threads


def test_loop_url_round_trip_through_the_reader_thread() -> None:
    transport = SerialTransport("loop://")
    transport.open()
    got: list[bytes] = []
    faults: list[TransportFault] = []
    transport.start(got.append, faults.append)
    try:
        frame = encode(7, Kind.HEARTBEAT, {})
        transport.write(frame)
        wait_for(lambda: b"".join(got) == frame, "the echoed frame")
        assert faults == []
    finally:
        transport.close()
    assert not transport.is_open and transport.reader is None
    transport.close()  # twice is fine


@pytest.fixture
def tty():
    """A bare pty: (master fd, the slave's path); the slave end is the port."""
    master, slave = os.openpty()
    path = os.ttyname(slave)
    os.close(slave)
    yield master, path
    with contextlib.suppress(OSError):
        os.close(master)


def test_a_tty_read_takes_what_the_port_holds_without_pyserials_read(tty, mocker) -> None:
    """One select and one os.read on pyserial's descriptors (pyserial's read(1),
    in_waiting and read(n) cost every card three calls and its Python loop)."""
    master, path = tty
    transport = SerialTransport(path)
    transport.open()
    plain = mocker.spy(serial.serialposix.Serial, "read")
    try:
        assert transport.read() == b""  # nothing there: the timeout
        frames = b"".join(encode(i, Kind.CARD_OUT, {"card": "7H"}) for i in range(3))
        os.write(master, frames)
        got = b""
        while len(got) < len(frames):
            got += transport.read()
        assert got == frames
        assert plain.call_count == 0
    finally:
        transport.close()


def test_cancel_read_wakes_a_tty_read_at_once(tty) -> None:
    _, path = tty
    transport = SerialTransport(path, timeout=3600)  # a read that would wait an hour
    transport.open()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(transport.read()), daemon=True)
    try:
        reader.start()
        time.sleep(0.05)  # (into its select; a cancel before it is seen by it all the same)
        transport.cancel_read()
        reader.join(LIMIT)
        assert not reader.is_alive() and got == [b""]
    finally:
        transport.close()


def test_a_tty_whose_other_end_hung_up_is_disconnected(tty) -> None:
    master, path = tty
    transport = SerialTransport(path, name="shoe")
    transport.open()
    try:
        os.close(master)
        with pytest.raises(DeviceDisconnected) as info:
            transport.read()
        assert info.value.device == "shoe"
    finally:
        transport.close()


def test_a_spy_url_still_reads_through_pyserial(tty, tmp_path) -> None:
    """Only a plain tty takes the direct read: a URL's own port class (spy://, socket://,
    rfc2217://) keeps its read, here spy://'s hex dump of what it received."""
    master, path = tty
    dump = tmp_path / "spy.txt"
    transport = SerialTransport(f"spy://{path}?file={dump}")
    transport.open()
    try:
        os.write(master, b"\xa5\x5a")
        got = b""
        while len(got) < 2:
            got += transport.read()
        assert got == b"\xa5\x5a"
    finally:
        transport.close()
    rx = [line.split()[3] for line in dump.read_text().splitlines() if " RX " in line]
    assert "".join(rx) == "A55A"  # (the bytes as they came: one read or two)


def test_the_reader_survives_a_handler_exception() -> None:
    transport = SerialTransport("loop://")
    transport.open()
    got: list[bytes] = []
    faults: list[TransportFault] = []

    def handler(data: bytes) -> None:
        if not faults:  # the first call fails
            raise RuntimeError("handler bug")
        got.append(data)

    reader = transport.start(handler, faults.append)
    try:
        transport.write(b"boom")
        wait_for(lambda: faults, "the fault")
        assert [f.code for f in faults] == ["DRIVER_ERROR"]
        assert isinstance(faults[0].error, RuntimeError)
        assert reader.is_alive()
        transport.write(b"fine")
        wait_for(lambda: b"".join(got).endswith(b"fine"), "data after the exception")
        assert len(faults) == 1
    finally:
        transport.close()


def test_read_errors_are_io_errors_until_too_many_then_disconnected() -> None:
    errors = iter([serial.SerialException("framing error"), serial.SerialException("parity"),
                   OSError(5, "Input/output error")])

    def read() -> bytes:
        e = next(errors, None)
        if e is None:
            return b""
        try:
            raise e
        except OSError as err:  # as SerialTransport.read does
            if is_gone(err):
                raise DeviceDisconnected(str(err)) from err
            raise DeviceError(str(err)) from err

    faults: list[TransportFault] = []
    done = threading.Event()

    def on_fault(f: TransportFault) -> None:
        faults.append(f)
        if f.code == "DISCONNECTED":
            done.set()

    reader = ReaderThread(read, lambda d: None, on_fault, error_pause=0.0)
    reader.start()
    assert done.wait(LIMIT)
    reader.join(LIMIT)
    assert [f.code for f in faults] == ["IO_ERROR", "IO_ERROR", "DISCONNECTED"]
    assert not reader.is_alive()


def test_endless_read_errors_end_in_disconnected_not_a_hot_loop() -> None:
    def read() -> bytes:
        raise DeviceError("garbled")

    faults: list[TransportFault] = []
    reader = ReaderThread(read, lambda d: None, faults.append, max_errors=4, error_pause=0.0)
    reader.start()
    reader.join(LIMIT)
    assert [f.code for f in faults] == ["IO_ERROR"] * 3 + ["DISCONNECTED"]


def test_a_read_error_is_one_warning_line_its_traceback_only_for_debugging(
        caplog: pytest.LogCaptureFixture) -> None:
    def read() -> bytes:
        raise DeviceError("garbled")

    reader = ReaderThread(read, lambda d: None, lambda f: None, max_errors=2, error_pause=0.0)
    with caplog.at_level("WARNING", logger="shoewarden.drivers"):
        reader.start()
        reader.join(LIMIT)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert warnings and all("garbled" in r.getMessage() for r in warnings)
    assert not any(r.exc_info for r in warnings)  # no traceback on the operator's log


def test_a_reader_stopped_on_purpose_reports_nothing() -> None:
    transport = SerialTransport("loop://")
    transport.open()
    faults: list[TransportFault] = []
    reader = transport.start(lambda d: None, faults.append)
    transport.close()
    assert not reader.is_alive() and faults == []


@pytest.mark.parametrize(("error", "gone"), [
    (serial.SerialException("device reports readiness to read but returned no data "
                            "(device disconnected or multiple access on port?)"), True),
    (serial.SerialException("read failed: [Errno 5] Input/output error"), True),
    (serial.PortNotOpenError(), True),
    (OSError(6, "No such device or address"), True),
    (serial.SerialException("socket disconnected"), True),
    (serial.SerialException("framing error"), False),
    (ValueError("bad"), False),
])
def test_which_errors_mean_the_port_went_away(error: BaseException, gone: bool) -> None:
    assert is_gone(error) is gone


def test_read_and_write_map_pyserial_errors_to_typed_ones() -> None:
    transport = SerialTransport("loop://")
    transport.open()
    real = transport.port
    try:
        def boom(*a: Any) -> Any:
            raise serial.SerialException("device reports readiness to read but returned no data")

        transport.port = SimpleNamespace(in_waiting=0, read=boom, write=boom, is_open=True)
        with pytest.raises(DeviceDisconnected) as info:
            transport.read()
        assert isinstance(info.value.__cause__, serial.SerialException)
        with pytest.raises(DeviceDisconnected):
            transport.write(b"x")
    finally:
        transport.port = real
        transport.close()


# --------------------------------------------------------------------------- USB-serial lookup


def port(device: str, serial_number: str | None) -> SimpleNamespace:
    return SimpleNamespace(device=device, serial_number=serial_number)


def test_the_port_is_found_by_usb_serial_number_under_any_name(pty_device) -> None:
    ports = [port("/dev/ttyS0", None), port("/dev/ttyUSB0", "A10K3F")]
    assert find_port("A10K3F", lambda: ports) == "/dev/ttyUSB0"
    assert find_port("ZZZ", lambda: ports) is None
    dev = pty_device()
    ports[1] = port(dev.path, "A10K3F")  # it came back under another name
    transport = SerialTransport("/dev/ttyUSB0", usb_serial="A10K3F", comports=lambda: ports)
    transport.open()
    try:
        assert transport.current == dev.path
    finally:
        transport.close()
    ports.pop()
    with pytest.raises(DeviceNotFound, match="A10K3F"):
        transport.open()


def test_from_config() -> None:
    t = SerialTransport.from_config("shoe", {"port": "/dev/ttyUSB0", "baudrate": 9600})
    assert (t.url, t.baudrate, t.usb_serial) == ("/dev/ttyUSB0", 9600, None)
    t = SerialTransport.from_config("shoe", {"usb_serial": "A10K3F"})
    assert t.usb_serial == "A10K3F"
    for bad in ({}, {"port": 5}, {"port": "loop://", "baudrate": "fast"}):
        with pytest.raises(ValueError, match=r"devices\.shoe"):
            SerialTransport.from_config("shoe", bad)


def test_events_from_a_threaded_driver_reach_on_event(pty_device) -> None:
    dev = pty_device()
    seen: list[Event | DeviceDiagnostic] = []
    shoe = ShoeDriver("shoe", SerialTransport(dev.path), on_event=seen.append)
    shoe.open()
    try:
        shoe.wait_identified(LIMIT)
        dev.send(Kind.CUT_CARD_OUT)
        wait_for(lambda: shoe.poll() and [e for e in seen if getattr(e, "type", "") == "cut_card"],
                 "the cut card")
    finally:
        shoe.close()


@pytest.mark.parametrize(("port", "said"), [
    ("socket://bad", "expected socket://HOST:PORT"),
    ("rfc2217://:7000", "expected rfc2217://HOST:PORT"),
    ("nonsense://x", "no pyserial handler for nonsense://"),
    ("/dev/null", "is not a serial device"),
    ("/tmp", "is a directory, not a serial device"),
    (__file__, "is not a serial device (a regular file or pipe)"),
])
def test_a_port_that_can_never_open_is_refused_with_the_config(port: str, said: str) -> None:
    """A review: each passed the table config and only warned once the table ran (one as
    "'<=' not supported between instances of 'int' and 'NoneType'")."""
    with pytest.raises(ValueError, match=re.escape(f"devices.shoe.port: {port!r}") + ".*"
                       + re.escape(said)):
        SerialTransport.from_config("shoe", {"port": port})


@pytest.mark.parametrize("port", ["socket://127.0.0.1:7000", "rfc2217://host:1", "loop://",
                                  "spy:///dev/ttyS0", "/dev/ttyUSB-not-plugged-yet"])
def test_ports_that_may_open_are_taken(port: str) -> None:
    assert SerialTransport.from_config("shoe", {"port": port}).url == port


def test_a_device_that_reads_nothing_is_gone_not_a_write_that_blocks_for_ever() -> None:
    """A review: a shoe that stopped reading its port filled the pty's buffer; the next
    write blocked for ever holding the device's slot (every device's timers stopped, then
    the table). A write the device does not take within WRITE_TIMEOUT is a disconnection."""
    from drivers.errors import DeviceDisconnected
    from drivers.serial_transport import WRITE_TIMEOUT

    master, slave = os.openpty()
    try:
        transport = SerialTransport(os.ttyname(slave), name="shoe")
        transport.open()
        start = time.monotonic()
        with pytest.raises(DeviceDisconnected, match="took no bytes for"):
            for _ in range(100_000):  # (nobody reads the master side)
                transport.write(b"\xa5" * 512)
        assert time.monotonic() - start < 30 * WRITE_TIMEOUT
        transport.close()
    finally:
        os.close(master)
        os.close(slave)


def test_a_port_scheme_that_is_no_module_name_is_refused_not_a_traceback() -> None:
    with pytest.raises(ValueError, match=re.escape("no pyserial handler for a.b://")):
        SerialTransport.from_config("shoe", {"port": "a.b://c"})
