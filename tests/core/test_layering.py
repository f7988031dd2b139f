"""The layers of design.md, lowest first: ``core`` < ``envs`` < ``sb3`` < ``runs``; imports only point down.

- ``her_wrap.core`` imports nothing but numpy: no deep-learning framework, no env library, no run tooling.
  Every module of ``her_wrap/core`` is imported in a fresh interpreter. The parent package ``her_wrap`` is
  registered as an empty namespace first, so that its ``__init__`` (which exports the SB3 model class too)
  does not hide or cause an import: the test is about what the core itself pulls in.
- For every pair of layers, no module of the lower one names a module of the higher one: read from the
  source (:func:`imported_modules`), so an import inside a function, an import for type checking and a
  module path handed to :func:`her_wrap.lazy_imports.lazy_getattr` count as much as a top-level import.
  The package root (``her_wrap/__init__.py``) stands above the layers and may name any of them;
  :mod:`her_wrap.lazy_imports` stands below them all and names none.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
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


# --------------------------------------------------------------------------- every pair of layers

#: design.md's layers, lowest first: a module may name its own layer and those below it, never one above.
LAYERS = ("core", "envs", "sb3", "runs")

_MODULE_PATH = re.compile(r"^her_wrap(\.[A-Za-z_]\w*)+$")


def _is_module(name: str) -> bool:
    path = PACKAGE_DIR.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _root_imports() -> tuple[list[str], dict[str, str]]:
    """The package root's eager imports, and the module each of its names comes from (lazy ones too)."""
    tree = ast.parse((PACKAGE_DIR / "__init__.py").read_text(encoding="utf-8"))
    eager = [node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module]
    homes = {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_getattr":
            homes.update(ast.literal_eval(node.args[1]))
    return eager, homes


ROOT_EAGER, ROOT_HOMES = _root_imports()


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """``(line, module)`` for each her_wrap module that ``source``, the text of ``module``, may import.

    Import statements count wherever they are, relative ones resolved; so does every string that is a
    whole her_wrap module path (a ``lazy_getattr`` home, an ``importlib.import_module`` argument). A name
    imported from the package root counts as the module the root takes it from, and ``import her_wrap``
    as the root's eager imports.

    :param source: Python source
    :param module: its dotted name (``her_wrap.sb3.her``; a package as ``her_wrap.sb3.__init__``)
    """
    package = module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names = ROOT_EAGER if alias.name == "her_wrap" else [alias.name]
                found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                if _is_module(f"{base}.{alias.name}"):
                    found.append((node.lineno, f"{base}.{alias.name}"))
                elif base == "her_wrap":
                    found.append((node.lineno, ROOT_HOMES.get(alias.name, base)))
                else:
                    found.append((node.lineno, base))
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_PATH.match(node.value)
        ):
            found.append((node.lineno, node.value))
    return sorted((line, name) for line, name in found if name.partition(".")[0] == "her_wrap")


def layer_of(module: str) -> str | None:
    """The layer of a her_wrap module, or ``None`` for the root, :mod:`her_wrap.lazy_imports` and data."""
    part = module.split(".")[1] if "." in module else None
    return part if part in LAYERS else None


def _modules_of(folder: Path) -> dict[str, Path]:
    return {
        ".".join(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts): path
        for path in sorted(folder.rglob("*.py"))
    }


def upward_imports(lower: str, higher: str) -> list[str]:
    """``file:line -> module`` for every module of layer ``lower`` that names one of layer ``higher``."""
    return [
        f"{path.relative_to(PACKAGE_DIR.parent)}:{line} -> {target}"
        for module, path in _modules_of(PACKAGE_DIR / lower).items()
        for line, target in imported_modules(path.read_text(encoding="utf-8"), module)
        if layer_of(target) == higher
    ]


@pytest.mark.parametrize(
    ("lower", "higher"),
    list(itertools.combinations(LAYERS, 2)),
    ids=[f"{lower}-names-no-{higher}" for lower, higher in itertools.combinations(LAYERS, 2)],
)
def test_no_module_of_a_lower_layer_names_a_higher_layer(lower: str, higher: str) -> None:
    assert upward_imports(lower, higher) == []


def test_lazy_imports_names_no_module_of_the_package() -> None:
    source = (PACKAGE_DIR / "lazy_imports.py").read_text(encoding="utf-8")
    assert imported_modules(source, "her_wrap.lazy_imports") == []


def _layers_named_by(layer: str) -> set[str | None]:
    return {
        layer_of(target)
        for module, path in _modules_of(PACKAGE_DIR / layer).items()
        for _, target in imported_modules(path.read_text(encoding="utf-8"), module)
    }


def test_the_downward_imports_of_the_layers_are_seen() -> None:
    """Guard for the pairs above: the layers' modules are found and their imports read."""
    assert {"core", "envs"} <= _layers_named_by("sb3")
    assert {"core", "envs", "sb3"} <= _layers_named_by("runs")


UPWARD_SOURCE = """
from __future__ import annotations

from typing import TYPE_CHECKING

from her_wrap.core.storage import Storage
from . import storage_writes
from ..envs import registry
from her_wrap import HER

if TYPE_CHECKING:
    from her_wrap.runs.config import RunConfig


def later():
    import her_wrap.runs.cli


__getattr__ = lazy_getattr(__name__, {"make": "her_wrap.sb3.learners"})
text = "see her_wrap.runs.config for more"
"""


def test_the_reader_sees_every_form_of_import() -> None:
    assert imported_modules(UPWARD_SOURCE, "her_wrap.core.example") == [
        (6, "her_wrap.core.storage"),
        (7, "her_wrap.core.storage_writes"),
        (8, "her_wrap.envs.registry"),
        (9, ROOT_HOMES["HER"]),
        (12, "her_wrap.runs.config"),
        (16, "her_wrap.runs.cli"),
        (19, "her_wrap.sb3.learners"),
    ]
