"""Module attributes read on first use (:func:`lazy_getattr`) and renamed public names kept for one release
(:func:`deprecated_names`), on throwaway modules registered only for the length of a test."""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Iterator

import pytest

from her_wrap.lazy_imports import deprecated_names, lazy_getattr


@pytest.fixture
def new_home() -> Iterator[types.ModuleType]:
    """A module that holds the new names, importable by its name while the test runs."""
    module = types.ModuleType("throwaway_new_home")
    module.NewName = object()  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


@pytest.fixture
def old_home(new_home: types.ModuleType) -> types.ModuleType:
    """The module the old name was read from, its ``__getattr__`` made by :func:`deprecated_names`."""
    module = types.ModuleType("throwaway_old_home")
    module.__getattr__ = deprecated_names(  # type: ignore[method-assign]
        module.__name__, {"OldName": (new_home.__name__, "NewName")}
    )
    return module


def test_a_renamed_name_warns_naming_the_old_and_new_names(old_home: types.ModuleType) -> None:
    message = (
        r"^throwaway_old_home\.OldName is deprecated: use throwaway_new_home\.NewName "
        r"\(removed in the next release\)$"
    )
    with pytest.warns(DeprecationWarning, match=message):
        _ = old_home.OldName


def test_a_renamed_name_gives_the_object_of_its_new_name(
    old_home: types.ModuleType, new_home: types.ModuleType
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert old_home.OldName is new_home.NewName  # type: ignore[attr-defined]


def test_the_warning_points_at_the_line_that_reads_the_old_name(old_home: types.ModuleType) -> None:
    with pytest.warns(DeprecationWarning) as caught:
        _ = old_home.OldName
    assert caught[0].filename == __file__


def test_a_name_that_was_not_renamed_is_an_attribute_error(old_home: types.ModuleType) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="'throwaway_old_home' has no attribute 'NewName'"):
            _ = old_home.NewName


def test_a_lazy_name_is_read_from_its_home_without_a_warning(new_home: types.ModuleType) -> None:
    package = types.ModuleType("throwaway_package")
    package.__getattr__ = lazy_getattr(package.__name__, {"NewName": new_home.__name__})  # type: ignore[method-assign]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert package.NewName is new_home.NewName  # type: ignore[attr-defined]
        with pytest.raises(AttributeError, match="'throwaway_package' has no attribute 'Other'"):
            _ = package.Other
