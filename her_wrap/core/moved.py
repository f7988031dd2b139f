"""Old import paths of names that moved to another module: they keep working, with a DeprecationWarning
that names the new home, for at least one release."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any


def warn_module_moved(old: str, new: str) -> None:
    """Warn, from the body of module ``old``, that its names are now imported from ``new``."""
    warnings.warn(f"{old} is deprecated: import its names from {new}.", DeprecationWarning, stacklevel=3)


def moved_names(old: str, new: str, names: Iterable[str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old`` that serves ``names`` from module ``new``, warning each time.

    :param old: the module the names used to live in (``__name__`` of the caller)
    :param new: the module that holds them now
    :param names: the names that moved
    """
    moved = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old}.{name} moved: import it from {new}.", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    return __getattr__
