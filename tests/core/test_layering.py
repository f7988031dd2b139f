"""her_wrap.core imports nothing but numpy: no deep-learning framework, no env library, no run tooling.

Every module of ``her_wrap/core`` is imported in a fresh interpreter. The parent package ``her_wrap`` is
registered as an empty namespace first, so that its ``__init__`` (which exports the SB3 model class too)
does not hide or cause an import: the test is about what the core itself pulls in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import her_wrap

FORBIDDEN = ["torch", "stable_baselines3", "sb3_contrib", "gymnasium", "gym", "yaml", "optuna", "scipy"]
PACKAGE_DIR = Path(her_wrap.__file__).parent
CORE_MODULES = [
    "her_wrap.core",
    *sorted(
        f"her_wrap.core.{path.stem}"
        for path in (PACKAGE_DIR / "core").glob("*.py")
        if path.stem != "__init__"
    ),
]

_PROBE = """
import importlib, json, sys, types
package = types.ModuleType("her_wrap")
package.__path__ = [{package_dir!r}]
sys.modules["her_wrap"] = package
for name in {modules!r}:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


@pytest.fixture(scope="module")
def modules_loaded_by_core() -> set[str]:
    probe = _PROBE.format(package_dir=str(PACKAGE_DIR), modules=CORE_MODULES)
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(result.stdout))


def test_every_core_module_was_imported(modules_loaded_by_core: set[str]) -> None:
    """Guard for the test below: the probe really imported the core (at least its known modules)."""
    expected = {"her_wrap.core.storage", "her_wrap.core.replay", "her_wrap.core.goal_selection"}
    assert expected <= modules_loaded_by_core


def test_core_imports_no_framework(modules_loaded_by_core: set[str]) -> None:
    top_level = {name.partition(".")[0] for name in modules_loaded_by_core}
    assert sorted(top_level & set(FORBIDDEN)) == []
