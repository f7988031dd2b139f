"""Module attributes imported on first use, and the one way a released public name is renamed.

A package ``__init__`` that lists its names in :func:`lazy_getattr` imports the module behind each only
when it is read (importing torch and stable-baselines3 takes seconds: only users of those names pay for
them). A released public name that is renamed stays readable under its old name for one release through
:func:`deprecated_names`, with a ``DeprecationWarning`` naming the new one.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(module_name: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` (PEP 562) that reads each name of ``homes`` from its home module.

    :param module_name: the module that uses it (its ``__name__``), for the error message
    :param homes: attribute name -> the module that holds it
    :return: the ``__getattr__`` function; other names raise ``AttributeError``
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__


def deprecated_names(module_name: str, renamed: Mapping[str, tuple[str, str]]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` (PEP 562) that keeps renamed public names readable for one release.

    Reading an old name warns ``DeprecationWarning``: ``"<module>.<old> is deprecated: use <home>.<new>
    (removed in the next release)"`` and returns the object under its new name. Use it as
    ``__getattr__ = deprecated_names(__name__, {"OldName": ("her_wrap.sb3.her", "NewName")})`` at the
    end of the module the old name lived in, and list the old name under *Deprecated* in the changelog.

    :param module_name: the module the old names were read from (its ``__name__``)
    :param renamed: old name -> (the module that holds the new name, the new name)
    :return: the ``__getattr__`` function; other names raise ``AttributeError``
    """

    def __getattr__(name: str) -> Any:
        if name not in renamed:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        home, new_name = renamed[name]
        warnings.warn(
            f"{module_name}.{name} is deprecated: use {home}.{new_name} (removed in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), new_name)

    return __getattr__
