"""USB transport: pyusb bulk IN/OUT endpoints, for shufflers that are USB devices.

:meth:`UsbTransport.open` finds the device by vendor/product id (and USB serial number,
when configured), detaches an active kernel driver, sets the configuration if none is
active, claims the interface and picks its bulk IN and OUT endpoints. ``read`` waits
at most ``timeout_ms``; an unplugged device (``USBError`` errno 19 ``ENODEV``, or
libusb's ``LIBUSB_ERROR_NO_DEVICE``) is :class:`DeviceDisconnected`; ``close``
releases the interface, reattaches the kernel driver it detached and always calls
``usb.util.dispose_resources``.

Backend: the system libusb-1.0 first, then the ``libusb-package`` wheel if it is
installed (``libusb_package.get_libusb1_backend()``); neither → a :class:`DeviceError`
that says what to install. Tests pass their own ``usb.backend.IBackend``.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Mapping
from typing import Any

import usb.core
import usb.util

from drivers.errors import DeviceDisconnected, DeviceError, DeviceNotFound
from drivers.transport import Transport

log = logging.getLogger("shoewarden.drivers.usb")

LIBUSB_ERROR_NO_DEVICE = -4
READ_TIMEOUT_MS = 50
WRITE_TIMEOUT_MS = 500

NO_BACKEND = ("no USB backend: neither the system libusb-1.0 (Debian: apt-get install "
              "libusb-1.0-0) nor the libusb-package wheel (pip install libusb-package) "
              "is available")


def find_backend() -> Any:
    """The system libusb-1.0, else ``libusb_package``'s bundled one, else DeviceError."""
    import usb.backend.libusb1 as libusb1

    backend = libusb1.get_backend()
    if backend is not None:
        return backend
    try:
        import libusb_package  # type: ignore[import-not-found]
    except ImportError:
        libusb_package = None
    if libusb_package is not None:
        backend = libusb_package.get_libusb1_backend()
        if backend is not None:
            log.info("using libusb from the libusb-package wheel")
            return backend
    raise DeviceError(NO_BACKEND)


def is_unplugged(e: BaseException) -> bool:
    return isinstance(e, usb.core.USBError) and (
        e.errno == errno.ENODEV or getattr(e, "backend_error_code", None) == LIBUSB_ERROR_NO_DEVICE)


