"""The identity allowlist, and drivers refusing devices that are not on it or that change.

docs/protocol.md: the controller checks IDENTITY against the table's allowlist (model,
serial, firmware version and hash); a device that does not match, or that changes identity
after a reconnect mid-shoe, is refused.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from controller.events import DeviceFault, DeviceOk
from drivers.allowlist import Allowlist, IdentityMismatch, check_same_device
from drivers.diagnostics import DeviceDiagnostic
from drivers.errors import DeviceIdentityError, DeviceTimeout
from drivers.framing import encode
from drivers.protocol import Identity, Kind
from drivers.scanner import ScannerDriver
from drivers.shoe import ShoeDriver
from drivers.transport import MemoryTransport

T = "2026-11-21T10:00:00.000Z"
SHOE = Identity("shoe", "SW-SHOE-1", "SH123456", "2.4.1", "sha256:9f2c")
SPARE = Identity("shoe", "SW-SHOE-1", "SH999999", "2.4.1", "sha256:9f2c")
CONFIG = {"allowlist": [
    {"kind": "shoe", "model": "SW-SHOE-1", "serial": "SH123456", "firmware": "2.4.1",
     "firmware_hash": "sha256:9f2c"},
    {"kind": "shoe", "model": "SW-SHOE-1", "serial": "SH999999", "firmware": "2.4.1",
     "firmware_hash": "sha256:9f2c"},
    {"model": "SW-SCAN-2", "serial": "SC000001", "firmware": "1.0", "firmware_hash": "sha256:aa"},
]}


def body(identity: Identity) -> dict[str, str]:
    return {"kind": identity.kind, "model": identity.model, "serial": identity.serial,
            "firmware": identity.firmware, "firmware_hash": identity.firmware_hash}


def handshake(driver: ShoeDriver, identity: Identity, now: float = 0.0) -> list:
    driver.open(now)
    return driver.feed(encode(0, Kind.ACK, {"ack": 0}) + encode(1, Kind.IDENTITY, body(identity)),
                       now)


def faults(out: list) -> list[tuple[str, str]]:
    return [(e.type, e.code) for e in out if isinstance(e, DeviceFault | DeviceOk)]


# --------------------------------------------------------------------------- the list


def test_an_allowed_identity_passes() -> None:
    allow = Allowlist.from_config(CONFIG)
    assert len(allow) == 3
    assert allow.check(SHOE).serial == "SH123456"
    assert allow.check(Identity("scanner", "SW-SCAN-2", "SC000001", "1.0", "sha256:aa"))


@pytest.mark.parametrize(("change", "field"), [
    ({"firmware_hash": "sha256:0000"}, "firmware_hash"),
    ({"firmware": "2.4.2"}, "firmware"),
    ({"serial": "SH000000"}, "serial"),
    ({"model": "SW-SHOE-2"}, "model"),
    ({"kind": "scanner"}, "kind"),
])
def test_a_mismatch_names_the_field(change: dict, field: str) -> None:
    identity = replace(SHOE, **change)
    with pytest.raises(IdentityMismatch) as info:
        Allowlist.from_config(CONFIG).check(identity, device="shoe")
    err = info.value
    assert isinstance(err, DeviceIdentityError)
    assert err.field == field and err.actual == change[field]
    assert field in str(err) and str(err).startswith("shoe: ")


def test_an_empty_allowlist_refuses_everything() -> None:
    with pytest.raises(IdentityMismatch, match="allowlist is empty"):
        Allowlist.from_config({}).check(SHOE)


@pytest.mark.parametrize(("config", "where"), [
    ({"allowlist": [{"model": "M", "serial": "S", "firmware": "1"}]}, "allowlist[0].firmware_hash"),
    ({"allowlist": [{"model": "M", "serial": 5, "firmware": "1", "firmware_hash": "h"}]},
     "allowlist[0].serial"),
    ({"allowlist": [{"model": "M", "serial": "S", "firmware": "1", "firmware_hash": "h",
                     "colour": "red"}]}, "allowlist[0].colour"),
    ({"allowlist": "SH123456"}, "allowlist"),
])
def test_bad_config_names_the_key(config: dict, where: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(where)):
        Allowlist.from_config(config)


def test_same_device_check() -> None:
    check_same_device(SHOE, SHOE)
    with pytest.raises(IdentityMismatch) as info:
        check_same_device(SHOE, replace(SHOE, firmware="2.5.0"))
    assert info.value.field == "firmware" and "changed after a reconnect" in str(info.value)


# --------------------------------------------------------------------------- drivers


def test_the_driver_refuses_a_device_not_on_the_allowlist() -> None:
    shoe = ShoeDriver("shoe", utc=lambda: T, allowlist=Allowlist.from_config(CONFIG))
    out = handshake(shoe, replace(SHOE, firmware_hash="sha256:evil"))
    assert shoe.state == "refused"
    assert faults(out) == [("device_fault", "DEVICE_IDENTITY")]
    diag = [o for o in out if isinstance(o, DeviceDiagnostic) and o.code == "DEVICE_IDENTITY"]
    assert len(diag) == 1 and diag[0].kind == "firmware_hash"
    assert isinstance(shoe.refusal, IdentityMismatch)  # the error the diagnostic reports
    # a refused device's traffic is not taken
    out = shoe.feed(encode(2, Kind.CARD_OUT, {"card": "7H"}), 0.1)
    assert [o.kind for o in out] == ["before_identity"]


def test_nothing_that_came_with_a_refused_identity_is_taken() -> None:
    """IDENTITY and the device's first messages in one read: refused, nothing is taken."""
    shoe = ShoeDriver("shoe", utc=lambda: T, allowlist=Allowlist.from_config(CONFIG))
    shoe.open(0.0)
    data = (encode(0, Kind.ACK, {"ack": 0})
            + encode(1, Kind.IDENTITY, body(replace(SHOE, serial="SH999")))
            + encode(2, Kind.CARD_OUT, {"card": "7H"}) + encode(3, Kind.CUT_CARD_OUT, {}))
    out = shoe.feed(data, 0.0)
    assert shoe.state == "refused"
    assert [(type(o).__name__, getattr(o, "code", "")) for o in out] == [
        ("DeviceDiagnostic", "DEVICE_IDENTITY"), ("DeviceFault", "DEVICE_IDENTITY")]


