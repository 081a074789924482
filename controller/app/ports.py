"""``shoewarden ports``: the serial ports and USB devices this computer sees.

Serial ports from ``serial.tools.list_ports.comports()`` (device, description, hwid, the
USB-serial adapter's serial number: what a table config's ``port`` / ``usb_serial`` take);
USB devices from pyusb's ``usb.core.find(find_all=True)`` (vendor:product, bus/address,
serial number, manufacturer and product strings: what ``usb = {vendor, product,
serial}`` takes). Without a libusb backend the USB part is one line saying what to
install; never a traceback. A string descriptor the user may not read shows as ``?``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import IO, Any

import serial.tools.list_ports
import usb.core

from drivers.errors import DeviceError
from drivers.usb_transport import find_backend


def serial_ports(comports: Callable[[], Iterable[Any]] | None = None) -> list[dict[str, Any]]:
    rows = []
    for p in (comports or serial.tools.list_ports.comports)():
        rows.append({"device": p.device, "description": p.description, "hwid": p.hwid,
                     "serial_number": getattr(p, "serial_number", None)})
    return sorted(rows, key=lambda r: str(r["device"]))


def _string(dev: Any, attr: str) -> str | None:
    try:
        value = getattr(dev, attr)
    except (usb.core.USBError, ValueError, NotImplementedError, AttributeError):
        return "?"
    return None if value is None else str(value)


def usb_devices(backend: Any = None) -> tuple[list[dict[str, Any]], str | None]:
    """The USB devices, or ``([], why)`` when they cannot be listed."""
    try:
        backend = backend if backend is not None else find_backend()
    except DeviceError as e:
        return [], str(e)
    try:
        found = list(usb.core.find(find_all=True, backend=backend) or ())
    except (usb.core.USBError, usb.core.NoBackendError, NotImplementedError, OSError) as e:
        return [], f"cannot list USB devices: {e}"
    rows = []
    for dev in found:
        rows.append({"vendor": f"{dev.idVendor:04x}", "product": f"{dev.idProduct:04x}",
                     "bus": getattr(dev, "bus", None), "address": getattr(dev, "address", None),
                     "serial_number": _string(dev, "serial_number"),
                     "manufacturer": _string(dev, "manufacturer"),
                     "product_name": _string(dev, "product")})
    return rows, None


def print_ports(out: IO[str], *, as_json: bool = False, backend: Any = None,
                comports: Callable[[], Iterable[Any]] | None = None) -> int:
    ports = serial_ports(comports)
    devices, why = usb_devices(backend)
    if as_json:
        out.write(json.dumps({"serial": ports, "usb": devices, "usb_error": why}) + "\n")
        return 0
    out.write(f"serial ports ({len(ports)}):\n")
    for p in ports:
        out.write(f"  {p['device']}  {p['description']}  hwid {p['hwid']}  serial "
                  f"{p['serial_number'] or '-'}\n")
    if why is not None:
        out.write(f"usb devices: {why}\n")
        return 0
    out.write(f"usb devices ({len(devices)}):\n")
    for d in devices:
        out.write(f"  {d['vendor']}:{d['product']}  bus {d['bus']} address {d['address']}  "
                  f"serial {d['serial_number'] or '-'}  {d['manufacturer'] or '-'} / "
                  f"{d['product_name'] or '-'}\n")
    return 0


def cmd_ports(args: Any) -> int:
    return print_ports(sys.stdout, as_json=args.json)
