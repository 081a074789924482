"""Serial transport: pyserial, any URL it knows (``/dev/ttyUSB0``, ``socket://``, ``spy://``,
``rfc2217://``, ``loop://``), with a reader thread that never dies silently.

The port is opened with ``serial.serial_for_url(url, exclusive=True, timeout=0.05)``
(``exclusive`` is advisory on POSIX; a pty ignores the baud rate). With ``usb_serial``
set, the port is looked up on every :meth:`SerialTransport.open` by the USB serial number
of the USB-serial adapter (``serial.tools.list_ports.comports()``), so a device that comes
back under another name (``/dev/ttyUSB0`` → ``/dev/ttyUSB1``) is found again.

A plain tty (pyserial's POSIX ``Serial``) is read directly, one ``select`` and one
``os.read`` a chunk (:meth:`SerialTransport._read_tty`); every other port class (a URL's
own: ``spy://``, ``socket://``, …) through its own ``read``.

pyserial errors are raised as :mod:`drivers.errors` types ``from`` the original:
a port that is not there → :class:`DeviceNotFound`; a port that went away (EIO, ENXIO,
ENODEV, "returned no data", a closed socket) → :class:`DeviceDisconnected`; anything
else → :class:`DeviceError`.
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import os
import select
import stat
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import serial
import serial.tools.list_ports

from drivers.errors import DeviceDisconnected, DeviceError, DeviceNotFound
from drivers.transport import Transport

#: pyserial's POSIX port class: a tty read by :meth:`SerialTransport._read_tty`
PosixSerial: type | None
try:
    from serial.serialposix import Serial as PosixSerial
except ImportError:  # (not POSIX: pyserial's own read everywhere)
    PosixSerial = None

log = logging.getLogger("shoewarden.drivers.serial")

READ_TIMEOUT = 0.05
#: the longest a frame's write may wait for the device to take it. A device that stops
#: reading its port filled the buffer and the write blocked for ever, holding the device's
#: slot — every other device's timers stopped with it, and the engine, waiting on the
#: device thread, stopped the table (a review). Past it the device is taken as gone:
#: DISCONNECTED, and the supervisor reopens it. (A frame is a few hundred bytes: at
#: 115,200 baud the whole 4 KiB of a tty's buffer drains in 0.36 s.)
WRITE_TIMEOUT = 0.5
#: the most bytes one read takes
READ_SIZE = 4096
DEFAULT_BAUDRATE = 115200
_GONE_ERRNOS = {errno.EIO, errno.ENXIO, errno.ENODEV, errno.EBADF, errno.EPIPE,
                errno.ECONNRESET, errno.ENOTCONN}
_MISSING_ERRNOS = {errno.ENOENT, errno.ENODEV, errno.ENXIO}
_GONE_WORDS = ("returned no data", "disconnected", "not open", "connection closed",
               "input/output error", "no such device", "broken pipe")

Comports = Callable[[], Iterable[Any]]


def _errno_of(e: BaseException) -> int | None:
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno is not None:
            return cur.errno
        cur = cur.__cause__ or cur.__context__
    return None


def is_gone(e: BaseException) -> bool:
    """Does this pyserial / OS error mean the port went away?"""
    if isinstance(e, serial.PortNotOpenError):
        return True
    code = _errno_of(e)
    if code in _GONE_ERRNOS:
        return True
    text = str(e).lower()
    return any(word in text for word in _GONE_WORDS)


def find_port(usb_serial: str, comports: Comports | None = None) -> str | None:
    """The device path of the USB-serial adapter whose USB serial number is ``usb_serial``."""
    for info in (comports or serial.tools.list_ports.comports)():
        if getattr(info, "serial_number", None) == usb_serial:
            return str(info.device)
    return None


def _check_port(name: str, url: str) -> None:
    """A port that can never be opened is the config's fault, named at load: a URL scheme
    pyserial has no handler for, a ``socket://``/``rfc2217://`` URL without HOST:PORT, a
    path that is a directory or a file that is no device (a review: each only warned once
    the table ran, one as "'<=' not supported between instances of 'int' and
    'NoneType'"). A path that is not there yet is a device unplugged: the supervisor
    waits for it."""
    where = f"devices.{name}.port"
    if "://" in url:
        scheme = url.split("://", 1)[0].lower()
        if not any(_handler(pkg, scheme) for pkg in serial.protocol_handler_packages
                   if _importable(pkg)):
            raise ValueError(f"{where}: {url!r}: no pyserial handler for {scheme}:// "
                             "(a device path, or socket://HOST:PORT, rfc2217://HOST:PORT, "
                             "spy://, loop://, alt://, hwgrep://)")
        if scheme in ("socket", "rfc2217"):
            try:
                port = urllib.parse.urlsplit(url).port
            except ValueError:
                port = None
            if port is None or not urllib.parse.urlsplit(url).hostname:
                raise ValueError(f"{where}: {url!r}: expected {scheme}://HOST:PORT")
        return
    if os.path.isdir(url):
        raise ValueError(f"{where}: {url!r} is a directory, not a serial device")
    if os.path.exists(url) and not stat.S_ISCHR(os.stat(url).st_mode):
        raise ValueError(f"{where}: {url!r} is not a serial device (a regular file or pipe)")
    if url == os.devnull:
        raise ValueError(f"{where}: {url!r} is not a serial device")


def _importable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _handler(package: str, scheme: str) -> bool:
    """Has pyserial's handler package ``package`` a module for ``scheme``? (A scheme with
    a dot in it made ``find_spec`` raise: a traceback at load, a review.)"""
    if not scheme.isidentifier():
        return False
    try:
        return importlib.util.find_spec(f"{package}.protocol_{scheme}") is not None
    except (ImportError, ValueError):
        return False


class SerialTransport(Transport):
    """One serial port. ``url`` is any pyserial URL; ``usb_serial`` finds the port by the
    adapter's USB serial number instead (``url`` is then only a fallback description)."""

    def __init__(self, url: str | None = None, *, usb_serial: str | None = None,
                 baudrate: int = DEFAULT_BAUDRATE, timeout: float = READ_TIMEOUT,
                 comports: Comports | None = None, name: str | None = None) -> None:
        super().__init__()
        if not url and not usb_serial:
            raise ValueError("a serial device needs a port/url or a usb_serial")
        self.url = url
        self.usb_serial = usb_serial
        self.baudrate = baudrate
        self.timeout = timeout
        self.comports = comports
        self.name = name
        self.port: serial.SerialBase | None = None
        self._direct = False  # read with _read_tty (set by open)
        self.current: str | None = None  # the path or URL actually opened
        self.description = f"{name or 'serial'} {url or 'usb-serial ' + str(usb_serial)}"

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any]) -> SerialTransport:
        """Keys: ``port`` (or ``url``), ``usb_serial``, ``baudrate``."""
        url = config.get("port", config.get("url"))
        usb_serial = config.get("usb_serial")
        if url is not None and not isinstance(url, str):
            raise ValueError(f"devices.{name}.port: expected a path or URL, got {url!r}")
        if usb_serial is not None and not isinstance(usb_serial, str):
            raise ValueError(f"devices.{name}.usb_serial: expected a string, got {usb_serial!r}")
        if not url and not usb_serial:
            raise ValueError(f"devices.{name}: needs 'port' (a path or pyserial URL) "
                             "or 'usb_serial'")
        if url:
            _check_port(name, url)
        baudrate = config.get("baudrate", DEFAULT_BAUDRATE)
        if isinstance(baudrate, bool) or not isinstance(baudrate, int) or baudrate <= 0:
            raise ValueError(f"devices.{name}.baudrate: expected a positive integer, "
                             f"got {baudrate!r}")
        return cls(url, usb_serial=usb_serial, baudrate=baudrate, name=name)

    @property
    def is_open(self) -> bool:
        return self.port is not None and bool(self.port.is_open)

    def resolve(self) -> str:
        """The path or URL to open now (looked up by USB serial number when configured)."""
        if self.usb_serial:
            found = find_port(self.usb_serial, self.comports)
            if found is None:
                raise DeviceNotFound(f"no serial port with USB serial number "
                                     f"{self.usb_serial!r}", device=self.name)
            if self.current and found != self.current:
                log.info("%s: USB serial %s is now at %s (was %s)", self.name, self.usb_serial,
                         found, self.current)
            return found
        assert self.url is not None
        return self.url

    def open(self) -> None:
        if self.is_open:
            return
        url = self.resolve()
        try:
            self.port = serial.serial_for_url(url, exclusive=True, timeout=self.timeout,
                                              baudrate=self.baudrate,
                                              write_timeout=WRITE_TIMEOUT)
        except TypeError as e:  # (pyserial: 'socket://host' with no port compares None)
            raise DeviceError(f"cannot open {url}: not a URL pyserial can open ({e})",
                              device=self.name) from e
        except (serial.SerialException, OSError, ValueError) as e:
            code = _errno_of(e)
            if code in _MISSING_ERRNOS:
                raise DeviceNotFound(f"cannot open {url}: {e}", device=self.name) from e
            if code in (errno.EBUSY, errno.EAGAIN, errno.EWOULDBLOCK) or "lock" in str(e).lower():
                raise DeviceError(f"{url} is in use by another program: {e}",
                                  device=self.name) from e
            raise DeviceError(f"cannot open {url}: {e}", device=self.name) from e
        self.current = url
        # read directly when the port is a plain tty whose descriptors are where pyserial
        # 3.5 keeps them (another version may keep them elsewhere: then its own read)
        port = self.port
        self._direct = (type(port) is PosixSerial
                        and isinstance(getattr(port, "fd", None), int)
                        and isinstance(getattr(port, "pipe_abort_read_r", None), int))
        log.info("%s: opened %s", self.name, url)

    def _close(self) -> None:
        port, self.port = self.port, None
        if port is not None:
            port.close()

    def cancel_read(self) -> None:
        if self.port is not None and hasattr(self.port, "cancel_read"):
            self.port.cancel_read()

    def _typed(self, e: BaseException, what: str) -> DeviceError:
        if is_gone(e):
            return DeviceDisconnected(f"{self.current}: {what}: {e}", device=self.name)
        return DeviceError(f"{self.current}: {what}: {e}", device=self.name)

    def read(self) -> bytes:
        port = self.port
        if port is None:
            raise DeviceDisconnected(f"{self.description}: port is closed", device=self.name)
        if self._direct:  # a plain tty (not spy://, socket://, …: see open)
            return self._read_tty(port)
        try:
            data = port.read(1)  # waits up to the timeout for the first byte
            if data:
                waiting = port.in_waiting  # type: ignore[attr-defined]  # every port class has it; SerialBase does not declare it
                if waiting:
                    data += port.read(min(waiting, READ_SIZE))
            return bytes(data)
        except Exception as e:
            raise self._typed(e, "read failed") from e

    def _read_tty(self, port: Any) -> bytes:
        """What the tty holds, waiting up to the timeout for its first byte: one ``select``
        and one ``os.read`` on pyserial's own descriptors (``fd``, and ``pipe_abort_read_r``,
        which :meth:`cancel_read` writes to), as pyserial's ``read`` does them.

        pyserial's ``read(size)`` waits for ``size`` bytes or the timeout; a frame reader
        wants what is there, so it cost ``read(1)``, ``in_waiting`` and ``read(n)`` a frame:
        two selects, two reads, an ioctl and pyserial's Python loop, on every card's way in
        (measured, ``benchmarks/device_bench.py``: a card's software time p50 0.14–0.15 →
        0.12–0.13 ms, p99 0.22–0.27 → 0.19–0.22 ms). The errors are pyserial's: a
        descriptor ready with nothing to read is a device gone; EAGAIN (another reader took
        the bytes) is nothing read."""
        fd, abort = port.fd, port.pipe_abort_read_r
        if fd is None or abort is None:  # closed meanwhile
            raise DeviceDisconnected(f"{self.description}: port is closed", device=self.name)
        try:
            ready, _, _ = select.select([fd, abort], [], [], self.timeout)
            if not ready:
                return b""
            if abort in ready:
                os.read(abort, 1000)  # cancel_read: stop waiting
                return b""
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return b""
        except OSError as e:
            raise self._typed(e, "read failed") from e
        if not data:
            raise DeviceDisconnected(f"{self.current}: read failed: the port reports data but "
                                     "returned none (the device is gone)", device=self.name)
        return data

    def write(self, data: bytes) -> None:
        port = self.port
        if port is None:
            raise DeviceDisconnected(f"{self.description}: port is closed", device=self.name)
        try:
            port.write(data)
        except serial.SerialTimeoutException as e:
            raise DeviceDisconnected(f"{self.current}: the device took no bytes for "
                                     f"{WRITE_TIMEOUT} s (it reads nothing): write failed",
                                     device=self.name) from e
        except Exception as e:
            raise self._typed(e, "write failed") from e
