"""Compiled modules: the card loops mypyc turns into C where a C compiler is at hand.

The shuffle screen judges every card the shoe reads, and its tests are loops over small
integers and bit sets: as Python bytecode they cost the engine 40–80 % of its time per
card, where issue 10 allows 10 %; the game referees judge every card of a round, a fifth
of the engine's time on baccarat, two fifths on blackjack (docs/architecture.md,
"Compiled modules"). mypyc compiles the same type-checked source to C: the same
operations on the same values in the same order — Python's integers, IEEE doubles, libm's
``log`` — so compiled code decides exactly as the source does (tests/test_native.py holds
the two side by side over simulated shoes and planted slips). Nothing else changes: the
source is still the module's definition, and a table without a compiler runs it as it
is, more slowly.

**One unit.** The modules of :data:`COMPILED` are compiled as one group: a compiled module
calls the others' compiled functions directly and carries the ``Final`` constants of the
modules it imports inlined. So the group runs compiled only as a whole, and only while
every source it was built from — its modules and every project module they import, the
*closure* ``setup.py`` records with each file's SHA-256 in ``controller/native.json`` — is
as it was built, and its shared library is there. Otherwise every module of the group
runs its source (one message on stderr says why): a stale build never runs code that is
no longer in the files, and a source module never meets a stale compiled one (their
classes would be two). An extension module left beside a source that the record does not
list (from an older build, across a checkout) is never used either.
``SHOEWARDEN_PURE=1`` runs the sources whatever is built.

Each package that holds a compiled module calls :func:`prefer_source` before importing
it; the decision is made once, at the first call (``controller/__init__``). This module
imports the standard library only.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

COMPILED = ("controller.screening.reference", "controller.screening.packets",
            "controller.screening.screen", "controller.rounds", "controller.games.baccarat",
            "controller.games.blackjack", "controller.games.stud",
            "controller.audit.replay", "controller.audit.linecheck")
"""The modules ``setup.py`` compiles (one group), each after the compiled modules it
imports."""

LIBRARY = "controller._compiled"
"""The group's name: its shared library is the extension module ``LIBRARY + "__mypyc"``."""

ROOT = Path(__file__).resolve().parent.parent
BUILD_RECORD = ROOT / "controller" / "native.json"
"""What the last build compiled (written by setup.py): ``{"modules": [...], "sources":
{path relative to ROOT: sha256}}``; ``"modules"`` is empty when nothing compiled."""

PURE_ENV = "SHOEWARDEN_PURE"

#: per module of :data:`COMPILED` (and any extension module not listed) met so far:
#: "compiled", or "source: " and why
STATUS: dict[str, str] = {}

_decision: list[str | None] = []  # [why the sources run, or None]: made once


def source_path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def built_file(module: str) -> Path | None:
    """The compiled module beside the source, if one was built for this Python."""
    base = ROOT.joinpath(*module.split("."))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = base.with_name(base.name + suffix)
        if candidate.exists():
            return candidate
    return None


def pure() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def read_record() -> dict[str, object]:
    try:
        data = json.loads(BUILD_RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def why_source() -> str | None:
    """Why the group must run its sources (None: it runs compiled). See the module's
    docstring."""
    if pure():
        return f"{PURE_ENV} is set"
    record = read_record()
    modules, sources = record.get("modules"), record.get("sources")
    if not modules:
        return "not compiled (make native: needs gcc and the Python headers)"
    if modules != list(COMPILED) or not isinstance(sources, dict):
        return f"{BUILD_RECORD.name} is from another build (make native)"
    if built_file(LIBRARY + "__mypyc") is None:
        return "the compiled group's shared library is missing (make native)"
    for module in COMPILED:
        if built_file(module) is None:
            return f"{module} has no compiled module (make native)"
    for name, built in sorted(sources.items()):
        try:
            now = digest(ROOT / name)
        except OSError:
            return f"{name}, compiled from, is gone (make native)"
        if now != built:
            return f"{name} changed after the build (make native)"
    return None


def decision() -> str | None:
    """:func:`why_source`, worked out once a process."""
    if not _decision:
        _decision.append(why_source())
        why = _decision[0]
        if (why is not None and not pure() and any(map(built_file, COMPILED))
                and not _spawned()):
            print(f"shoewarden: running the sources, not the compiled modules: {why}",
                  file=sys.stderr)
    return _decision[0]


def _spawned() -> bool:
    """Is this process a worker that ``multiprocessing`` started (``audit verify`` on both
    cores)? Its parent said why the sources run; the worker need not say it again. (The
    module is looked up, not imported: a spawned worker has imported it already.)"""
    process = sys.modules.get("multiprocessing.process")
    return process is not None and process.parent_process() is not None


def prefer_source(package: str) -> None:
    """Before ``package`` imports its compiled modules: when the group must not run
    compiled (:func:`decision`), make each of its modules import from its source; and so
    any extension module in the package's folder that the group does not list
    (:func:`leftovers`).

    Nothing is imported here: :data:`SOURCES` (a finder first on ``sys.meta_path``)
    hands the import system the source when the module is first imported, wherever that
    import comes from. (Loading the sources here, eagerly, made ``import
    controller.session`` fail in a circle whenever the sources ran: the audit package
    loaded ``replay``, which imports the session still being loaded.)"""
    why = decision()
    for module in COMPILED:
        if module.rpartition(".")[0] != package or module in sys.modules:
            continue
        STATUS[module] = "compiled" if why is None else f"source: {why}"
        if why is not None:  # (even with no build yet: one may land while this runs)
            SOURCES.serve(module)
    folder = ROOT.joinpath(*package.split("."))
    for module in leftovers(folder, package):
        if module not in sys.modules:
            STATUS[module] = "source: an extension module no build lists"
            print(f"shoewarden: {module}: running its source, not the extension module "
                  "beside it (left by an older build: make clean, make native)",
                  file=sys.stderr)
            SOURCES.serve(module)


class SourceFinder(importlib.abc.MetaPathFinder):
    """The import system's finder of the modules that must run their source though an
    extension module lies beside it (the path-based finder would take the extension)."""

    def __init__(self) -> None:
        self.modules: set[str] = set()

    def serve(self, module: str) -> None:
        self.modules.add(module)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.modules:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


SOURCES = SourceFinder()


def leftovers(folder: Path, package: str) -> list[str]:
    """The modules of ``folder`` (package ``package``) with both a source and an extension
    module, that :data:`COMPILED` does not list."""
    out = []
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for ext in folder.glob("*" + suffix):
            name = ext.name[:-len(suffix)]
            module = f"{package}.{name}"
            if module not in COMPILED and (folder / f"{name}.py").exists():
                out.append(module)
    return sorted(set(out))


def is_compiled(module: ModuleType) -> bool:
    """Does ``module`` run as compiled code (its file is an extension module)?"""
    return str(getattr(module, "__file__", "")).endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES))


def summary() -> str:
    """One line for a benchmark's or a report's header: which modules run compiled."""
    for module in COMPILED:
        __import__(module)
    return "; ".join(f"{m.rsplit('.', 1)[1]}: {STATUS.get(m, '?')}" for m in COMPILED)
