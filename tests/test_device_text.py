"""Text a device sends that is not valid Unicode stops at the boundary (issue 8).

A shoe's ``JAM {"detail": "\\ud800"}`` used to reach the audit writer as a string it
could not encode, and the engine thread stopped. Every payload is now decoded by
:mod:`controller.jsontext`: such a payload is a bad payload (a ``PROTOCOL_ERROR``), and
what the message meant still happens where it must (a jam is still a jam).
"""

from __future__ import annotations

import itertools

import orjson
import pytest

from controller.events import DeviceFault, Event
from drivers.diagnostics import DeviceDiagnostic
from drivers.framing import encode
from drivers.protocol import Kind
from drivers.scanner import ScannerDriver
from drivers.shoe import ShoeDriver
from drivers.shuffler import ShufflerDriver

T = "2026-11-24T10:00:00.000Z"
BAD_TEXT = [
    b'{"detail":"\\ud800"}',            # a lone surrogate escape
    b'{"detail":"\\udfff\\ud800"}',     # reversed pair
    b'{"detail":"\xff\xfe"}',           # not UTF-8
    b'{"card":"\\ud83c"}',
    b'{"code":"\\ud800JAM"}',
    b'{"detail":' + b"[" * 200 + b"]" * 200 + b"}",  # absurdly deep
    b'{"count":NaN}',
]


def connected(cls):  # type: ignore[no-untyped-def]
    driver = cls(cls.kind, utc=lambda: T)
    driver.open(0.0)
    seq = itertools.count()
    ident = {"kind": cls.kind, "model": "SW-1", "serial": "S1", "firmware": "1",
             "firmware_hash": "sha256:00"}
    driver.feed(encode(next(seq), Kind.ACK, {"ack": 0})
                + encode(next(seq), Kind.IDENTITY, ident), 0.0)
    assert driver.state == "ready"
    return driver, seq


def writable(o: object) -> None:
    """What the audit writer will do with it: encode as UTF-8 JSON."""
    if isinstance(o, Event | DeviceDiagnostic):
        orjson.dumps(o.to_record())


@pytest.mark.parametrize("cls", [ShoeDriver, ScannerDriver, ShufflerDriver])
@pytest.mark.parametrize("payload", BAD_TEXT)
def test_bad_text_in_any_message_is_a_bad_payload(cls, payload: bytes) -> None:  # type: ignore[no-untyped-def]
    driver, seq = connected(cls)
    for kind in sorted(cls.accepts):
        out = driver.feed(encode(next(seq), kind, payload), 1.0)
        for o in out:
            writable(o)  # never raises: no such string got past the boundary


def test_a_jam_with_unreadable_detail_is_still_a_jam() -> None:
    shoe, seq = connected(ShoeDriver)
    out = shoe.feed(encode(next(seq), Kind.JAM, b'{"detail":"\\ud800"}'), 1.0)
    (fault,) = [o for o in out if isinstance(o, DeviceFault)]
    assert fault.code == "JAM" and "unreadable" in (fault.detail or "")
    assert any(isinstance(o, DeviceDiagnostic) and o.kind == "bad_payload" for o in out)
    orjson.dumps(fault.to_record())
