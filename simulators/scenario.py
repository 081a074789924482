"""Fault scenarios: TOML files in ``config/scenarios/`` that a scenario engineer writes
without code. docs/devices.md ("Simulated devices and fault scenarios") is the reference.

A scenario names the device faults to inject (``[[fault]]``), the dealer mistakes to make
(``[[mistake]]``) and the deviation codes the run should raise (``expect``); it may pick
the profile, the seed, the shape of the day (``[plan]``), host settings (``[host]``) and
device identities (``[devices.<name>]``). Loading is strict, like the profiles: an unknown
key, a missing key or a bad value raises :class:`ScenarioError` with ``file: key: what is
wrong`` (``fault[2].bits`` is the second ``[[fault]]``'s ``bits``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from controller.configfile import ConfigFileError, check_stem, find_named, names_in, read_toml
from controller.deviations import CATALOG
from controller.profiles import Profile, profile_names
from controller.validation import Checker, Invalid, check_int, check_text
from simulators.dealer import DayPlan, Step, table_day
from simulators.faults import (
    DEVICES,
    Fault,
    FaultError,
    Mistake,
    Param,
    apply_mistakes,
    make_fault,
    make_mistake,
)

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "config" / "scenarios"

TOP_KEYS = ("name", "title", "profile", "seed", "expect", "plan", "host", "devices", "fault",
            "mistake")
PLAN_PARAMS: dict[str, Param] = {
    "shoes": Param(int, 2, 1, 50, "shoes (shuffle cycles; for stud: blocks of rounds)"),
    "rounds_per_block": Param(int, 20, 1, 1000, "rounds per block (shuffler and stud)"),
    "decks": Param(int, None, 1, 12, "decks in the pack (default: the profile's maximum)"),
    "dealer_changes": Param(bool, True, doc="change dealer mid-shoe where the profile burns"),
}
HOST_PARAMS: dict[str, Param] = {
    "pace": Param(float, 0.0, 0.0, 60.0, "seconds between two steps of the day"),
    "shuffler": Param(Literal["auto", "none"], "auto",
                      doc="auto: a batch shuffler shuffles for shoe and hand games; none: the "
                      "dealer shuffles by hand (a console event)"),
}
DEVICE_PARAMS: dict[str, Param] = {
    "model": Param(str, None, doc="IDENTITY model"),
    "serial": Param(str, None, doc="IDENTITY serial"),
    "firmware": Param(str, None, doc="IDENTITY firmware version"),
    "firmware_hash": Param(str, None, doc="IDENTITY firmware hash"),
    "heartbeat": Param(float, 1.0, 0.01, 60.0, "heartbeat period, seconds"),
}


class ScenarioError(ConfigFileError):
    """A scenario that cannot be loaded or applied: ``file: key: what is wrong``."""


@dataclass(frozen=True)
class Scenario:
    name: str
    expect: tuple[str, ...] = ()
    title: str = ""
    profile: str | None = None
    seed: int | None = None
    plan: Mapping[str, Any] = field(default_factory=dict)
    host: Mapping[str, Any] = field(default_factory=dict)
    devices: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    faults: tuple[Fault, ...] = ()
    mistakes: tuple[Mistake, ...] = ()
    path: str = field(default="<scenario>", compare=False)

    def faults_for(self, device: str) -> list[Fault]:
        return [f for f in self.faults if f.device == device]

    def day_plan(self, base: DayPlan | None = None) -> DayPlan:
        """``base`` (default: ``DayPlan()``) with this scenario's ``[plan]`` applied (a copy)."""
        return dataclasses.replace(base or DayPlan(), **self.plan)

    def steps(self, profile: Profile, seed: int, plan: DayPlan | None = None) -> list[Step]:
        """The day for ``profile`` with this scenario's mistakes made: played by ``plan``
        if given (the caller has merged it), else by this scenario's ``[plan]``."""
        steps = table_day(profile, seed, plan if plan is not None else self.day_plan())
        try:
            return apply_mistakes(steps, profile, self.mistakes)
        except FaultError as e:
            raise ScenarioError(self.path, e.key, e.why) from e


