"""A pyusb backend with one simulated USB shuffler on it, so the real pyusb code path runs:

    backend = SimBackend(ContinuousShuffler(rng=random.Random(1)))
    dev = usb.core.find(idVendor=VENDOR_ID, idProduct=PRODUCT_ID, backend=backend)
    dev.set_configuration()
    dev.write(EP_OUT, encode(0, Kind.HELLO, {"controller": "shoewarden"}))
    data = dev.read(EP_IN, 1024, timeout=250)   # ACK, IDENTITY, ...

The device has one configuration (value 1) with one vendor-specific interface (0) holding a
bulk OUT endpoint (0x01) and a bulk IN endpoint (0x81), 64-byte packets; SWP/1 bytes flow
over them unchanged (a read returns what the device has sent, up to the buffer size; a
frame may span reads). A read with nothing to return waits up to its timeout and raises
``USBTimeoutError`` (errno ETIMEDOUT); timeout 0 waits until there is data.

:meth:`SimBackend.unplug` (or a ``disconnect`` fault) makes every call on an open handle
raise ``USBError`` with errno 19 (ENODEV), as libusb's LIBUSB_ERROR_NO_DEVICE does, and
hides the device from ``find``; :meth:`SimBackend.plug` brings it back at a new address
(open it again: old handles stay dead), waiting for HELLO like a power-cycled device.

Device time is ``clock()`` seconds since the backend was made (injectable).
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import usb.backend
import usb.core

from simulators.devices.base import Device

VENDOR_ID = 0x1209  # pid.codes (open-source vendor id); a simulation value, not allocated
PRODUCT_ID = 0x5357  # "SW"
EP_OUT = 0x01
EP_IN = 0x81
INTERFACE = 0
CONFIG_VALUE = 1
PACKET = 64

LIBUSB_ERROR_TIMEOUT = -7
LIBUSB_ERROR_NO_DEVICE = -4


@dataclass
class _Desc:
    """A descriptor: every field pyusb reads, as attributes."""

    fields: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["fields"][name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class _DevId:
    """What ``enumerate_devices`` yields: one plug-in of the device."""

    address: int


@dataclass
class _Handle:
    dev: _DevId
    config: int = CONFIG_VALUE  # like Linux, which configures a device when it appears


class SimBackend(usb.backend.IBackend):
    """A pyusb backend holding one simulated SWP/1 device (normally a shuffler)."""

    def __init__(self, device: Device, *, vendor_id: int = VENDOR_ID,
                 product_id: int = PRODUCT_ID, manufacturer: str = "shoewarden sim",
                 product: str | None = None, clock: Callable[[], float] = time.monotonic,
                 bus: int = 1, poll: float = 0.001) -> None:
        super().__init__()
        self.device = device
        self.vendor_id, self.product_id = vendor_id, product_id
        self.strings = {1: manufacturer, 2: product or device.identity.model,
                        3: device.identity.serial}
        self.clock = clock
        self._t0 = clock()
        self.bus = bus
        self.poll = poll
        self._lock = threading.RLock()
        self._plugged = True
        self._address = 5
        self._current = _DevId(self._address)
        self._pending = bytearray()
        self._down_until: float | None = None

    # ------------------------------------------------------------------ the test's handles

    def now(self) -> float:
        return self.clock() - self._t0

    def unplug(self) -> None:
        """The cable is pulled: every open handle now fails with errno 19."""
        with self._lock:
            self._plugged = False
            self._pending.clear()

    def plug(self) -> None:
        """Plugged in again (a new address); the device waits for HELLO."""
        with self._lock:
            self._plugged = True
            self._address += 1
            self._current = _DevId(self._address)
            self._pending.clear()
            self._down_until = None
            self.device.link_reset()

    @property
    def plugged(self) -> bool:
        with self._lock:
            self._service()
            return self._plugged

    def _service(self) -> None:
        """Apply a disconnect fault the device asked for, and its end."""
        now = self.now()
        if self._plugged and self.device.link_down is not None:
            self._down_until = now + self.device.link_down
            self.unplug()
        elif not self._plugged and self._down_until is not None and now >= self._down_until:
            self.plug()

    def _check(self, handle: _Handle | _DevId | None = None) -> None:
        self._service()
        dev = handle.dev if isinstance(handle, _Handle) else handle
        if not self._plugged or (dev is not None and dev is not self._current):
            raise usb.core.USBError("No such device (it may have been disconnected)",
                                    LIBUSB_ERROR_NO_DEVICE, errno.ENODEV)

    # ------------------------------------------------------------------ descriptors

    def enumerate_devices(self):
        with self._lock:
            self._service()
            return [self._current] if self._plugged else []

    def get_device_descriptor(self, dev: _DevId) -> _Desc:
        return _Desc({
            "bLength": 18, "bDescriptorType": 1, "bcdUSB": 0x0200, "bDeviceClass": 0,
            "bDeviceSubClass": 0, "bDeviceProtocol": 0, "bMaxPacketSize0": PACKET,
            "idVendor": self.vendor_id, "idProduct": self.product_id, "bcdDevice": 0x0100,
            "iManufacturer": 1, "iProduct": 2, "iSerialNumber": 3, "bNumConfigurations": 1,
            "address": dev.address, "bus": self.bus, "port_number": 1, "port_numbers": (1,),
            "speed": 2,  # full speed
        })

    def get_configuration_descriptor(self, dev: _DevId, config: int) -> _Desc:
        if config != 0:
            raise IndexError(config)
        return _Desc({
            "bLength": 9, "bDescriptorType": 2, "wTotalLength": 9 + 9 + 7 + 7,
            "bNumInterfaces": 1, "bConfigurationValue": CONFIG_VALUE, "iConfiguration": 0,
            "bmAttributes": 0x80, "bMaxPower": 50, "extra_descriptors": [],
        })

    def get_interface_descriptor(self, dev: _DevId, intf: int, alt: int, config: int) -> _Desc:
        if (intf, alt, config) != (0, 0, 0):
            raise IndexError((intf, alt, config))
        return _Desc({
            "bLength": 9, "bDescriptorType": 4, "bInterfaceNumber": INTERFACE,
            "bAlternateSetting": 0, "bNumEndpoints": 2, "bInterfaceClass": 0xFF,
            "bInterfaceSubClass": 0, "bInterfaceProtocol": 0, "iInterface": 0,
            "extra_descriptors": [],
        })

    def get_endpoint_descriptor(self, dev: _DevId, ep: int, intf: int, alt: int,
                                config: int) -> _Desc:
        if (intf, alt, config) != (0, 0, 0) or ep not in (0, 1):
            raise IndexError((ep, intf, alt, config))
        return _Desc({
            "bLength": 7, "bDescriptorType": 5, "bEndpointAddress": (EP_OUT, EP_IN)[ep],
            "bmAttributes": 0x02, "wMaxPacketSize": PACKET, "bInterval": 0, "bRefresh": 0,
            "bSynchAddress": 0, "extra_descriptors": [],
        })

    # ------------------------------------------------------------------ handles

    def open_device(self, dev: _DevId) -> _Handle:
        with self._lock:
            self._check(dev)
            return _Handle(dev)

    def close_device(self, dev_handle: _Handle) -> None:
        pass

    def set_configuration(self, dev_handle: _Handle, config_value: int) -> None:
        with self._lock:
            self._check(dev_handle)
            if config_value not in (0, CONFIG_VALUE):
                raise usb.core.USBError("Invalid configuration", -2, errno.EINVAL)
            dev_handle.config = config_value

    def get_configuration(self, dev_handle: _Handle) -> int:
        with self._lock:
            self._check(dev_handle)
            return dev_handle.config

    def set_interface_altsetting(self, dev_handle: _Handle, intf: int, altsetting: int) -> None:
        self._check(dev_handle)

    def claim_interface(self, dev_handle: _Handle, intf: int) -> None:
        with self._lock:
            self._check(dev_handle)

    def release_interface(self, dev_handle: _Handle, intf: int) -> None:
        with self._lock:
            self._check(dev_handle)

    def clear_halt(self, dev_handle: _Handle, ep: int) -> None:
        self._check(dev_handle)

    def reset_device(self, dev_handle: _Handle) -> None:
        self._check(dev_handle)

    def is_kernel_driver_active(self, dev_handle: _Handle, intf: int) -> bool:
        self._check(dev_handle)
        return False

    def detach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        self._check(dev_handle)

    def attach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        self._check(dev_handle)

    def ctrl_transfer(self, dev_handle: _Handle, bmRequestType: int, bRequest: int,
                      wValue: int, wIndex: int, data: Any, timeout: int) -> int:
        """GET_DESCRIPTOR for strings (language 0x0409 only); nothing else."""
        with self._lock:
            self._check(dev_handle)
            if bmRequestType & 0x80 and bRequest == 0x06 and wValue >> 8 == 3:
                index = wValue & 0xFF
                if index == 0:
                    raw = bytes([4, 3, 0x09, 0x04])
                elif index in self.strings:
                    text = self.strings[index].encode("utf-16-le")
                    raw = bytes([2 + len(text), 3]) + text
                else:
                    raise usb.core.USBError("Pipe error", -9, errno.EPIPE)
                n = min(len(raw), len(data))
                data[:n] = type(data)(data.typecode, raw[:n])
                return n
            raise usb.core.USBError("Pipe error", -9, errno.EPIPE)

    # ------------------------------------------------------------------ bulk transfers

    def bulk_write(self, dev_handle: _Handle, ep: int, intf: int, data: Any,
                   timeout: int) -> int:
        with self._lock:
            self._check(dev_handle)
            if ep != EP_OUT:
                raise usb.core.USBError("Invalid endpoint", -2, errno.EINVAL)
            payload = bytes(data)
            self.device.receive(payload, self.now())
            return len(payload)

    def bulk_read(self, dev_handle: _Handle, ep: int, intf: int, buff: Any,
                  timeout: int) -> int:
        if ep != EP_IN:
            raise usb.core.USBError("Invalid endpoint", -2, errno.EINVAL)
        deadline = None if not timeout else self.clock() + timeout / 1000.0
        while True:
            with self._lock:
                self._check(dev_handle)
                self._pending += self.device.tick(self.now())
                if self._pending:
                    n = min(len(self._pending), len(buff) * buff.itemsize)
                    chunk = bytes(self._pending[:n])
                    del self._pending[:n]
                    for i, b in enumerate(chunk):
                        buff[i] = b
                    return n
            if deadline is not None and self.clock() >= deadline:
                raise usb.core.USBTimeoutError("Operation timed out", LIBUSB_ERROR_TIMEOUT,
                                               errno.ETIMEDOUT)
            time.sleep(self.poll)

    def intr_write(self, *a: Any) -> int:
        raise usb.core.USBError("Not supported", -12, errno.ENOSYS)

    def intr_read(self, *a: Any) -> int:
        raise usb.core.USBError("Not supported", -12, errno.ENOSYS)
