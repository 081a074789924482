"""Build the compiled modules (controller/native.py): the shuffle screen's card loops, by
mypyc, where a C compiler and the Python headers are at hand.

Everything else about the package is in pyproject.toml. ``pip install -e .`` runs this;
so does ``make native`` (``python setup.py build_ext --inplace``) after a source changed.
A module that does not compile (no compiler) is left out with setuptools' warning, and
its source runs: the same decisions, more slowly. Each module compiled is recorded with
the SHA-256 of its source in controller/native.json, so that a compiled module is never
used once its source has changed (controller.native.prefer_source).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from controller.native import BUILD_RECORD, COMPILED, source_path  # noqa: E402


class BuildRecorded(build_ext):
    """build_ext, then the record of what was compiled from which source."""

    def run(self) -> None:
        super().run()
        if not self.extensions:  # (nothing asked for: a record would say "none compiled")
            return
        record = {}
        for module in COMPILED:
            built = Path(self.get_ext_fullpath(module))
            if self.inplace:
                built = HERE / Path(self.get_ext_filename(module))
            if built.exists():
                record[module] = hashlib.sha256(source_path(module).read_bytes()).hexdigest()
        target = BUILD_RECORD if self.inplace else \
            Path(self.build_lib) / BUILD_RECORD.relative_to(HERE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"compiled: {', '.join(record) or 'none'} (recorded in {target})")


def ext_modules() -> list:
    if os.environ.get("SHOEWARDEN_NO_COMPILE"):  # (the Makefile compiles by its own rule)
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:  # (no mypy where this runs: the sources run)
        print("mypyc is not installed: no module is compiled", file=sys.stderr)
        return []
    # one group, its shared library inside the package (controller/_compiled__mypyc.*.so):
    # a top-level one is not found where the package is installed by path (pip install
    # -e), nor by a script run from elsewhere
    exts = mypycify([str(source_path(m).relative_to(HERE)) for m in COMPILED],
                    opt_level="3", debug_level="0", group_name="controller._compiled")
    for ext in exts:
        ext.optional = True  # (no compiler: a warning, and the sources run)
    return exts


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildRecorded})