def _check(file: str, key: str, value: Any, check: Checker) -> Any:
    try:
        return check(key, value)
    except Invalid as e:
        raise ScenarioError(file, key, e.why) from None


def _table(file: str, key: str, raw: Any, params: Mapping[str, Param]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ScenarioError(file, key, f"expected a table [{key}]")
    out = {}
    for k, v in raw.items():
        if k not in params:
            raise ScenarioError(file, f"{key}.{k}", f"unknown key (known: {', '.join(params)})")
        try:
            out[k] = params[k].check(f"{key}.{k}", v)
        except FaultError as e:
            raise ScenarioError(file, e.key, e.why) from e
    return out


def scenario_from_dict(raw: Mapping[str, Any], file: str = "<scenario>") -> Scenario:
    """Validate a decoded TOML document and build the :class:`Scenario`."""
    for key in raw:
        if key not in TOP_KEYS:
            raise ScenarioError(file, key, f"unknown key (known: {', '.join(TOP_KEYS)})")
    for key in ("name", "expect"):
        if key not in raw:
            raise ScenarioError(file, key, "missing")
    values: dict[str, Any] = {"path": file}
    for key in ("name", "title"):
        if key in raw:
            values[key] = _check(file, key, raw[key], check_text)
    if "profile" in raw:
        known = profile_names()
        if raw["profile"] not in known:
            raise ScenarioError(file, "profile", f"{raw['profile']!r} is not a profile "
                                f"(known: {', '.join(known)})")
        values["profile"] = raw["profile"]
    if "seed" in raw:
        values["seed"] = _check(file, "seed", raw["seed"], check_int)
    expect = raw["expect"]
    if not isinstance(expect, list):
        raise ScenarioError(file, "expect", f"expected a list of deviation codes, got {expect!r}")
    for i, code in enumerate(expect, 1):
        if code not in CATALOG:
            raise ScenarioError(file, f"expect[{i}]", f"{code!r} is not a deviation code "
                                "(docs/deviations.md)")
    values["expect"] = tuple(expect)
    if "plan" in raw:
        values["plan"] = _table(file, "plan", raw["plan"], PLAN_PARAMS)
    if "host" in raw:
        values["host"] = _table(file, "host", raw["host"], HOST_PARAMS)
    if "devices" in raw:
        devs = raw["devices"]
        if not isinstance(devs, dict):
            raise ScenarioError(file, "devices", "expected tables [devices.<name>]")
        out = {}
        for name, table in devs.items():
            if name not in DEVICES:
                raise ScenarioError(file, f"devices.{name}",
                                    f"unknown device (devices: {', '.join(DEVICES)})")
            out[name] = _table(file, f"devices.{name}", table, DEVICE_PARAMS)
        values["devices"] = out
    for key, maker, dest in (("fault", make_fault, "faults"),
                             ("mistake", make_mistake, "mistakes")):
        items = raw.get(key, [])
        if not isinstance(items, list):
            raise ScenarioError(file, key, f"expected [[{key}]] tables")
        built = []
        for i, item in enumerate(items, 1):
            try:
                built.append(maker(item, f"{key}[{i}]"))
            except FaultError as e:
                raise ScenarioError(file, e.key, e.why) from e
        values[dest] = tuple(built)
    return Scenario(**values)


def load_scenario_file(path: str | Path) -> Scenario:
    path = Path(path)
    scenario = scenario_from_dict(read_toml(path, ScenarioError), str(path))
    check_stem(path, scenario.name, ScenarioError)
    return scenario


def scenario_names(directory: Path = SCENARIO_DIR) -> list[str]:
    return names_in(directory)


def load_scenario(name_or_path: str, directory: Path = SCENARIO_DIR) -> Scenario:
    """A bundled scenario by name, or any scenario file by path."""
    return load_scenario_file(find_named(name_or_path, directory, "scenario", ScenarioError))
