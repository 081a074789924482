"""The systemd units under config/deploy/ start commands the CLI accepts as written."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from controller.cli import build_parser
from tests.floor_helpers import ROOT

UNITS = sorted((ROOT / "config" / "deploy").glob("*.service"))


def exec_start(unit: Path) -> list[str]:
    text = unit.read_text(encoding="utf-8").replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart=").replace("${SHOEWARDEN_DB}",
                                                               "postgresql://floor@db/floor"))


def test_there_is_a_unit_for_the_table_and_one_for_the_floor() -> None:
    assert {u.name for u in UNITS} == {"shoewarden-table.service", "shoewarden-floor.service"}


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_a_units_command_parses(unit: Path) -> None:
    argv = exec_start(unit)
    assert argv[0].endswith("/shoewarden")
    args = build_parser().parse_args(argv[1:])  # SystemExit (a failure) on a bad option
    assert args.command in ("run", "floor")
    assert len(getattr(args, "nats", None) or args.publish) == 3  # the three-node cluster
