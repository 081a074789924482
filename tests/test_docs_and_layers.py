"""The docs match the code, and no module imports upward across the layers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from controller.deviations import CATALOG
from controller.events import EVENT_TYPES

ROOT = Path(__file__).resolve().parent.parent

# What each layer may import of this project (first-party packages; the standard library
# and the third-party libraries in pyproject.toml are not listed). Everything not listed is
# forbidden: nothing imports upward, the engine never imports a driver.
MAY_IMPORT = {
    # the engine, rules, audit and CLI: itself only (the composition root is apart, below)
    "controller": ("controller",),
    # bytes to typed device messages: the value types it produces (events, cards) and the
    # text boundary every payload passes (jsontext), the field checks every payload passes
    "drivers": ("drivers", "controller.events", "controller.cards", "controller.jsontext",
                "controller.validation"),
    # the device side of the same protocols: the wire (protocol, framing), the card grammar,
    # the profiles a day is dealt by, the config reader and the deviation codes a scenario
    # expects, the field checks a scenario's values pass
    "simulators": ("simulators", "drivers.protocol", "drivers.framing", "controller.cards",
                   "controller.profiles", "controller.configfile", "controller.deviations",
                   "controller.validation"),
    # the live views: audit records in, pages out. The audit package (chain, files, the
    # report's round layout) and the deviation catalogue; never the engine, a driver, a
    # simulator or the composition root, so the floor reads logs and nothing else
    "floor": ("floor", "controller.audit", "controller.deviations", "controller.jsontext"),
}
FIRST_PARTY = ("controller", "drivers", "simulators", "floor")
# The composition root (docs/architecture.md): the only place in controller/ that may import
# drivers, and only its bench and sim commands may import simulators (paths relative to it;
# a package stands for every module in it).
COMPOSITION_ROOT = "controller/app"
SIMULATOR_COMMANDS = ("bench/", "sim.py")


def _first_party(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in FIRST_PARTY)


def _allowed(name: str, allowed: tuple[str, ...]) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


def _imported(path: Path) -> set[str]:
    """What a module imports, each by its full name: ``from controller import jsontext`` is
    ``controller.jsontext`` (so a bare package import cannot smuggle in a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_each_layer_imports_only_what_it_may(layer: str) -> None:
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        if path.parent.relative_to(ROOT).as_posix().startswith(COMPOSITION_ROOT):
            continue  # checked below
        for name in _imported(path):
            if _first_party(name) and not _allowed(name, MAY_IMPORT[layer]):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, bad


def test_the_floor_is_imported_only_by_the_composition_root() -> None:
    """The floor sits above the controller's core: the core, drivers and simulators never
    import it; controller/app does (the dealer display, the floor and demo commands)."""
    bad = []
    for layer in ("controller", "drivers", "simulators"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            if path.relative_to(ROOT).as_posix().startswith(COMPOSITION_ROOT):
                continue
            if any(n == "floor" or n.startswith("floor.") for n in _imports(path)):
                bad.append(path.relative_to(ROOT).as_posix())
    assert not bad, bad


def test_the_composition_root_imports_simulators_only_in_the_simulator_commands() -> None:
    root = ROOT / COMPOSITION_ROOT
    paths = sorted(root.rglob("*.py"))
    assert {p.relative_to(root).as_posix() for p in paths} >= {
        "runtime.py", "bench/__init__.py", "bench/runner.py", "run.py", "sim.py"}
    bad = []
    for path in paths:
        uses_sim = any(n == "simulators" or n.startswith("simulators.") for n in _imports(path))
        if uses_sim and not path.relative_to(root).as_posix().startswith(SIMULATOR_COMMANDS):
            bad.append(f"{path.relative_to(ROOT)} imports simulators")
    assert not bad, bad
    # the rest of controller/ reaches the composition root only through the CLI
    for path in sorted((ROOT / "controller").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(COMPOSITION_ROOT) or rel == "controller/cli.py":
            continue
        assert not any(n.startswith("controller.app") for n in _imports(path)), rel


def test_engine_reads_no_clock_no_randomness_no_io() -> None:
    engine = sorted((ROOT / "controller" / "engine").glob("*.py"))
    assert {p.name for p in engine} >= {"__init__.py", "core.py", "graph.py", "states.py"}
    modules = [*engine, *(ROOT / "controller" / f"{m}.py"
                          for m in ("rounds", "events", "cards", "deviations", "outputs"))]
    for path in modules:
        names = _imports(path)
        assert not names & {"random", "secrets", "time", "os", "io", "socket", "serial", "usb"}
        text = path.read_text()
        assert ".now(" not in text and not re.search(r"(?<![\w.])open\(", text)


def test_every_deviation_code_is_documented_with_its_severity() -> None:
    doc = (ROOT / "docs" / "deviations.md").read_text()
    for code, spec in CATALOG.items():
        row = re.search(rf"^\| `{code}` \| (\w+) \|", doc, re.M)
        assert row, f"{code} missing from docs/deviations.md"
        assert row.group(1) == spec.severity, code


def test_every_event_type_is_documented() -> None:
    doc = (ROOT / "docs" / "events.md").read_text()
    for kind in EVENT_TYPES:
        assert f"| `{kind}` |" in doc or f"`{kind}` /" in doc, kind


def test_architecture_doc_names_every_controller_module() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for path in [*(ROOT / "controller").glob("*.py"), *(ROOT / COMPOSITION_ROOT).glob("*.py"),
                 *(ROOT / "controller" / "engine").glob("*.py")]:
        if path.stem.startswith("__"):
            continue
        assert f"`{path.name}`" in doc, path.name
    # the modules of the packages that split a command or a layer's flow, by package/module
    for package in ("controller/app/bench", "controller/audit/report", "simulators/pty_host"):
        for path in (ROOT / package).glob("*.py"):
            if path.stem.startswith("__"):
                continue
            name = f"{path.parent.name}/{path.name}"
            assert f"`{name}`" in doc, name
    for path in (ROOT / "drivers").glob("*.py"):
        if not path.stem.startswith("__"):
            assert f"drivers/{path.name}" in doc or f"`{path.name}`" in doc, path.name


def test_readme_quick_start_is_three_make_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make run", "make test", "make demo"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()
