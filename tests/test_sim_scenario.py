"""Scenario files load like the profiles: good files load, every kind of mistake in a file
is reported as ``file: key: what is wrong``."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.profiles import load_profile
from simulators.faults import FAULT_KINDS, MISTAKES
from simulators.scenario import (
    SCENARIO_DIR,
    ScenarioError,
    load_scenario,
    load_scenario_file,
    scenario_from_dict,
    scenario_names,
)

GOOD = """
name = "good"
title = "a scenario"
profile = "gr-blackjack"
seed = 3
expect = ["BURN_COUNT", "DEVICE_FAULT"]

[plan]
shoes = 1
decks = 6
dealer_changes = false

[host]
pace = 0.01
shuffler = "none"

[devices.shoe]
serial = "SH777"
heartbeat = 0.5

[[fault]]
kind = "jam"
device = "shoe"
card = 12
seconds = 1.5

[[fault]]
kind = "garble"
device = "scanner"
time = 2.5

[[fault]]
kind = "unshuffled"
device = "shuffler"
shuffle = 2

[[mistake]]
kind = "burn_four"
shoe = 1
"""


def write(tmp_path: Path, text: str, name: str = "good") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_a_good_file(tmp_path: Path) -> None:
    sc = load_scenario_file(write(tmp_path, GOOD))
    assert (sc.name, sc.profile, sc.seed, sc.expect) == ("good", "gr-blackjack", 3,
                                                         ("BURN_COUNT", "DEVICE_FAULT"))
    assert dict(sc.plan) == {"shoes": 1, "decks": 6, "dealer_changes": False}
    assert dict(sc.host) == {"pace": 0.01, "shuffler": "none"}
    assert dict(sc.devices["shoe"]) == {"serial": "SH777", "heartbeat": 0.5}
    jam, garble, unshuffled = sc.faults
    assert (jam.kind, jam.device, jam.card, jam["seconds"]) == ("jam", "shoe", 12, 1.5)
    assert (garble.time, garble["bits"]) == (2.5, 1)
    assert unshuffled.shuffle == 2
    assert sc.faults_for("shoe") == [jam]
    assert [m.kind for m in sc.mistakes] == ["burn_four"]
    steps = sc.steps(load_profile("gr-blackjack"), 3)
    assert sum(1 for s in steps if s.phase == "burn") == 4  # one shoe, four burnt


def test_minimal_file() -> None:
    sc = scenario_from_dict({"name": "x", "expect": []})
    assert (sc.faults, sc.mistakes, sc.profile, sc.seed) == ((), (), None, None)


@pytest.mark.parametrize("name", scenario_names())
def test_bundled_scenarios_load_and_fit_their_profile(name: str) -> None:
    sc = load_scenario(name)
    assert sc.name == name and sc.profile and sc.title
    steps = sc.steps(load_profile(sc.profile), sc.seed or 0)
    assert steps[0].event["type"] == "table_open"


def test_bundled_scenarios_use_every_fault_and_mistake_kind() -> None:
    kinds = {f.kind for n in scenario_names() for f in load_scenario(n).faults}
    mistakes = {m.kind for n in scenario_names() for m in load_scenario(n).mistakes}
    assert kinds == set(FAULT_KINDS)
    assert mistakes == set(MISTAKES)
    assert len(scenario_names()) >= 6 and SCENARIO_DIR.name == "scenarios"


def _error(tmp_path: Path, text: str, name: str = "good") -> str:
    with pytest.raises(ScenarioError) as e:
        load_scenario_file(write(tmp_path, text, name))
    return str(e.value)


def _edit(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


@pytest.mark.parametrize(("text", "message"), [
    (GOOD + "colour = 'red'\n", "colour: unknown key"),
    (_edit('name = "good"\n', ""), "name: missing"),
    (_edit('expect = ["BURN_COUNT", "DEVICE_FAULT"]', ""), "expect: missing"),
    (_edit('"BURN_COUNT", "DEVICE_FAULT"', '"BURN_COUNT", "BURN_CUONT"'),
     "expect[2]: 'BURN_CUONT' is not a deviation code"),
    (_edit('expect = ["BURN_COUNT", "DEVICE_FAULT"]', 'expect = "BURN_COUNT"'),
     "expect: expected a list"),
    (_edit('profile = "gr-blackjack"', 'profile = "gr-poker"'),
     "profile: 'gr-poker' is not a profile"),
    (_edit("seed = 3", "seed = -1"), "seed: expected a non-negative integer"),
    (_edit('title = "a scenario"', "title = 3"), "title: expected a non-empty string"),
    (_edit("shoes = 1", "shoes = 0"), "plan.shoes: 0 is out of range 1..50"),
    (_edit("shoes = 1", "shoe = 1"), "plan.shoe: unknown key"),
    (_edit("dealer_changes = false", "dealer_changes = 0"),
     "plan.dealer_changes: expected true or false"),
    (_edit('shuffler = "none"', 'shuffler = "batch"'),
     "host.shuffler: 'batch' is not one of auto, none"),
    (_edit("pace = 0.01", 'pace = "fast"'), "host.pace: expected a number"),
    (_edit("[devices.shoe]", "[devices.sabot]"), "devices.sabot: unknown device"),
    (_edit("heartbeat = 0.5", "heartbeat = 0"), "devices.shoe.heartbeat: 0 is out of range"),
    (_edit("heartbeat = 0.5", "colour = 1"), "devices.shoe.colour: unknown key"),
    (_edit('kind = "jam"', 'kind = "melt"'), "fault[1].kind: 'melt' is not one of"),
    (_edit('kind = "jam"\ndevice = "shoe"', 'kind = "jam"\ndevice = "scanner"'),
     "fault[1].device: a scanner cannot have a jam fault"),
    (_edit("card = 12", "card = 0"), "fault[1].card: 0 is out of range"),
    (_edit("card = 12\n", ""), "fault[1]: give exactly one trigger"),
    (_edit("card = 12\n", "card = 12\ntime = 3\n"), "fault[1]: give exactly one trigger"),
    (_edit("seconds = 1.5", "seconds = -1"), "fault[1].seconds: -1 is out of range"),
    (_edit("time = 2.5", "time = 2.5\nbitz = 2"), "fault[2].bitz: unknown key"),
    (_edit("shuffle = 2", "shuffle = 2.5"), "fault[3].shuffle: expected an integer"),
    (_edit('kind = "burn_four"', 'kind = "burn_five"'),
     "mistake[1].kind: 'burn_five' is not one of"),
    (_edit("shoe = 1\n", "shoe = 1\nround = 2\n"), "mistake[1].round: unknown key"),
    ('name = "good"\nexpect = []\nfault = 3\n', "fault: expected [[fault]] tables"),
    ("name = 'good'\nexpect = [\n", "not valid TOML"),
])
def test_each_error_names_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    msg = _error(tmp_path, text)
    assert msg.startswith(str(tmp_path / "good.toml") + ": "), msg
    assert message in msg, msg


def test_name_must_match_the_file(tmp_path: Path) -> None:
    assert "name: 'good' differs from the file name" in _error(tmp_path, GOOD, "other")


def test_unknown_scenario_name_lists_the_known_ones() -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario("no-such-scenario")
    assert "dealer-mistakes" in str(e.value)


def test_a_mistake_that_does_not_fit_the_profile_names_file_and_key(tmp_path: Path) -> None:
    sc = load_scenario_file(write(tmp_path, _edit("shoe = 1\n", "shoe = 7\n")))
    with pytest.raises(ScenarioError) as e:
        sc.steps(load_profile("gr-blackjack"), 3, sc.day_plan())
    assert str(e.value) == f"{tmp_path / 'good.toml'}: mistake[1].shoe: shoe 7 has no burn"


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as e:
        load_scenario_file(tmp_path / "absent.toml")
    assert "cannot read" in str(e.value)


def test_docs_list_every_fault_and_mistake_and_the_example_is_the_file() -> None:
    import tomllib

    doc = (Path(__file__).resolve().parent.parent / "docs" / "devices.md").read_text()
    section = doc.split("## Simulated devices and fault scenarios", 1)[1]
    for kind in (*FAULT_KINDS, *MISTAKES):
        assert f"| `{kind}` |" in section, kind
    for code in {m.code for m in MISTAKES.values()}:
        assert f"`{code}`" in section, code
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    path = SCENARIO_DIR / "shoe-jam-door.toml"
    assert tomllib.loads(example) == tomllib.loads(path.read_text())
    for name in scenario_names():
        assert f"`{name}`" in section, name
