"""A script of ``scripts/`` imported as a module, for tests of its functions."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@contextmanager
def loaded_script(name: str) -> Iterator[ModuleType]:
    """``scripts/NAME.py`` as a module named ``NAME``, registered in ``sys.modules`` while the block runs
    (dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)
