"""Episode storage: one ring of rows per env column, each observation stored once.

Layout of one column (worked example, episode A of 3 steps then episode B in progress)::

    absolute row   0     1     2     3     4     5     6
    observation    A.o0  A.o1  A.o2  A.o3  B.o0  B.o1  B.o2   (A.o3 is A's final next observation)
    step fields    A.s0  A.s1  A.s2  -     B.s0  B.s1  -      (action, reward, terminated, ...)
    step_index     0     1     2     -1    0     1     -1
    episode_length 3     3     3     3     0     0     0      (0 while the episode is in progress)

Transition ``t`` of an episode starting at row ``s`` reads its observation from row ``s + t`` and its
next observation from row ``s + t + 1``. An episode of ``T`` steps takes ``T + 1`` rows: the price of
the final observation, paid instead of storing every next observation twice.

Absolute rows grow forever; row ``a`` of column ``e`` lives at ring slot ``a % n_rows``. Rows older
than ``written[e] - n_rows`` are gone. When the ring overwrites the first row of an episode, the whole
episode stops being sampleable (a goal never comes from an overwritten row), and the rows it still
occupies are reported so a prioritizer can zero them.

Fields: their specs (:class:`FieldSpec`), and how fields of one dtype are packed side by side in one
array (:class:`FieldGroup`). Fields of one dtype and at most one dimension share one array of shape ``(n_rows, n_envs, width)``, so
that reading a batch is one copy per dtype rather than one per field; a field of more dimensions gets an
array of its own. Observation and step fields of one dtype share a group: a sampled transition's
observation and step values are one row of one array, read together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from her_wrap.core.storage_writes import AddReport, EpisodeWrites

__all__ = ["AddReport", "EpisodeStorage", "FieldGroup", "FieldSpec"]


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


class EpisodeStorage(EpisodeWrites):
    """Ring buffer of episodes for ``n_envs`` env columns whose episodes interleave.

    :param capacity: total number of rows over all columns; each column gets ``capacity // n_envs``.
        A row holds one step, plus one row per episode for its final observation.
    :param n_envs: number of env columns (parallel environments)
    :param observation_fields: fields of an observation (stored once per row; a sample gets both the
        value and its ``next_`` counterpart)
    :param step_fields: fields of a step (action, reward, terminated, truncated, ...)
    :param store_infos: keep the env's info dict of every step (by reference, no copy)
    """

    def __init__(
        self,
        capacity: int,
        n_envs: int = 1,
        *,
        observation_fields: Mapping[str, FieldSpec],
        step_fields: Mapping[str, FieldSpec],
        store_infos: bool = False,
    ) -> None:
        if not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
            raise ValueError(f"n_envs must be a positive integer, got {n_envs!r}.")
        if not isinstance(capacity, (int, np.integer)) or capacity // n_envs < 2:
            raise ValueError(
                f"capacity={capacity!r} leaves fewer than 2 rows per env column (n_envs={n_envs}); "
                "pass a capacity of at least 2 * n_envs (and more than the longest episode per column)."
            )
        overlap = set(observation_fields) & set(step_fields)
        if overlap:
            raise ValueError(f"Field names used both as observation and step fields: {sorted(overlap)}.")
        self.n_envs = int(n_envs)
        self.n_rows = int(capacity) // self.n_envs
        self.observation_specs = dict(observation_fields)
        self.step_specs = dict(step_fields)
        rows = (self.n_rows, self.n_envs)
        # Fields of one dtype and at most one dimension share one array, so that reading a batch is one
        # copy per dtype rather than one per field; `observations` and `steps` hold views into them.
        # Observation and step fields of one dtype share a group: a sampled transition's observation and
        # step values are one row of one array, read together.
        self.groups = packed_groups(rows, self.observation_specs, self.step_specs)
        self.infos: np.ndarray | None = np.empty(rows, dtype=object) if store_infos else None
        # Step of the transition stored in a row; -1 when the row holds only an observation.
        self.step_index = np.full(rows, -1, dtype=np.int32)
        # Transitions of the row's episode once it has ended; 0 while it is in progress.
        self.episode_length = np.zeros(rows, dtype=np.int32)
        self.written = np.zeros(self.n_envs, dtype=np.int64)
        self._make_views()
        # Absolute first row of the episode in progress in each column, -1 when none is open.
        self.open_start = np.full(self.n_envs, -1, dtype=np.int64)
        self.n_transitions = 0  # complete transitions of episodes whose first row is still stored
        self.n_finished_transitions = 0  # the same, counting only episodes that have ended

    def _make_views(self) -> None:
        """Per-field views into the packed arrays, and the flat writers :meth:`add` uses.

        Views are rebuilt here rather than pickled: a pickled view comes back as a copy of its own, and
        writes through it would no longer reach the array that sampling reads.
        """
        self.observations = field_views(self.groups, self.observation_specs)
        self.steps = field_views(self.groups, self.step_specs)
        self._observation_writers = flat_writers(self.groups, self.observation_specs)
        self._step_writers = flat_writers(self.groups, self.step_specs)
        self._readers = {
            name: (flat, index) for name, flat, index in (*self._observation_writers, *self._step_writers)
        }
        self._expected_shapes: dict[tuple[int, Any], list[tuple[str, tuple[int, ...]]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in (
            "observations",
            "steps",
            "_observation_writers",
            "_step_writers",
            "_readers",
            "_expected_shapes",
        ):
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._make_views()

    @property
    def stores_infos(self) -> bool:
        """Whether info dicts are kept."""
        return self.infos is not None

    def store_infos(self, keep: bool) -> None:
        """Start or stop keeping info dicts: stopping frees them; rows stored before a start hold None.

        :param keep: whether :meth:`add` keeps the info dict of each step from now on
        """
        if keep and self.infos is None:
            self.infos = np.empty((self.n_rows, self.n_envs), dtype=object)
        elif not keep:
            self.infos = None

    # ------------------------------------------------------------------ geometry
    def _written(self, columns: np.ndarray | int) -> np.ndarray | int:
        """Rows written so far in each given column (with one column, one number for all)."""
        return int(self.written[0]) if self.n_envs == 1 else self.written[columns]

    def oldest(self, columns: np.ndarray | int) -> np.ndarray:
        """Oldest absolute row still stored in each column."""
        return np.maximum(self._written(columns) - self.n_rows, 0)

    def absolute_rows(self, ring_rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """Absolute row of each stored ring row (the newest write that landed in that slot)."""
        last = self._written(columns) - 1
        return last - (last - ring_rows) % self.n_rows

    def filled_rows(self) -> np.ndarray:
        """Rows holding data in each column."""
        return np.minimum(self.written, self.n_rows)

    def episode_bounds(self, ring_rows: np.ndarray, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First and last absolute transition rows of the episode of each given transition.

        For an episode in progress the last transition is the newest one stored so far.
        """
        slots = ring_rows * self.n_envs + columns
        absolute = self.absolute_rows(ring_rows, columns)
        start = absolute - self.step_index.reshape(-1).take(slots)
        length = self.episode_length.reshape(-1).take(slots).astype(np.int64)
        in_progress = length == 0
        # In an open episode the newest row holds the pending observation; its transition is the one before.
        last = np.where(in_progress, self.written[columns] - 2, start + length - 1)
        return start, last

    def steps_to_episode_end(
        self, ring_rows: np.ndarray, columns: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Step ``t`` of each given transition in its episode, and ``T_end - t + 1``: how many transitions
        from ``t`` to the episode's last one, inclusive (for an episode in progress, the newest one stored).

        Cheaper than :meth:`episode_bounds` for finished episodes (two reads, no absolute rows), which is
        what every relabeled sample needs.
        """
        slots = ring_rows if self.n_envs == 1 else ring_rows * self.n_envs + columns
        step = self.step_index.reshape(-1).take(slots).astype(np.int64)
        length = self.episode_length.reshape(-1).take(slots)
        remaining = length - step
        in_progress = length == 0
        if in_progress.any():
            # Open episode: the newest row holds the pending observation, the transition before it is last.
            open_rows, open_columns = ring_rows[in_progress], columns[in_progress]
            newest = self._written(open_columns) - 1
            remaining[in_progress] = newest - self.absolute_rows(open_rows, open_columns)
        return step, remaining

    def is_transition(
        self, ring_rows: np.ndarray, columns: np.ndarray, *, finished_only: bool = False
    ) -> np.ndarray:
        """Whether each slot holds a sampleable transition (complete, episode start not overwritten)."""
        # Reading through flat slots: np.take on a 1-D view is about twice as fast as indexing
        # (ring_rows, columns) on the 2-D array, and these reads sit on every sample's hot path.
        slots = ring_rows if self.n_envs == 1 else ring_rows * self.n_envs + columns
        step = self.step_index.reshape(-1).take(slots)
        if self.n_envs == 1 and int(self.written[0]) <= self.n_rows:
            # Nothing overwritten yet: every episode start is still stored, so a transition row is one.
            valid = step >= 0
        else:
            valid = (step >= 0) & (self.absolute_rows(ring_rows, columns) - step >= self.oldest(columns))
        if finished_only:
            valid &= self.episode_length.reshape(-1).take(slots) > 0
        return valid

    # ------------------------------------------------------------------ reading
    def gather(
        self, ring_rows: np.ndarray, columns: np.ndarray, *, next_prefix: str = "next_"
    ) -> dict[str, np.ndarray]:
        """Copy the transitions at the given slots: observation fields, their ``next_`` values, step fields
        and (when stored) ``infos``. The arrays are new: changing them leaves the storage as it was."""
        # np.take along axis 0 of the (n_rows * n_envs, ...) view copies whole rows at once: two to three
        # times faster than fancy indexing with (ring_rows, columns) on rows scattered over a large ring.
        one_column = self.n_envs == 1
        slots = ring_rows if one_column else ring_rows * self.n_envs + columns
        next_slots = (ring_rows + 1) % self.n_rows
        if not one_column:
            next_slots = next_slots * self.n_envs + columns
        # Observations and next observations in one read per group: both sets of rows, split afterwards.
        both = np.concatenate((slots, next_slots))
        batch: dict[str, np.ndarray] = {}
        for group in self.groups:
            if not group.observation_names:
                batch.update(group.take(slots))
                continue
            rows = group.rows(both)
            current, following = rows[: slots.size], rows[slots.size :]
            batch.update(group.split(current))
            batch.update(group.split(following, prefix=next_prefix, names=group.observation_names))
        if self.infos is not None:
            batch["infos"] = self.infos.reshape(-1).take(slots)
        return batch

    def read_field(self, name: str, ring_rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """Copy one field (an observation field, or a step field) at the given slots."""
        flat, index = self._readers[name]
        # take then slice: several times faster than indexing flat[slots, index] in one go
        return flat.take(ring_rows if self.n_envs == 1 else ring_rows * self.n_envs + columns, axis=0)[
            :, index
        ]

    def clear(self) -> None:
        """Forget every stored row (the arrays keep their memory)."""
        self.step_index.fill(-1)
        self.episode_length.fill(0)
        self.written.fill(0)
        self.open_start.fill(-1)
        self.n_transitions = 0
        self.n_finished_transitions = 0
        if self.infos is not None:
            self.infos.fill(None)

    @property
    def nbytes(self) -> int:
        """Bytes held by the storage arrays (info dicts themselves not counted)."""
        arrays = [group.array for group in self.groups]
        arrays += [self.step_index, self.episode_length]
        if self.infos is not None:
            arrays.append(self.infos)
        return int(sum(array.nbytes for array in arrays))
