"""``-params`` items: ``key:value`` changes to a config entry, applied after the default merge."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from her_wrap.runs.errors import UsageError
from her_wrap.runs.yaml_io import parse_yaml
from her_wrap.runs.zoo_translation import _ZOO_HER_RENAMES, HER_SETTINGS, parse_literal_strings


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """Parse one ``-params`` item ``key:value`` into a key path and a value.

    The key may be a dotted path into a section (``her.n_sampled_goal:2``, ``env_kwargs.n_bits:12``); a
    bare HER setting (``n_sampled_goal:2``) goes into ``her`` as in the zoo. The value is read as YAML
    (``1e-3`` a number, ``[64, 64]`` a list, ``true`` a boolean), and ``"dict(...)"`` as a literal.

    :raises UsageError: when the item has no ``:`` or an empty key
    """
    key, separator, raw = text.partition(":")
    key = key.strip()
    if not separator or not key:
        raise UsageError(f"-params expects key:value items, got {text!r}")
    value = parse_override_value(raw, key)
    path = tuple(part for part in key.split("."))
    if len(path) == 1 and (path[0] in HER_SETTINGS or path[0] in _ZOO_HER_RENAMES):
        path = ("her", _ZOO_HER_RENAMES.get(path[0], path[0]))
    if any(not part for part in path):
        raise UsageError(f"-params key {key!r} has an empty part")
    return path, value


def parse_override_value(text: str, key: str) -> Any:
    """The value of an override, read as YAML (``1e-3`` a number, ``[64, 64]`` a list, ``true`` a
    boolean), and ``"dict(...)"`` as a literal; ``key`` names it in errors."""
    return parse_literal_strings(parse_yaml(text, source=f"-params {key}"))


def set_in(entry: dict[str, Any], path: Sequence[str], value: Any) -> None:
    """Set ``entry[path[0]][path[1]]... = value`` in place, creating sections that are missing."""
    target = entry
    for part in path[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = {}
            target[part] = child
        target = child
    target[path[-1]] = value


def apply_overrides(entry: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """The entry with ``-params`` items applied (see :func:`parse_override`); a new object."""
    result = copy.deepcopy(dict(entry))
    for text in overrides:
        set_in(result, *parse_override(text))
    return result
