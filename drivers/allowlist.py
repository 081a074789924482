"""The device identity allowlist: which shoes, scanners and shufflers a table may use.

A table's config lists every approved device by model, serial number, firmware
version and firmware hash (``kind`` optional)::

    [[allowlist]]
    kind = "shoe"
    model = "SW-SHOE-1"
    serial = "SH123456"
    firmware = "2.4.1"
    firmware_hash = "sha256:9f2c…"

Two approved firmware versions of one device are two entries. A device whose
``IDENTITY`` matches no entry is refused with :class:`IdentityMismatch` (a
:class:`~drivers.errors.DeviceIdentityError`) naming the field that differs from the
closest entry; a device that comes back from a reconnect as another device is refused
too (:func:`check_same_device`). The runtime turns either into the ``DEVICE_IDENTITY``
deviation. An empty allowlist refuses every device.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drivers.errors import DeviceIdentityError
from drivers.protocol import Identity

FIELDS = ("kind", "model", "serial", "firmware", "firmware_hash")
REQUIRED = ("model", "serial", "firmware", "firmware_hash")


class IdentityMismatch(DeviceIdentityError):
    """A refused identity: ``field`` differs; ``expected`` / ``actual`` are its values."""

    def __init__(self, message: str, *, field: str, expected: str | None, actual: str | None,
                 device: str | None = None) -> None:
        self.field = field
        self.expected = expected
        self.actual = actual
        super().__init__(message, device=device)


@dataclass(frozen=True, slots=True)
class AllowedDevice:
    model: str
    serial: str
    firmware: str
    firmware_hash: str
    kind: str | None = None

    @classmethod
    def from_config(cls, entry: Mapping[str, Any], where: str = "allowlist") -> AllowedDevice:
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected a table {{model, serial, firmware, "
                             f"firmware_hash}}, got {entry!r}")
        unknown = set(entry) - set(FIELDS)
        if unknown:
            raise ValueError(f"{where}.{sorted(unknown)[0]}: unknown key (keys: "
                             f"{', '.join(FIELDS)})")
        for key in REQUIRED:
            value = entry.get(key)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{where}.{key}: "
                                 + ("missing" if value is None else f"expected a string, got "
                                                                    f"{value!r}"))
        kind = entry.get("kind")
        if kind is not None and (not isinstance(kind, str) or not kind):
            raise ValueError(f"{where}.kind: expected a string, got {kind!r}")
        return cls(entry["model"], entry["serial"], entry["firmware"], entry["firmware_hash"],
                   kind)

    def mismatch(self, identity: Identity) -> str | None:
        """The first field (in :data:`FIELDS` order) where ``identity`` differs, or None."""
        for name in FIELDS:
            expected = getattr(self, name)
            if expected is not None and getattr(identity, name) != expected:
                return name
        return None


class Allowlist:
    """The approved devices of one table."""

    def __init__(self, entries: Iterable[AllowedDevice] = ()) -> None:
        self.entries: tuple[AllowedDevice, ...] = tuple(entries)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
                    ) -> Allowlist:
        """From a table config (its ``allowlist`` key) or the list itself. Raises ``ValueError``
        naming the key for a bad entry."""
        if config is None:
            return cls()
        raw = config.get("allowlist", []) if isinstance(config, Mapping) else config
        if not isinstance(raw, Sequence) or isinstance(raw, str):
            raise ValueError(f"allowlist: expected a list of devices, got {raw!r}")
        return cls(AllowedDevice.from_config(e, f"allowlist[{i}]") for i, e in enumerate(raw))

    def __len__(self) -> int:
        return len(self.entries)

    def check(self, identity: Identity, *, device: str | None = None) -> AllowedDevice:
        """The entry that admits ``identity``, or :class:`IdentityMismatch` naming the first
        field in which it differs from the closest entry (the one that agrees on the most
        fields: same model and serial, say, but another firmware hash)."""
        if not self.entries:
            raise IdentityMismatch(
                f"{_describe(identity)} refused: the table's allowlist is empty",
                field="serial", expected=None, actual=identity.serial, device=device)
        best: tuple[int, AllowedDevice, str] | None = None
        for entry in self.entries:
            name = entry.mismatch(identity)
            if name is None:
                return entry
            score = _agreement(entry, identity)
            if best is None or score > best[0]:
                best = (score, entry, name)
        assert best is not None
        _, entry, name = best
        expected = getattr(entry, name)
        actual = getattr(identity, name)
        if name in ("model", "serial"):
            message = (f"{_describe(identity)} is not on the allowlist "
                       f"({name} {actual!r} is not approved)")
        else:
            message = (f"{name} differs: {identity.model} {identity.serial} reports "
                       f"{actual!r}, the allowlist has {expected!r}")
        raise IdentityMismatch(message, field=name, expected=expected, actual=actual,
                               device=device)


def _agreement(entry: AllowedDevice, identity: Identity) -> int:
    """How many fields agree (an entry without ``kind`` agrees on it)."""
    return sum(getattr(entry, name) in (None, getattr(identity, name)) for name in FIELDS)


def _describe(identity: Identity) -> str:
    return f"{identity.kind} {identity.model} serial {identity.serial}"


def check_kind(kind: str, identity: Identity, *, device: str | None = None) -> None:
    """A shoe driver takes a shoe: refuse a device of another kind."""
    if kind and identity.kind != kind:
        raise IdentityMismatch(f"kind differs: a {kind} was expected, the device is a "
                               f"{identity.kind} ({identity.model} {identity.serial})",
                               field="kind", expected=kind, actual=identity.kind, device=device)


def check_same_device(previous: Identity, current: Identity, *,
                      device: str | None = None) -> None:
    """After a reconnect the device must be the one it was: refuse any changed field."""
    for name in FIELDS:
        before, after = getattr(previous, name), getattr(current, name)
        if before != after:
            raise IdentityMismatch(
                f"{name} changed after a reconnect: was {before!r}, now {after!r}",
                field=name, expected=before, actual=after, device=device)
