"""Build the compiled modules (controller/native.py): the card loops, by mypyc, where a C
compiler and the Python headers are at hand.

Everything else about the package is in pyproject.toml. ``make native`` runs this
(``python setup.py build_ext --inplace``), and so does ``pip install .`` (in an isolated
build, mypyc cannot see the runtime dependencies' types and the sources are installed as
they are: ``pip install --no-build-isolation .`` in an environment that has them, mypy
among them, compiles).

Whatever goes wrong — no compiler, a module that does not compile, mypyc refusing the
code — the build says so and records that nothing is compiled, and the sources run: the
same decisions, more slowly. When every module of the group compiled, it records the
group's closure (its modules and every project module they import) with each file's
SHA-256 in controller/native.json, and the same paths in controller/native.deps for the
Makefile: the group runs compiled only while every one of them is as it was built
(controller.native.why_source).
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ["SHOEWARDEN_PURE"] = "1"  # (importing controller here: the build's, nothing to say)
from controller.native import BUILD_RECORD, COMPILED, LIBRARY, digest, source_path  # noqa: E402

PROJECT = ("controller", "drivers", "simulators", "floor")
DEPS = BUILD_RECORD.with_suffix(".deps")
MYPYC_FAILED = False  # (set by ext_modules: mypyc refused the code, nothing is compiled)


def module_file(name: str) -> Path | None:
    """The source file of a project module or package, if there is one."""
    base = HERE.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def closure(modules: tuple[str, ...]) -> list[Path]:
    """The source files of ``modules`` and of every project module they import, however
    deeply (by their import statements, those under ``if TYPE_CHECKING`` too)."""
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        path = module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found: list[str] = []
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            todo += [f for f in found if f.split(".")[0] in PROJECT]
    return sorted(set(seen.values()))


class BuildRecorded(build_ext):
    """build_ext, then the record of what was compiled from which sources: the whole
    group, or nothing (a module that failed leaves an older file, or none)."""

    failed: list[str]

    def run(self) -> None:
        self.failed = []
        super().run()
        if not self.extensions and not MYPYC_FAILED:  # (nothing asked for: no record)
            return
        complete = bool(self.extensions) and not self.failed
        record: dict[str, object] = {"modules": [], "sources": {}}
        paths: list[Path] = [HERE / "setup.py"]
        if complete:
            paths = closure(COMPILED)
            record = {"modules": list(COMPILED),
                      "sources": {str(p.relative_to(HERE)): digest(p) for p in paths}}
        target = BUILD_RECORD if self.inplace else \
            Path(self.build_lib) / BUILD_RECORD.relative_to(HERE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if self.inplace:
            DEPS.write_text(" ".join(str(p.relative_to(HERE)) for p in paths) + "\n",
                            encoding="utf-8")
        if complete:
            print(f"compiled: {', '.join(COMPILED)} (recorded in {target})")
        else:
            why = (f"{', '.join(self.failed)} did not compile" if self.failed
                   else "mypyc refused the code")
            print(f"NOT compiled ({why}): the sources run (recorded in {target})",
                  file=sys.stderr)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception:
            self.failed.append(ext.name)
            raise  # (an optional extension: setuptools warns and goes on)


def ext_modules() -> list:
    global MYPYC_FAILED
    if os.environ.get("SHOEWARDEN_NO_COMPILE"):  # (the Makefile compiles by its own rule)
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:  # (no mypy where this runs: the sources run)
        print("mypyc is not installed: no module is compiled", file=sys.stderr)
        MYPYC_FAILED = True
        return []
    # one group, its shared library inside the package (controller/_compiled__mypyc.*.so):
    # a top-level one is not found where the package is installed by path (pip install
    # -e), nor by a script run from elsewhere
    try:
        exts = mypycify([str(source_path(m).relative_to(HERE)) for m in COMPILED],
                        opt_level="3", debug_level="0", group_name=LIBRARY)
    except (Exception, SystemExit) as e:  # (mypy's errors are printed above it)
        print(f"mypyc could not compile the modules ({type(e).__name__}: {e}): "
              "no module is compiled", file=sys.stderr)
        MYPYC_FAILED = True
        return []
    for ext in exts:
        ext.optional = True  # (no compiler: a warning, and the sources run)
    return exts


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildRecorded})
