"""The USB transport through a fake ``usb.backend.IBackend`` written here: find by
vendor/product/serial, kernel driver detach, bulk read/write, read timeout, an unplug
(``USBError`` errno 19) as DeviceDisconnected, ``dispose_resources`` on close, and a
clear error when there is no libusb at all.
"""

from __future__ import annotations

import errno
import sys
import threading
import time
import types
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
import usb.backend
import usb.backend.libusb1
import usb.core
import usb.util

from controller.events import DeviceFault, Shuffle
from drivers.errors import DeviceDisconnected, DeviceError, DeviceNotFound
from drivers.framing import Frame, FrameDecoder, encode
from drivers.protocol import Kind
from drivers.shuffler import UsbShufflerDriver
from drivers.usb_transport import NO_BACKEND, UsbTransport, find_backend

VID, PID = 0x1209, 0x5357
EP_IN, EP_OUT = 0x81, 0x02
IDENT = {"kind": "shuffler", "model": "SW-SHUF-1", "serial": "SF0001", "firmware": "3.0",
         "firmware_hash": "sha256:77"}


class FakeUsbDevice:
    def __init__(self, serial: str, *, kernel_driver: bool = False, vid: int = VID,
                 pid: int = PID) -> None:
        self.serial = serial
        self.vid, self.pid = vid, pid
        self.kernel_driver = kernel_driver
        self.unplugged = False
        self.config = 0
        self.inbox: deque[bytes] = deque()  # device → host
        self.out: list[bytes] = []  # host → device
        self.log: list[str] = []
        self.on_write: Any = None
        self.lock = threading.Lock()

    def send(self, data: bytes) -> None:
        with self.lock:
            self.inbox.append(data)


def _gone() -> usb.core.USBError:
    return usb.core.USBError("No such device (it may have been disconnected)", -4, errno.ENODEV)


class FakeBackend(usb.backend.IBackend):
    """Just enough of a libusb for pyusb's core: descriptors, strings, bulk endpoints."""

    def __init__(self, *devices: FakeUsbDevice) -> None:
        self.devices = list(devices)

    def enumerate_devices(self):  # type: ignore[no-untyped-def]
        yield from (d for d in self.devices if not d.unplugged)

    def get_device_descriptor(self, dev: FakeUsbDevice) -> SimpleNamespace:
        return SimpleNamespace(
            bLength=18, bDescriptorType=1, bcdUSB=0x200, bDeviceClass=0, bDeviceSubClass=0,
            bDeviceProtocol=0, bMaxPacketSize0=64, idVendor=dev.vid, idProduct=dev.pid,
            bcdDevice=0x100, iManufacturer=0, iProduct=0, iSerialNumber=3, bNumConfigurations=1,
            address=1, bus=1, port_number=1, port_numbers=(1,), speed=3)

    def get_configuration_descriptor(self, dev: FakeUsbDevice, config: int) -> SimpleNamespace:
        return SimpleNamespace(bLength=9, bDescriptorType=2, wTotalLength=32, bNumInterfaces=1,
                               bConfigurationValue=1, iConfiguration=0, bmAttributes=0x80,
                               bMaxPower=50, extra_descriptors=[])

    def get_interface_descriptor(self, dev: FakeUsbDevice, intf: int, alt: int,
                                 config: int) -> SimpleNamespace:
        if intf != 0 or alt != 0:
            raise IndexError("no such interface")
        return SimpleNamespace(bLength=9, bDescriptorType=4, bInterfaceNumber=0,
                               bAlternateSetting=0, bNumEndpoints=2, bInterfaceClass=0xFF,
                               bInterfaceSubClass=0, bInterfaceProtocol=0, iInterface=0,
                               extra_descriptors=[])

    def get_endpoint_descriptor(self, dev: FakeUsbDevice, ep: int, intf: int, alt: int,
                                config: int) -> SimpleNamespace:
        if ep > 1:
            raise IndexError("no such endpoint")
        return SimpleNamespace(bLength=7, bDescriptorType=5,
                               bEndpointAddress=(EP_IN, EP_OUT)[ep], bmAttributes=2,
                               wMaxPacketSize=512, bInterval=0, bRefresh=0, bSynchAddress=0,
                               extra_descriptors=[])

    def open_device(self, dev: FakeUsbDevice) -> FakeUsbDevice:
        if dev.unplugged:
            raise _gone()
        dev.log.append("open")
        return dev

    def close_device(self, handle: FakeUsbDevice) -> None:
        handle.log.append("close")

    def set_configuration(self, handle: FakeUsbDevice, value: int) -> None:
        handle.config = value

    def get_configuration(self, handle: FakeUsbDevice) -> int:
        return handle.config

    def claim_interface(self, handle: FakeUsbDevice, intf: int) -> None:
        if handle.kernel_driver:
            raise usb.core.USBError("Resource busy", -6, errno.EBUSY)
        handle.log.append(f"claim {intf}")

    def release_interface(self, handle: FakeUsbDevice, intf: int) -> None:
        if handle.unplugged:
            raise _gone()
        handle.log.append(f"release {intf}")

    def is_kernel_driver_active(self, handle: FakeUsbDevice, intf: int) -> bool:
        return handle.kernel_driver

    def detach_kernel_driver(self, handle: FakeUsbDevice, intf: int) -> None:
        handle.kernel_driver = False
        handle.log.append("detach")

    def attach_kernel_driver(self, handle: FakeUsbDevice, intf: int) -> None:
        if handle.unplugged:
            raise _gone()
        handle.kernel_driver = True
        handle.log.append("attach")

    def bulk_write(self, handle: FakeUsbDevice, ep: int, intf: int, data: Any,
                   timeout: int) -> int:
        assert ep == EP_OUT
        if handle.unplugged:
            raise _gone()
        handle.out.append(bytes(data))
        if handle.on_write is not None:
            handle.on_write(bytes(data))
        return len(data)

    def bulk_read(self, handle: FakeUsbDevice, ep: int, intf: int, buff: Any,
                  timeout: int) -> int:
        assert ep == EP_IN
        if handle.unplugged:
            raise _gone()
        with handle.lock:
            data = handle.inbox.popleft() if handle.inbox else b""
        if not data:
            time.sleep(min(timeout, 5) / 1000)
            raise usb.core.USBTimeoutError("Operation timed out", -7, errno.ETIMEDOUT)
        n = min(len(data), len(buff))
        buff[:n] = type(buff)("B", data[:n])
        if n < len(data):
            with handle.lock:
                handle.inbox.appendleft(data[n:])
        return n

    def ctrl_transfer(self, handle: FakeUsbDevice, bmRequestType: int, bRequest: int,
                      wValue: int, wIndex: int, data: Any, timeout: int) -> int:
        if handle.unplugged:
            raise _gone()
        if bRequest != 6 or wValue >> 8 != 3:  # only GET_DESCRIPTOR(STRING)
            raise usb.core.USBError("Pipe error", -9, errno.EPIPE)
        index = wValue & 0xFF
        if index == 0:
            desc = bytes([4, 3, 0x09, 0x04])  # en-US
        elif index == 3:
            text = handle.serial.encode("utf-16-le")
            desc = bytes([2 + len(text), 3]) + text
        else:
            raise usb.core.USBError("Pipe error", -9, errno.EPIPE)
        n = min(len(desc), len(data))
        data[:n] = type(data)("B", desc[:n])
        return n


