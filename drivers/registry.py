"""Drivers by name, through the ``shoewarden.drivers`` entry-point group.

The reference drivers are registered in this project's ``pyproject.toml``::

    [project.entry-points."shoewarden.drivers"]
    swp-shoe = "drivers.shoe:ShoeDriver"
    swp-scanner = "drivers.scanner:ScannerDriver"
    swp-shuffler = "drivers.shuffler:ShufflerDriver"
    swp-usb-shuffler = "drivers.shuffler:UsbShufflerDriver"

A vendor adapter is one module, one entry-point line in its own package, and one
``driver = "…"`` line in the table config (docs/devices.md). A table config's
``[devices.<name>]`` tables name their driver; :func:`create_drivers` builds them all
with the table's allowlist.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from drivers.allowlist import Allowlist
from drivers.base import DeviceDriver
from drivers.errors import DeviceError, DriverNotFound

GROUP = "shoewarden.drivers"


def _entry_points() -> list[EntryPoint]:
    """The registered entry points (tests substitute their own)."""
    return list(entry_points(group=GROUP))


def _registered() -> dict[str, list[EntryPoint]]:
    found: dict[str, list[EntryPoint]] = {}
    for ep in _entry_points():
        found.setdefault(ep.name, []).append(ep)
    return found


def driver_names() -> list[str]:
    """Every registered driver name, sorted."""
    return sorted(_registered())


def load_driver_class(name: str) -> type[DeviceDriver]:
    """The driver class registered as ``name``; :class:`DriverNotFound` lists the known ones."""
    registered = _registered()
    eps = registered.get(name)
    if not eps:
        known = ", ".join(sorted(registered)) or "none"
        raise DriverNotFound(f"no driver named {name!r} in entry-point group {GROUP!r} "
                             f"(known: {known})")
    if len({ep.value for ep in eps}) > 1:
        raise DeviceError(f"driver {name!r} is registered twice: "
                          + ", ".join(sorted(ep.value for ep in eps)))
    try:
        cls = eps[0].load()
    except Exception as e:
        raise DeviceError(f"driver {name!r} ({eps[0].value}) failed to load: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, DeviceDriver)):
        raise DeviceError(f"driver {name!r} ({eps[0].value}) is not a DeviceDriver subclass")
    return cls


def create_driver(device: str, config: Mapping[str, Any], *,
                  allowlist: Allowlist | None = None, **kwargs: Any) -> DeviceDriver:
    """One device from its config table (key ``driver`` names the driver)."""
    name = config.get("driver")
    if not isinstance(name, str) or not name:
        raise ValueError(f"devices.{device}.driver: expected a driver name such as "
                         f"'swp-shoe', got {name!r}")
    return load_driver_class(name).from_config(device, config, allowlist=allowlist, **kwargs)


def create_drivers(table_config: Mapping[str, Any], **kwargs: Any) -> dict[str, DeviceDriver]:
    """Every ``[devices.<name>]`` of a table config, checked against its ``allowlist``
    (absent → empty → every device is refused)."""
    devices = table_config.get("devices", {})
    if not isinstance(devices, Mapping):
        raise ValueError(f"devices: expected a table of devices, got {devices!r}")
    allowlist = Allowlist.from_config(table_config)
    out: dict[str, DeviceDriver] = {}
    for device, config in devices.items():
        if not isinstance(config, Mapping):
            raise ValueError(f"devices.{device}: expected a table, got {config!r}")
        out[device] = create_driver(device, config, allowlist=allowlist, **kwargs)
    return out
