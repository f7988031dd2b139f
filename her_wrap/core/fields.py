"""Stored fields: their specs, and how fields of one dtype are packed side by side in one array.

Fields of one dtype and at most one dimension share one array of shape ``(n_rows, n_envs, width)``, so
that reading a batch is one copy per dtype rather than one per field; a field of more dimensions gets an
array of its own. Observation and step fields of one dtype share a group: a sampled transition's
observation and step values are one row of one array, read together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class FieldSpec:
    """Shape (per transition, without batch dimensions) and dtype of a stored field.

    :param shape: shape of one value, ``()`` for scalars (an int is read as a 1-D shape)
    :param dtype: anything ``np.dtype`` accepts; stored as an ``np.dtype``
    """

    shape: tuple[int, ...] = ()
    dtype: Any = np.float32

    def __post_init__(self) -> None:
        sizes = (self.shape,) if isinstance(self.shape, (int, np.integer)) else tuple(self.shape)
        object.__setattr__(self, "shape", tuple(int(size) for size in sizes))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))


@dataclass
class FieldGroup:
    """Fields stored side by side in the last axis of one array of shape ``(n_rows, n_envs, width)``.

    :param array: the packed array, or the one field's own array when ``packed`` is False (fields of
        two or more dimensions are stored unpacked, in a group of their own)
    :param members: field name -> (index or slice in the last axis, the field's shape)
    :param packed: whether ``array`` packs its members along its last axis
    :param observation_names: the members that are observation fields (read at the next row too)
    """

    array: np.ndarray
    members: dict[str, tuple[int | slice, tuple[int, ...]]]
    packed: bool = True
    observation_names: tuple[str, ...] = ()

    def take(
        self, slots: np.ndarray, *, prefix: str = "", names: tuple[str, ...] | None = None
    ) -> dict[str, np.ndarray]:
        """Copy the rows at flat ``slots`` (``ring_row * n_envs + column``) and split them into fields."""
        return self.split(self.rows(slots), prefix=prefix, names=names)

    def rows(self, slots: np.ndarray) -> np.ndarray:
        """Copy the rows at flat ``slots``, all members side by side."""
        return self.array.reshape(-1, *self.array.shape[2:]).take(slots, axis=0)

    def split(
        self, rows: np.ndarray, *, prefix: str = "", names: tuple[str, ...] | None = None
    ) -> dict[str, np.ndarray]:
        """Rows read by :meth:`rows` as one view per member field."""
        wanted = self.members if names is None else {name: self.members[name] for name in names}
        if not self.packed:
            return {prefix + name: rows for name in wanted}
        return {prefix + name: rows[:, index] for name, (index, _) in wanted.items()}


def packed_groups(
    rows: tuple[int, int], observation_specs: Mapping[str, FieldSpec], step_specs: Mapping[str, FieldSpec]
) -> list[FieldGroup]:
    """Allocate the groups of fields: one packed array per dtype for fields of at most one dimension
    (observation fields first, then step fields), one array of its own for each field of more dimensions."""
    groups: list[FieldGroup] = []
    specs = {**observation_specs, **step_specs}
    by_dtype: dict[np.dtype, list[str]] = {}
    for name, spec in specs.items():
        if len(spec.shape) <= 1:
            by_dtype.setdefault(spec.dtype, []).append(name)
        else:
            array = np.zeros(rows + spec.shape, dtype=spec.dtype)
            observed = (name,) if name in observation_specs else ()
            groups.append(FieldGroup(array, {name: (slice(None), spec.shape)}, False, observed))
    for dtype, names in by_dtype.items():
        widths = [int(np.prod(specs[name].shape, dtype=np.int64)) for name in names]
        array = np.zeros((*rows, sum(widths)), dtype=dtype)
        members: dict[str, tuple[int | slice, tuple[int, ...]]] = {}
        start = 0
        for name, width in zip(names, widths, strict=True):
            shape = specs[name].shape
            index: int | slice = start if shape == () else slice(start, start + width)
            members[name] = (index, shape)
            start += width
        groups.append(
            FieldGroup(array, members, True, tuple(name for name in names if name in observation_specs))
        )
    return groups


def field_views(groups: list[FieldGroup], specs: Mapping[str, FieldSpec]) -> dict[str, np.ndarray]:
    """The fields of ``specs``, each as a view of shape ``(n_rows, n_envs, *shape)`` into its group's array."""
    views: dict[str, np.ndarray] = {}
    for group in groups:
        for name, (index, _) in group.members.items():
            if name in specs:
                views[name] = group.array[:, :, index] if group.packed else group.array
    return views


def flat_writers(
    groups: list[FieldGroup], specs: Mapping[str, FieldSpec]
) -> list[tuple[str, np.ndarray, Any]]:
    """``(name, flat view, index)`` per field of ``specs``: ``flat[ring * n_envs + column, index] = value``
    writes one row."""
    writers: list[tuple[str, np.ndarray, Any]] = []
    for group in groups:
        flat = group.array.reshape(-1, *group.array.shape[2:])
        for name, (index, _) in group.members.items():
            if name in specs:
                writers.append((name, flat, index if group.packed else Ellipsis))
    return writers