def test_a_device_of_the_wrong_kind_is_refused_even_without_an_allowlist() -> None:
    scanner = ScannerDriver("scanner", utc=lambda: T)
    handshake(scanner, SHOE)
    assert scanner.state == "refused" and scanner.refusal is not None
    assert scanner.refusal.field == "kind"


def test_a_device_that_changes_identity_after_a_reconnect_is_refused() -> None:
    shoe = ShoeDriver("shoe", utc=lambda: T, allowlist=Allowlist.from_config(CONFIG))
    handshake(shoe, SHOE)
    assert shoe.state == "ready" and shoe.identity == SHOE
    out = shoe.lost("unplugged", 1.0)
    assert faults(out) == [("device_fault", "DISCONNECTED")]
    # the spare is on the allowlist, but it is not the shoe this table was dealing from
    out = handshake(shoe, SPARE, 2.0)
    assert shoe.state == "refused" and faults(out) == [("device_fault", "DEVICE_IDENTITY")]
    assert shoe.refusal is not None and shoe.refusal.field == "serial"
    assert shoe.identity == SHOE  # still pinned
    # the right one comes back: admitted, and the faults clear
    out = handshake(shoe, SHOE, 3.0)
    assert shoe.state == "ready"
    assert sorted(faults(out)) == [("device_ok", "DEVICE_IDENTITY"), ("device_ok", "DISCONNECTED")]


def test_a_released_identity_admits_another_allowed_device() -> None:
    shoe = ShoeDriver("shoe", utc=lambda: T, allowlist=Allowlist.from_config(CONFIG))
    handshake(shoe, SHOE)
    shoe.lost("swapped between shoes", 1.0)
    shoe.release_identity()
    handshake(shoe, SPARE, 2.0)
    assert shoe.state == "ready" and shoe.identity == SPARE


def test_wait_identified_raises_the_refusal_or_a_timeout() -> None:
    # a device behind a real reader thread: the wrong model answers the HELLO
    device = MemoryTransport()
    device.on_write = lambda data: device.inject(
        encode(0, Kind.IDENTITY, body(replace(SHOE, model="SW-SHOE-9"))))
    shoe = ShoeDriver("shoe", device, utc=lambda: T, allowlist=Allowlist.from_config(CONFIG))
    shoe.open()
    try:
        with pytest.raises(IdentityMismatch) as info:
            shoe.wait_identified(10.0)
        assert info.value.field == "model"
        # what happened meanwhile is not lost: the next poll returns it
        assert faults(shoe.poll()) == [("device_fault", "DEVICE_IDENTITY")]
    finally:
        shoe.close()
    # a device that never answers (time stepped by hand)
    t = [0.0]

    def sleep(dt: float) -> None:
        t[0] += dt

    silent = ShoeDriver("shoe", MemoryTransport(), utc=lambda: T, clock=lambda: t[0])
    silent.open()
    try:
        with pytest.raises(DeviceTimeout):
            silent.wait_identified(0.5, sleep=sleep, interval=0.1)
    finally:
        silent.close()
