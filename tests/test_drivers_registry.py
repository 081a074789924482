"""Drivers by name through the ``shoewarden.drivers`` entry points, and the vendor-adapter
example of docs/devices.md run as written (one module, one entry point, one config line).
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from controller.cards import parse_card
from controller.events import DEVICE_INFO_EVENTS, CardDrawn, DeviceFault, Event
from drivers import registry
from drivers.allowlist import Allowlist
from drivers.base import DeviceDriver
from drivers.errors import DeviceError, DriverNotFound
from drivers.scanner import ScannerDriver
from drivers.serial_transport import SerialTransport
from drivers.shoe import ShoeDriver
from drivers.shuffler import ShufflerDriver, UsbShufflerDriver
from drivers.usb_transport import UsbTransport

DOC = Path(__file__).resolve().parent.parent / "docs" / "devices.md"


def test_the_reference_drivers_are_registered() -> None:
    assert {"swp-shoe", "swp-scanner", "swp-shuffler", "swp-usb-shuffler"} <= set(
        registry.driver_names())
    assert registry.load_driver_class("swp-shoe") is ShoeDriver
    assert registry.load_driver_class("swp-scanner") is ScannerDriver
    assert registry.load_driver_class("swp-shuffler") is ShufflerDriver
    assert registry.load_driver_class("swp-usb-shuffler") is UsbShufflerDriver


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(DriverNotFound) as info:
        registry.load_driver_class("acme-shoe-9000")
    message = str(info.value)
    assert "'acme-shoe-9000'" in message and "swp-shoe" in message and "swp-scanner" in message
    assert isinstance(info.value, LookupError)


def _eps(*pairs: tuple[str, str]) -> list[EntryPoint]:
    return [EntryPoint(name, value, registry.GROUP) for name, value in pairs]


def test_broken_registrations_are_device_errors(monkeypatch) -> None:
    monkeypatch.setattr(registry, "_entry_points", lambda: _eps(
        ("twice", "drivers.shoe:ShoeDriver"), ("twice", "drivers.scanner:ScannerDriver"),
        ("not-a-driver", "drivers.registry:create_driver"),
        ("missing", "no_such_module_xyz:Driver")))
    with pytest.raises(DeviceError, match="registered twice"):
        registry.load_driver_class("twice")
    with pytest.raises(DeviceError, match="not a DeviceDriver"):
        registry.load_driver_class("not-a-driver")
    with pytest.raises(DeviceError, match="failed to load"):
        registry.load_driver_class("missing")


def test_create_drivers_from_a_table_config() -> None:
    config = tomllib.loads('''
        [devices.shoe]
        driver = "swp-shoe"
        port = "/dev/ttyUSB0"
        heartbeat_timeout = 5
        [devices.shuffler]
        driver = "swp-usb-shuffler"
        usb = { vendor = 0x1209, product = 0x5357, serial = "SF0001" }
        [[allowlist]]
        model = "SW-SHOE-1"
        serial = "SH123456"
        firmware = "2.4.1"
        firmware_hash = "sha256:9f2c"
    ''')
    drivers = registry.create_drivers(config)
    shoe, shuffler = drivers["shoe"], drivers["shuffler"]
    assert isinstance(shoe, ShoeDriver) and shoe.name == "shoe" and shoe.state == "closed"
    assert isinstance(shoe.transport, SerialTransport) and shoe.transport.url == "/dev/ttyUSB0"
    assert shoe.link.heartbeat_timeout == 5.0
    assert isinstance(shoe.allowlist, Allowlist) and len(shoe.allowlist) == 1
    assert isinstance(shuffler, UsbShufflerDriver)
    assert isinstance(shuffler.transport, UsbTransport) and shuffler.transport.serial == "SF0001"


@pytest.mark.parametrize(("config", "match"), [
    ({"devices": {"shoe": {"port": "/dev/ttyUSB0"}}}, r"devices\.shoe\.driver"),
    ({"devices": {"shoe": {"driver": "swp-shoe"}}}, r"devices\.shoe: needs 'port'"),
    ({"devices": {"shoe": {"driver": "swp-shoe", "port": "loop://", "retries": "x"}}},
     "retries"),
])
def test_bad_device_config_names_the_key(config: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        registry.create_drivers(config)


# --------------------------------------------------------------------------- the doc example


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


@pytest.fixture
def acme(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """The adapter module from the doc, installed as its entry point says."""
    [module] = [b for b in _blocks("python") if b.startswith("# acme_shoe.py")]
    (tmp_path / "acme_shoe.py").write_text(module, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "acme_shoe", raising=False)
    [entry] = [tomllib.loads(b) for b in _blocks("toml") if "acme-shoe =" in b]
    group = entry["project"]["entry-points"][registry.GROUP]
    real = registry._entry_points
    monkeypatch.setattr(registry, "_entry_points",
                        lambda: real() + _eps(*group.items()))
    [table] = [tomllib.loads(b) for b in _blocks("toml") if 'driver = "acme-shoe"' in b]
    return table


def test_the_vendor_adapter_of_the_docs_works(acme) -> None:
    assert "acme-shoe" in registry.driver_names()
    driver = registry.create_driver("shoe", acme["devices"]["shoe"])
    assert isinstance(driver, ShoeDriver) and type(driver).__name__ == "AcmeShoeDriver"
    assert isinstance(driver.transport, SerialTransport)
    # run it pure (no port): the same class, fed the vendor's lines
    shoe: DeviceDriver = type(driver)("shoe", utc=lambda: "2026-11-21T10:00:00Z")
    assert isinstance(shoe, ShoeDriver)
    shoe.open(0.0)
    assert shoe.outbox == [b"ID?\n"]
    out = shoe.feed(b"CARD 7H\n", 0.0)  # before it identified: reported, not taken
    assert [getattr(o, "kind", "") for o in out] == ["before_identity"]
    out = shoe.feed(b"ID CS-7 A7-0042 1.3 sha256:1b2c\nHB\nCARD 7", 0.1)
    assert shoe.state == "ready" and shoe.identity.serial == "A7-0042"
    out = shoe.feed(b"H\nCARD ??\nCUT\nWHAT\n", 0.2)
    events = [o for o in out if isinstance(o, Event) and o.type not in DEVICE_INFO_EVENTS]
    assert events[0] == CardDrawn(card=parse_card("7H"), t="2026-11-21T10:00:00Z")
    assert [e.type for e in events] == ["card", "device_fault", "cut_card"]
    assert [o.kind for o in out if getattr(o, "code", "") == "PROTOCOL_ERROR"] == ["bad_line"]
    assert [f.code for f in shoe.tick(3.2) if isinstance(f, DeviceFault)] == ["SILENT"]
