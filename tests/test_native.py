"""The compiled modules (controller/native.py): built for the tests, never stale, and
deciding exactly as their source does."""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from benchmarks.screen_trials import MODELS, day_of_findings
from controller import native
from controller.screening import screen as compiled_screen

ROOT = Path(__file__).resolve().parent.parent


_NOT_BUILT = ("the modules are not compiled: install gcc and python3-dev (apt-get install gcc "
              "python3-dev), then run make native")


def _built_record() -> dict[str, object]:
    record = native.read_record()
    assert record.get("modules") and isinstance(record.get("sources"), dict), _NOT_BUILT
    return record


def test_every_listed_module_runs_compiled() -> None:
    # make test builds the compiled modules (gcc and python3-dev, installed by make when
    # missing): what the benchmarks measure and a table runs is what the tests test
    for module in native.COMPILED:
        __import__(module)
        assert native.STATUS.get(module) == "compiled", (
            f"{module}: {native.STATUS.get(module, 'not looked at')} — {_NOT_BUILT}")
        assert native.is_compiled(sys.modules[module])


def test_the_makefile_compiles_what_native_lists() -> None:
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    sources = re.search(r"^NATIVE_SOURCES := (.+)$", makefile, re.MULTILINE)
    assert sources is not None
    assert sorted(sources.group(1).split()) == sorted(
        str(native.source_path(m).relative_to(ROOT)) for m in native.COMPILED)


def _load_source(module: str) -> None:
    """Import ``module`` from its source in place of the compiled module."""
    spec = importlib.util.spec_from_file_location(module, native.source_path(module))
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded
    spec.loader.exec_module(loaded)
    parent, _, name = module.rpartition(".")
    setattr(sys.modules[parent], name, loaded)


@contextlib.contextmanager
def _sources() -> Iterator[ModuleType]:
    """The screen as its source, with the source of every compiled screening module it
    imports; the compiled modules are put back after."""
    screening = [m for m in native.COMPILED if m.startswith("controller.screening.")]
    saved = {m: sys.modules[m] for m in screening}
    try:
        for module in screening:
            _load_source(module)
        yield sys.modules["controller.screening.screen"]
    finally:
        for module, was in saved.items():
            sys.modules[module] = was
            parent, _, name = module.rpartition(".")
            setattr(sys.modules[parent], name, was)


@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.slow)
                                      for s in (1, 2))])  # (make quick: the first seed)
@pytest.mark.parametrize("model", [None, "cut only", "2 riffles", "discards cut only",
                                   "discards 1 riffle", "discards 2 riffles", "slug 20",
                                   "slug 40"])
def test_the_compiled_screen_decides_as_its_source(model: str | None, seed: int) -> None:
    # the same findings (test, value to the last bit, card, evidence, the card raised at),
    # fair or not, in four profiles and three seeds: the compiled screen is the source's
    assert model is None or model in MODELS
    assert native.is_compiled(compiled_screen), _NOT_BUILT
    with _sources() as source:
        assert not native.is_compiled(source)
        pure_class = source.ShuffleScreen
    flagged = 0
    for name in ("gr-banco-punto", "gr-blackjack", "live-blackjack", "gr-chemin-de-fer"):
        compiled = day_of_findings(name, model, seed)
        pure = day_of_findings(name, model, seed, screen_class=pure_class)
        assert compiled == pure, (name, model, seed)
        flagged += sum(f is not None for f in compiled)
    assert flagged or model in (None, "slug 20")


