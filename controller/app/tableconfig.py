"""The table config: one TOML file per table for ``shoewarden run`` (config/tables/).

::

    table = "BJ-03"                    # table id: letters, digits, . _ -
    profile = "gr-blackjack"           # a profile name, or a .toml file
    decks = 6                          # optional: the decks a table_open proposes
    log_dir = "/var/lib/shoewarden/audit"   # one file per table per day under <log_dir>/<table>/
    anchors = "/var/lib/shoewarden/anchors/BJ-03.jsonl"   # optional: the anchor file
    anchors_syslog = true              # optional: anchors to syslog too (default true)
    key_file = "/etc/shoewarden/audit.key"  # optional: an HMAC-chained (keyed) log
    durability = "input"               # optional: input (default) | every | none

    [devices.shoe]                     # the drivers' keys: docs/devices.md "Table config"
    driver = "swp-shoe"
    port = "/dev/serial/by-id/usb-FTDI_FT232R_A10K3F-if00-port0"

    [[allowlist]]                      # every approved device
    kind = "shoe"
    model = "SW-SHOE-1"
    …

Relative paths (``profile`` files, ``log_dir``, ``anchors``, ``key_file``) are relative to
the config file's directory. Errors are ``FILE: key: what is wrong``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.audit.chain import DURABILITY_POLICIES, Durability
from controller.audit.files import check_table_id
from controller.configfile import ConfigFileError, read_toml
from controller.profiles import Profile, ProfileError, load_profile
from controller.validation import Invalid, check_bool, check_choice, check_int, check_text

KEYS = ("table", "profile", "decks", "log_dir", "anchors", "anchors_syslog", "key_file",
        "durability", "devices", "allowlist")


class TableConfigError(ConfigFileError):
    """A table config that cannot be used: ``file: key: what is wrong``."""


@dataclass
class TableConfig:
    path: Path
    table: str
    profile: Profile
    log_dir: Path
    decks: int | None = None
    anchors: Path | None = None
    anchors_syslog: bool = True
    key_file: Path | None = None
    durability: str = Durability.INPUT.value
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    allowlist: list[dict[str, Any]] = field(default_factory=list)

    def drivers_config(self) -> dict[str, Any]:
        """What ``drivers.registry.create_drivers`` takes."""
        return {"devices": self.devices, "allowlist": self.allowlist}


def _path(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _string(file: str, raw: Mapping[str, Any], key: str, required: bool = True) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise TableConfigError(file, key, "missing")
        return None
    text = _checked(file, check_text, key, value)
    if "\x00" in text:  # (no path or name holds one; the OS refuses it with a traceback)
        raise TableConfigError(file, key, "contains a NUL character")
    return text


def _checked(file: str, check: Any, key: str, value: Any) -> Any:
    """``value`` through its field's check (:mod:`controller.validation`), or the config's
    error naming the file and the key."""
    try:
        return check(key, value)
    except Invalid as e:
        raise TableConfigError(file, key, e.why) from None


def load_table_config(path: str | Path) -> TableConfig:
    path = Path(path)
    file = str(path)
    raw = read_toml(path, TableConfigError, missing="no such file")
    for key in raw:
        if key not in KEYS:
            raise TableConfigError(file, key, f"unknown key (known: {', '.join(KEYS)})")
    base = path.resolve().parent
    table = _string(file, raw, "table")
    assert table is not None
    try:
        check_table_id(table)
    except ValueError as e:
        raise TableConfigError(file, "table", str(e)) from None
    profile_ref = _string(file, raw, "profile")
    assert profile_ref is not None
    if profile_ref.endswith(".toml") or "/" in profile_ref:
        profile_ref = str(_path(base, profile_ref))
    try:
        profile = load_profile(profile_ref)
    except ProfileError as e:
        raise TableConfigError(file, "profile", str(e)) from None
    log_dir = _string(file, raw, "log_dir")
    assert log_dir is not None
    decks = raw.get("decks")
    if decks is not None:
        try:
            check_int("decks", decks, profile.decks.min, profile.decks.max)
        except Invalid:
            raise TableConfigError(file, "decks", f"expected {profile.decks.min}..."
                                   f"{profile.decks.max} decks for {profile.name}, "
                                   f"got {decks!r}") from None
    syslog = _checked(file, check_bool, "anchors_syslog", raw.get("anchors_syslog", True))
    durability = raw.get("durability", Durability.INPUT.value)
    try:
        durability = check_choice("durability", durability, Durability).value
    except Invalid:
        *first, last = DURABILITY_POLICIES
        raise TableConfigError(file, "durability", f"expected {', '.join(first)} or {last}, "
                               f"got {durability!r}") from None
    devices = raw.get("devices", {})
    if not isinstance(devices, dict) or not all(isinstance(v, dict) for v in devices.values()):
        raise TableConfigError(file, "devices", "expected tables [devices.<name>]")
    allowlist = raw.get("allowlist", [])
    if not isinstance(allowlist, list):
        raise TableConfigError(file, "allowlist", "expected [[allowlist]] tables")
    anchors = _string(file, raw, "anchors", required=False)
    key_file = _string(file, raw, "key_file", required=False)
    return TableConfig(
        path=path, table=table, profile=profile, log_dir=_path(base, log_dir), decks=decks,
        anchors=_path(base, anchors) if anchors else None, anchors_syslog=syslog,
        key_file=_path(base, key_file) if key_file else None, durability=durability,
        devices=devices, allowlist=allowlist)