def wait_for(check: Any, what: str, limit: float = 10.0) -> Any:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.002)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.fixture
def disposed(mocker):  # type: ignore[no-untyped-def]
    return mocker.spy(usb.util, "dispose_resources")


# --------------------------------------------------------------------------- the transport


def test_bulk_write_read_and_timeout(disposed) -> None:
    other = FakeUsbDevice("SF9999")
    ours = FakeUsbDevice("SF0001")
    transport = UsbTransport(VID, PID, serial="SF0001", backend=FakeBackend(other, ours),
                             name="shuffler")
    transport.open()
    try:
        assert transport.dev.serial_number == "SF0001"
        assert "claim 0" in ours.log and ours.config == 1  # configured, interface claimed
        transport.write(b"\xa5\x5ahello")
        assert ours.out == [b"\xa5\x5ahello"] and other.out == []
        ours.send(b"from the device")
        assert transport.read() == b"from the device"
        assert transport.read() == b""  # a read timeout is no error
    finally:
        transport.close()
    assert "release 0" in ours.log and "close" in ours.log
    assert disposed.call_count == 1 and not transport.is_open


def test_an_active_kernel_driver_is_detached_and_given_back(disposed) -> None:
    dev = FakeUsbDevice("SF0001", kernel_driver=True)
    transport = UsbTransport(VID, PID, backend=FakeBackend(dev))
    transport.open()
    transport.close()
    assert dev.log.index("detach") < dev.log.index("claim 0")
    assert "attach" in dev.log and dev.kernel_driver
    assert disposed.call_count == 1


def test_errno_19_is_device_disconnected_and_close_still_disposes(disposed) -> None:
    dev = FakeUsbDevice("SF0001")
    transport = UsbTransport(VID, PID, backend=FakeBackend(dev))
    transport.open()
    dev.unplugged = True
    with pytest.raises(DeviceDisconnected) as info:
        transport.read()
    cause = info.value.__cause__
    assert isinstance(cause, usb.core.USBError) and cause.errno == 19
    with pytest.raises(DeviceDisconnected):
        transport.write(b"x")
    transport.close()  # release fails on an unplugged device: no error, still disposed
    assert disposed.call_count == 1