def _both_ways(script: str, data: Path) -> dict[bool, dict[str, object]]:
    """``script`` run on ``data`` in a child process compiled (False) and as source (True):
    each run's JSON output, checked to come from what it says."""
    runs = {}
    for pure in (False, True):
        env = {**os.environ, native.PURE_ENV: "1"} if pure else \
            {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
        out = subprocess.run([sys.executable, "-c", script, str(data)], cwd=ROOT,
                             env=env, capture_output=True, text=True, check=True)
        runs[pure] = json.loads(out.stdout)
    assert "source" not in str(runs[False].pop("native")), _NOT_BUILT
    assert "compiled" not in str(runs[True].pop("native"))
    return runs


_DECISIONS = """
import json, sys
from controller import native
from controller.engine import TableEngine
from controller.events import parse_event
from controller.profiles import load_profile
out = {"native": native.summary()}
for key, (name, evs) in json.load(open(sys.argv[1])).items():
    engine = TableEngine(load_profile(name))
    out[key] = [repr(o) for ev in evs for o in engine.handle(parse_event(ev))]
print(json.dumps(out))
"""


def test_the_compiled_referees_decide_as_their_source(tmp_path: Path) -> None:
    # every output (deviations with their evidence, notes, prompts) of a correct day and of
    # a day with planted slips — a card dropped from a round, a round's cards swapped —
    # in every profile, compiled and as source: the same, output for output
    from engine_streams import day, drop, events, move, round_cards

    from controller.profiles import profile_names

    streams = {}
    for name in profile_names():
        steps = day(name, 1, shoes=1)
        two = round_cards(steps, 2)
        streams[f"{name}:correct"] = (name, events(steps))
        streams[f"{name}:dropped"] = (name, events(drop(steps, two[1])))
        streams[f"{name}:swapped"] = (name, events(move(steps, two[-1], two[0])))
    path = tmp_path / "streams.json"
    path.write_text(json.dumps(streams))
    runs = _both_ways(_DECISIONS, path)
    assert runs[False] == runs[True]
    assert sum("Deviation(" in o for outs in runs[False].values() for o in outs) >= len(
        profile_names())  # (the slips were caught: there is something to compare)


def test_the_group_runs_compiled_only_as_it_was_built(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # any file of the group's closure changed (a module compiled, or one whose constants
    # it inlined), a record from another build, nothing compiled: the sources run, all
    record = _built_record()
    sources = record["sources"]
    assert isinstance(sources, dict)
    assert "controller/events.py" in sources  # (not compiled, but imported: its constants)
    assert all(str(native.source_path(m).relative_to(ROOT)) in sources
               for m in native.COMPILED)
    path = tmp_path / "native.json"
    monkeypatch.setattr(native, "BUILD_RECORD", path)
    monkeypatch.delenv(native.PURE_ENV, raising=False)  # (the suite may run the sources)

    def why(**change: object) -> str | None:
        path.write_text(json.dumps({**record, **change}))
        return native.why_source()

    assert why() is None
    assert why(sources={**sources, "controller/events.py": "0" * 64}) == (
        "controller/events.py changed after the build (make native)")
    assert why(sources={**sources, "controller/gone.py": "0" * 64}) == (
        "controller/gone.py, compiled from, is gone (make native)")
    assert why(modules=list(native.COMPILED[:-1])) == (
        "native.json is from another build (make native)")
    assert why(modules=[]) is not None and "not compiled" in (why(modules=[]) or "")
    path.write_text("not json")
    assert "not compiled" in (native.why_source() or "")
    path.write_text(json.dumps(record))
    monkeypatch.setenv(native.PURE_ENV, "0")
    assert native.why_source() is None
    monkeypatch.setenv(native.PURE_ENV, "1")
    assert native.why_source() == f"{native.PURE_ENV} is set"


_STALE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("controller.native", sys.argv[1])
native = importlib.util.module_from_spec(spec)
spec.loader.exec_module(native)
native.BUILD_RECORD = native.Path(sys.argv[2])
sys.modules["controller.native"] = native  # (before controller/__init__ asks it)
from controller import rounds
from controller.profiles import load_profile
from controller.rounds import referee_for
referee = referee_for(load_profile("gr-blackjack"), lambda *a, **k: None)
print(json.dumps({"compiled": [native.is_compiled(sys.modules[m]) for m in native.COMPILED
                               if __import__(m)],
                  "referee": type(referee).__name__,
                  "subclass": isinstance(referee, rounds.CardLedger)}))
"""


def test_a_group_out_of_date_runs_all_its_sources_together(tmp_path: Path) -> None:
    # one module of the group changed (here: its record says so): not that module alone
    # from source beside compiled ones — a compiled referee registered with a compiled
    # rounds while the engine reads the source's registry ran no game's rules (a review)
    record = _built_record()
    sources = dict(record["sources"])  # type: ignore[call-overload]
    sources["controller/rounds.py"] = "0" * 64
    path = tmp_path / "native.json"
    path.write_text(json.dumps({**record, "sources": sources}))
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    out = subprocess.run([sys.executable, "-c", _STALE, str(ROOT / "controller/native.py"),
                          str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout)
    assert got == {"compiled": [False] * len(native.COMPILED),
                   "referee": "BlackjackReferee", "subclass": True}, out
    assert out.stderr == ("shoewarden: running the sources, not the compiled modules: "
                          "controller/rounds.py changed after the build (make native)\n")


_BUILT_LATER = """
import importlib, importlib.util, sys
spec = importlib.util.spec_from_file_location("controller.native", sys.argv[1])
native = importlib.util.module_from_spec(spec)
spec.loader.exec_module(native)
built = native.built_file
native.built_file = lambda module: None  # nothing built yet when the process decides
sys.modules["controller.native"] = native
import controller.session
native.built_file = built  # a build lands (make native in another shell)
print([native.is_compiled(importlib.import_module(m)) for m in native.COMPILED])
"""


def test_a_build_that_lands_after_the_decision_is_not_used() -> None:
    # a process that decided on the sources before the build was there: the modules it
    # imports after the build lands run their sources too (only those whose compiled
    # module was there at the decision were kept from it — a review)
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    out = subprocess.run([sys.executable, "-c", _BUILT_LATER,
                          str(ROOT / "controller/native.py")], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == f"{[False] * len(native.COMPILED)}\n", out


def test_a_spawned_worker_does_not_say_again_why_the_sources_run(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # audit verify on both cores spawns workers: the stale build's line once, not once a
    # worker (a review)
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert pool.submit(native._spawned).result() is True
    assert native._spawned() is False
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    monkeypatch.setattr(native, "why_source", lambda: "x.py changed after the build")
    for spawned in (True, False):
        monkeypatch.setattr(native, "_decision", [])
        monkeypatch.setattr(native, "_spawned", lambda spawned=spawned: spawned)
        assert native.decision() == "x.py changed after the build"
        err = capsys.readouterr().err
        assert err == ("" if spawned else "shoewarden: running the sources, not the compiled "
                       "modules: x.py changed after the build\n"), err


def test_an_extension_module_no_build_lists_is_never_used(tmp_path: Path) -> None:
    # a compiled module from an older build (git keeps no .so: it survives a checkout)
    # beside a source the group no longer compiles
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for name in ("old.py", "old" + suffix, "lib" + suffix, "listed.py", "listed" + suffix):
        (tmp_path / name).write_text("")
    assert native.leftovers(tmp_path, "pkg") == ["pkg.listed", "pkg.old"]
    assert native.leftovers(tmp_path, "controller.games") == [
        "controller.games.listed", "controller.games.old"]
    (tmp_path / ("stud" + suffix)).write_text("")
    (tmp_path / "stud.py").write_text("")
    assert "controller.games.stud" not in native.leftovers(tmp_path, "controller.games")


def test_no_package_loads_an_extension_module_no_build_lists(tmp_path: Path) -> None:
    # end to end, in a copy of the tree: an extension module beside a source that a
    # package imports when it is imported (here a file that is no extension at all, so
    # that loading it fails). The audit package asked about leftovers only after its own
    # imports, so one beside its line checks (an experiment's build, when they were not
    # compiled) was loaded.
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "controller", tree / "controller",
                    ignore=shutil.ignore_patterns("__pycache__"))
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    left = ["controller.audit.verify", "controller.screening.faces", "controller.cards"]
    for module in left:
        assert module not in native.COMPILED
        path = tree.joinpath(*module.split("."))
        assert path.with_suffix(".py").exists()
        path.with_name(path.name + suffix).write_bytes(b"not an extension module")
    code = ("import controller.audit, controller.screening, controller.engine;"
            "from controller.audit.verify import verify_file; print('imported')")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tree, env={**env, "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "imported\n"
    for module in left:
        assert f"shoewarden: {module}: running its source" in out.stderr, out.stderr


def test_shoewarden_pure_runs_the_sources() -> None:
    # SHOEWARDEN_PURE=1: the sources, whatever is built (a profile of the Python, a check
    # that a table without a compiler works), the engine with them as ever
    code = ("import controller.screening.screen as s, controller.screening.packets as p;"
            "from controller import native;"
            "print(native.is_compiled(s), native.is_compiled(p), native.summary())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, native.PURE_ENV: "1"}, check=True)
    assert out.stdout.split()[:2] == ["False", "False"], out
    assert f"source: {native.PURE_ENV} is set" in out.stdout
    assert out.stderr == ""  # (asked for: nothing to warn about)


@pytest.mark.parametrize("first", ["controller.session", "controller.audit.replay",
                                   "controller.audit", "controller.engine", "controller.cli",
                                   "controller.screening.screen", "controller.rounds"])
def test_the_sources_import_in_any_order(first: str) -> None:
    # running the sources, a process's first import may be any module: the sources were
    # once loaded eagerly when their package was, and 'import controller.session' then
    # failed in a circle (the audit package loaded replay, which imports the session)
    code = (f"import {first}, sys; from controller import native;"
            "import importlib; mods = list(map(importlib.import_module, native.COMPILED));"
            "print(sorted(m.__name__ for m in mods if native.is_compiled(m)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, native.PURE_ENV: "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "[]\n", out


def test_the_loader_is_a_leaf() -> None:
    # every package that holds a compiled module imports it first (the audit chain core
    # among them, which may import only leaves): the standard library, nothing else
    import ast

    tree = ast.parse(native.source_path("controller.native").read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert all(n.split(".")[0] in sys.stdlib_module_names or n == "__future__"
               for n in names), names


@pytest.mark.slow  # (mypyc type-checks the project: ~15 s)
def test_a_build_that_does_not_compile_records_nothing_compiled(tmp_path: Path) -> None:
    # no C compiler (here: one that always fails), as on a machine without gcc: the build
    # goes through, says so, and records that nothing compiled — not the older .so files
    # beside the sources as built from these (a review: a failed rebuild did)
    tree = tmp_path / "tree"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in files:
        if name.startswith(("controller/", "drivers/", "simulators/", "floor/")) or \
                name in ("setup.py", "pyproject.toml", "README.md"):
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes((ROOT / name).read_bytes())
    stale = tree / "controller" / "games" / ("stud" + importlib.machinery.EXTENSION_SUFFIXES[0])
    stale.write_bytes(b"")  # (an older build's, beside the source)
    env = {**os.environ, "CC": "/bin/false"}
    env.pop(native.PURE_ENV, None)
    out = subprocess.run([sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"],
                         cwd=tree, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "NOT compiled" in out.stderr and "the sources run" in out.stderr
    assert json.loads((tree / "controller" / "native.json").read_text()) == {
        "modules": [], "sources": {}}
    code = "from controller import native; print(native.summary())"
    run = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env,
                         capture_output=True, text=True, check=True)
    assert run.stdout.count("source: not compiled") == len(native.COMPILED), run.stdout


_VERIFIED = """
import dataclasses, json, sys
from controller import native
from controller.audit import verify_file
out = {"native": native.summary()}
for path in json.load(open(sys.argv[1])):
    result = verify_file(path, parallel=False)
    out[path] = [repr(v) for v in dataclasses.asdict(result).values()]
print(json.dumps(out))
"""


def test_the_compiled_line_checks_decide_as_their_source(tmp_path: Path) -> None:
    # a day's log and its damaged copies — an edit (rehashed or not), a record deleted,
    # two swapped, a float, keys out of order, a torn last line, a line not UTF-8 —
    # verified compiled (controller.audit.linecheck) and as source: every field of the
    # result the same
    from floor_helpers import table_log

    log = table_log(tmp_path)  # (the engine's records of a Banco Punto day)
    lines = log.read_bytes().splitlines(keepends=True)
    assert len(lines) > 200
    damaged = {
        "intact": lines,
        "edited": [*lines[:120], lines[120].replace(b'"seq":', b'"seq": '), *lines[121:]],
        "card": [*lines[:150], re.sub(rb'"card":"(\w\w)"', b'"card":"2C"', lines[150], count=1),
                 *lines[151:]],
        "deleted": [*lines[:100], *lines[101:]],
        "swapped": [*lines[:80], lines[81], lines[80], *lines[82:]],
        "float": [*lines[:60], lines[60].replace(b'"round":', b'"x":1.5,"round":', 1),
                  *lines[61:]],
        "unsorted": [*lines[:70], lines[70].replace(b'{"', b'{"zz":0,"', 1), *lines[71:]],
        "torn": [*lines[:-1], lines[-1][:-9]],
        "not utf-8": [*lines[:90], lines[90].replace(b'"kind"', b'"k\xffind"', 1), *lines[91:]],
    }
    paths = []
    for name, content in damaged.items():
        path = tmp_path / f"{name.replace(' ', '-')}.jsonl"
        path.write_bytes(b"".join(content))
        paths.append(str(path))
    listing = tmp_path / "logs.json"
    listing.write_text(json.dumps(paths))
    runs = _both_ways(_VERIFIED, listing)
    assert runs[False] == runs[True]
    oks = {Path(p).stem: r[0] for p, r in runs[False].items()}  # (each field's repr)
    assert oks == {Path(p).stem: repr(Path(p).stem == "intact") for p in paths}, oks
    reasons = {Path(p).stem: r[4] for p, r in runs[False].items()}
    for name, said in (("card", "hash mismatch"), ("deleted", "missing"), ("float", "float"),
                       ("unsorted", "canonical"), ("torn", "torn"), ("not-utf-8", "UTF-8")):
        assert said in reasons[name], reasons

