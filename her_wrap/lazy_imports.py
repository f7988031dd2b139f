"""Module attributes imported on first use, and names that moved to another module.

A package ``__init__`` that lists its names here imports the module behind each only when it is read
(importing torch and stable-baselines3 takes seconds: only users of those names pay for them). A module
whose names moved keeps them readable at the old path, with a ``DeprecationWarning`` naming the new one.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(module_name: str, homes: Mapping[str, str], *, moved: bool = False) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` (PEP 562) that reads each name of ``homes`` from its home module.

    :param module_name: the module that uses it (its ``__name__``), for the error and warning messages
    :param homes: attribute name -> the module that holds it
    :param moved: the names moved away from ``module_name``: reading one warns (``DeprecationWarning``),
        naming where to import it from
    :return: the ``__getattr__`` function; other names raise ``AttributeError``
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        if moved:
            warnings.warn(
                f"{module_name}.{name} moved to {home}.{name}: import it from {home} "
                f"({module_name} keeps it for one more release).",
                DeprecationWarning,
                stacklevel=2,
            )
        return getattr(importlib.import_module(home), name)

    return __getattr__
