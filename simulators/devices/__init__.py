"""Simulated card-handling devices speaking SWP/1 (docs/protocol.md, docs/devices.md).

Each is a pure state machine with injected time: ``receive(bytes, now)``, ``tick(now) ->
bytes``, plus the actions the simulated dealer performs. :mod:`simulators.pty_host` puts
them on ptys; :mod:`simulators.usb_backend` behind a pyusb backend.
"""

from simulators.devices.base import (
    DEFAULT_IDENTITIES,
    EVENT_MESSAGES,
    RESEND_DEPTH,
    Device,
    default_identity,
    firmware_hash,
)
from simulators.devices.scanner import Scanner
from simulators.devices.shoe import Shoe
from simulators.devices.shuffler import BatchShuffler, ContinuousShuffler, ScriptedOrder, Shuffler

__all__ = [
    "DEFAULT_IDENTITIES", "EVENT_MESSAGES", "RESEND_DEPTH", "BatchShuffler", "ContinuousShuffler",
    "Device", "Scanner", "ScriptedOrder", "Shoe", "Shuffler", "default_identity",
    "firmware_hash",
]
