"""The device error tree. Catch :class:`DeviceError` for any device trouble, or a subclass.

Modelled on python-can's ``CanError`` family: each error also derives from the
matching built-in (``TimeoutError``, ``ConnectionError``) so generic handlers
work, and drivers raise them ``from`` the underlying pyserial / pyusb error.
"""

from __future__ import annotations


class DeviceError(Exception):
    """Any failure talking to a card-handling device. ``device`` names it (config name)."""

    def __init__(self, message: str, *, device: str | None = None) -> None:
        self.device = device
        super().__init__(f"{device}: {message}" if device else message)


class DeviceTimeout(DeviceError, TimeoutError):
    """No answer in time: no ACK after the retries, or heartbeat silence."""


class DeviceDisconnected(DeviceError, ConnectionError):
    """The port or USB device went away (unplugged, closed, errno 19)."""


class DeviceNotFound(DeviceError, FileNotFoundError):
    """The configured port or USB id is not present."""


class ProtocolError(DeviceError):
    """Malformed traffic: framing errors, sequence gaps, payloads that are not valid."""


class DeviceIdentityError(DeviceError):
    """The device's identity is not on the table's allowlist, or changed mid-shoe."""


class DriverNotFound(DeviceError, LookupError):
    """No driver registered under the configured name."""