def test_other_usb_errors_are_device_errors() -> None:
    dev = FakeUsbDevice("SF0001")
    backend = FakeBackend(dev)
    transport = UsbTransport(VID, PID, backend=backend)
    transport.open()

    def stall(*a: Any) -> int:
        raise usb.core.USBError("Pipe error", -9, errno.EPIPE)

    backend.bulk_read = stall  # type: ignore[method-assign]
    try:
        with pytest.raises(DeviceError) as info:
            transport.read()
        assert not isinstance(info.value, DeviceDisconnected)
    finally:
        transport.close()


@pytest.mark.parametrize(("serial", "match"), [(None, "1209:5357"), ("SF0002", "SF0002")])
def test_a_missing_device_is_device_not_found(serial: str | None, match: str) -> None:
    backend = FakeBackend(FakeUsbDevice("SF0001", vid=0x1234))
    if serial:
        backend.devices.append(FakeUsbDevice("SF0001"))
    with pytest.raises(DeviceNotFound, match=match):
        UsbTransport(VID, PID, serial=serial, backend=backend).open()


def test_no_libusb_anywhere_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setattr(usb.backend.libusb1, "get_backend", lambda *a, **k: None)
    monkeypatch.setitem(sys.modules, "libusb_package", None)  # not installed
    with pytest.raises(DeviceError) as info:
        find_backend()
    assert str(info.value) == NO_BACKEND and "libusb-package" in NO_BACKEND
    with pytest.raises(DeviceError, match="no USB backend"):
        UsbTransport(VID, PID).open()


def test_the_libusb_package_wheel_is_the_fallback(monkeypatch) -> None:
    fake = FakeBackend(FakeUsbDevice("SF0001"))
    monkeypatch.setattr(usb.backend.libusb1, "get_backend", lambda *a, **k: None)
    module = types.ModuleType("libusb_package")
    module.get_libusb1_backend = lambda: fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "libusb_package", module)
    assert find_backend() is fake
    transport = UsbTransport(VID, PID)
    transport.open()
    transport.close()


def test_from_config() -> None:
    t = UsbTransport.from_config("shuffler", {"usb": {"vendor": 0x1209, "product": "5357",
                                                      "serial": "SF0001"}})
    assert (t.vendor, t.product, t.serial, t.interface) == (VID, PID, "SF0001", 0)
    for bad, key in (({}, "devices.shuffler.usb"),
                     ({"usb": {"vendor": "zz", "product": 1}}, "devices.shuffler.usb.vendor"),
                     ({"usb": {"vendor": 1, "product": 70000}}, "devices.shuffler.usb.product")):
        with pytest.raises(ValueError, match="^" + key.replace(".", r"\.")):
            UsbTransport.from_config("shuffler", bad)


# --------------------------------------------------------------------------- a USB shuffler


def test_a_usb_shuffler_end_to_end(disposed) -> None:
    dev = FakeUsbDevice("SF0001")
    decoder = FrameDecoder()

    def device_side(data: bytes) -> None:
        for f in decoder.feed(data):
            if isinstance(f, Frame) and f.type == Kind.HELLO:
                dev.send(encode(0, Kind.ACK, {"ack": f.seq}) + encode(1, Kind.IDENTITY, IDENT))
            elif isinstance(f, Frame) and f.type == Kind.CMD_SHUFFLE:
                dev.send(encode(2, Kind.ACK, {"ack": f.seq}))
                dev.send(encode(3, Kind.SHUFFLE_STARTED, {}) + encode(4, Kind.SHUFFLE_DONE,
                                                                      {"count": 312}))

    dev.on_write = device_side
    transport = UsbTransport(VID, PID, serial="SF0001", backend=FakeBackend(dev))
    shuffler = UsbShufflerDriver("shuffler", transport)
    shuffler.open()
    try:
        assert shuffler.wait_identified(10.0).serial == "SF0001"
        shuffler.shuffle()
        out: list = []

        def shuffles() -> list:
            out.extend(shuffler.poll())
            return [o for o in out if isinstance(o, Shuffle)]

        assert len(wait_for(shuffles, "the shuffle")) == 1
        notices = [o.kind for o in out if getattr(o, "code", "") == "NOTICE"]
        assert "SHUFFLE_STARTED" in notices
        dev.unplugged = True
        faults = wait_for(lambda: [o for o in shuffler.poll() if isinstance(o, DeviceFault)],
                          "the disconnect")
        assert [f.code for f in faults] == ["DISCONNECTED"] and shuffler.state == "lost"
        assert disposed.call_count >= 1 and not transport.is_open
    finally:
        shuffler.close()