def _id(value: Any, key: str) -> int:
    if isinstance(value, str):
        try:
            value = int(value, 16)
        except ValueError:
            raise ValueError(f"{key}: expected a 16-bit id such as 0x1209, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        raise ValueError(f"{key}: expected a 16-bit id such as 0x1209, got {value!r}")
    return value


class UsbTransport(Transport):
    def __init__(self, vendor: int, product: int, *, serial: str | None = None,
                 interface: int = 0, timeout_ms: int = READ_TIMEOUT_MS,
                 write_timeout_ms: int = WRITE_TIMEOUT_MS, read_size: int = 4096,
                 backend: Any = None, name: str | None = None) -> None:
        super().__init__()
        self.vendor = vendor
        self.product = product
        self.serial = serial
        self.interface = interface
        self.timeout_ms = timeout_ms
        self.write_timeout_ms = write_timeout_ms
        self.read_size = read_size
        self.backend = backend
        self.name = name
        self.dev: Any = None
        self.ep_in: Any = None
        self.ep_out: Any = None
        self._detached = False
        self._claimed = False
        self.description = (f"{name or 'usb'} {vendor:04x}:{product:04x}"
                            + (f" serial {serial}" if serial else ""))

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any]) -> UsbTransport:
        """Key ``usb``: ``{vendor, product, serial?, interface?}`` (ids as ints or hex strings);
        optional ``usb_timeout_ms``."""
        usb_cfg = config.get("usb")
        where = f"devices.{name}.usb"
        if not isinstance(usb_cfg, Mapping):
            raise ValueError(f"{where}: expected {{vendor, product, serial}}, got {usb_cfg!r}")
        for key in usb_cfg:
            if key not in ("vendor", "product", "serial", "interface"):
                raise ValueError(f"{where}.{key}: unknown key (known: interface, product, "
                                 "serial, vendor)")
        serial = usb_cfg.get("serial")
        if serial is not None and not isinstance(serial, str):
            raise ValueError(f"{where}.serial: expected a string, got {serial!r}")
        interface = usb_cfg.get("interface", 0)
        if isinstance(interface, bool) or not isinstance(interface, int) or interface < 0:
            raise ValueError(f"{where}.interface: expected an interface number, got "
                             f"{interface!r}")
        timeout = config.get("usb_timeout_ms", READ_TIMEOUT_MS)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
            raise ValueError(f"devices.{name}.usb_timeout_ms: expected milliseconds, got "
                             f"{timeout!r}")
        return cls(_id(usb_cfg.get("vendor"), f"{where}.vendor"),
                   _id(usb_cfg.get("product"), f"{where}.product"), serial=serial,
                   interface=interface, timeout_ms=timeout, name=name)

    @property
    def is_open(self) -> bool:
        return self.dev is not None

    def _match(self, dev: Any) -> bool:
        if self.serial is None:
            return True
        try:
            return bool(dev.serial_number == self.serial)
        except (usb.core.USBError, ValueError, NotImplementedError):
            return False  # a device we may not read is not ours

    def open(self) -> None:
        if self.dev is not None:
            return
        backend = self.backend if self.backend is not None else find_backend()
        try:
            dev = usb.core.find(idVendor=self.vendor, idProduct=self.product, backend=backend,
                                custom_match=self._match)
        except usb.core.NoBackendError as e:
            raise DeviceError(NO_BACKEND, device=self.name) from e
        except usb.core.USBError as e:
            raise DeviceError(f"USB enumeration failed: {e}", device=self.name) from e
        if dev is None:
            raise DeviceNotFound(f"no USB device {self.vendor:04x}:{self.product:04x}"
                                 + (f" with serial {self.serial}" if self.serial else ""),
                                 device=self.name)
        self.dev = dev
        try:
            self._setup(dev)
        except Exception as e:
            self._close()
            if is_unplugged(e):
                raise DeviceDisconnected(f"unplugged while opening: {e}", device=self.name) from e
            if isinstance(e, DeviceError):
                raise
            raise DeviceError(f"cannot set up {self.description}: {e}", device=self.name) from e
        log.info("%s: opened", self.description)

    def _setup(self, dev: Any) -> None:
        intf = self.interface
        try:
            active = dev.is_kernel_driver_active(intf)
        except (NotImplementedError, usb.core.USBError):
            active = False
        if active:
            dev.detach_kernel_driver(intf)
            self._detached = True
        try:
            cfg = dev.get_active_configuration()
        except usb.core.USBError:
            dev.set_configuration()
            cfg = dev.get_active_configuration()
        usb.util.claim_interface(dev, intf)
        self._claimed = True
        ifc = usb.util.find_descriptor(cfg, bInterfaceNumber=intf)
        if ifc is None:
            raise DeviceError(f"{self.description}: no interface {intf}", device=self.name)

        def bulk(direction: int) -> Any:
            return usb.util.find_descriptor(ifc, custom_match=lambda e: (
                usb.util.endpoint_direction(e.bEndpointAddress) == direction
                and usb.util.endpoint_type(e.bmAttributes) == usb.util.ENDPOINT_TYPE_BULK))

        self.ep_in = bulk(usb.util.ENDPOINT_IN)
        self.ep_out = bulk(usb.util.ENDPOINT_OUT)
        if self.ep_in is None or self.ep_out is None:
            raise DeviceError(f"{self.description}: interface {intf} has no bulk IN and OUT "
                              "endpoints", device=self.name)

    def _close(self) -> None:
        dev, self.dev = self.dev, None
        self.ep_in = self.ep_out = None
        if dev is None:
            return
        try:
            if self._claimed:
                usb.util.release_interface(dev, self.interface)
            if self._detached:
                dev.attach_kernel_driver(self.interface)
        except (usb.core.USBError, NotImplementedError) as e:
            log.debug("%s: release after close: %s", self.description, e)
        finally:
            self._claimed = self._detached = False
            usb.util.dispose_resources(dev)

    def _typed(self, e: BaseException, what: str) -> DeviceError:
        if is_unplugged(e):
            return DeviceDisconnected(f"{what}: unplugged ({e})", device=self.name)
        return DeviceError(f"{what}: {e}", device=self.name)

    def read(self) -> bytes:
        ep = self.ep_in
        if ep is None:
            raise DeviceDisconnected(f"{self.description}: closed", device=self.name)
        try:
            return bytes(ep.read(self.read_size, self.timeout_ms))
        except usb.core.USBTimeoutError:
            return b""
        except Exception as e:
            raise self._typed(e, "bulk read failed") from e

    def write(self, data: bytes) -> None:
        ep = self.ep_out
        if ep is None:
            raise DeviceDisconnected(f"{self.description}: closed", device=self.name)
        try:
            written = ep.write(data, self.write_timeout_ms)
        except usb.core.USBTimeoutError as e:
            raise DeviceError(f"bulk write timed out after {self.write_timeout_ms} ms",
                              device=self.name) from e
        except Exception as e:
            raise self._typed(e, "bulk write failed") from e
        if written != len(data):
            raise DeviceError(f"bulk write sent {written} of {len(data)} bytes",
                              device=self.name)
