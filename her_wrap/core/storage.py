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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
class AddReport:
    """What one call to :meth:`EpisodeStorage.add` changed, for samplers that keep side tables.

    :param new_transitions: flat slots (``ring_row * n_envs + column``) whose transition became complete
    :param cleared: flat slots that no longer hold a sampleable transition (overwritten or invalidated)
    :param finished: ``(column, start_abs_row, length)`` of each episode closed by this call
    """

    new_transitions: list[int] = field(default_factory=list)
    cleared: list[int] = field(default_factory=list)
    finished: list[tuple[int, int, int]] = field(default_factory=list)


class EpisodeStorage:
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
        self.groups = _packed_groups(rows, self.observation_specs, self.step_specs)
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
        self.observations = _field_views(self.groups, self.observation_specs)
        self.steps = _field_views(self.groups, self.step_specs)
        self._observation_writers = _flat_writers(self.groups, self.observation_specs)
        self._step_writers = _flat_writers(self.groups, self.step_specs)
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

    # ------------------------------------------------------------------ writing
    def _prepare_row(self, column: int, absolute: int, report: AddReport) -> int:
        """Free ring slot of ``absolute`` for a new row; invalidate the episode whose start it held."""
        ring = absolute % self.n_rows
        slot = ring * self.n_envs + column
        step_index = self.step_index.reshape(-1)
        # Rows are overwritten in absolute order, so a row whose episode started earlier lost its
        # episode when that first row went: only overwriting a first row invalidates anything.
        if absolute >= self.n_rows and step_index[slot] == 0:
            old_length = int(self.episode_length.reshape(-1)[slot])
            self.n_transitions -= old_length
            self.n_finished_transitions -= old_length
            rest = np.arange(absolute, absolute + old_length) % self.n_rows
            report.cleared.extend((rest * self.n_envs + column).tolist())
        step_index[slot] = -1
        self.episode_length.reshape(-1)[slot] = 0
        return ring

    def _check_room(self, column: int, extra_rows: int) -> None:
        start = self.open_start[column]
        if start >= 0 and self.written[column] + extra_rows - start > self.n_rows:
            raise ValueError(
                f"The episode in progress in env column {column} needs more than {self.n_rows} rows, the "
                "capacity of one column: raise the buffer capacity (or buffer_size) above "
                f"n_envs * (longest episode + 1) = {self.n_envs} * {self.written[column] + extra_rows - start}."
            )

    def add(
        self,
        observation: Mapping[str, np.ndarray],
        next_observation: Mapping[str, np.ndarray],
        step: Mapping[str, np.ndarray],
        done: np.ndarray,
        infos: list | tuple | np.ndarray | None = None,
    ) -> AddReport:
        """Store one step of every env column.

        :param observation: observation fields, each with a leading dimension ``n_envs``. Read only for
            columns that start an episode: inside an episode the previous ``next_observation`` is it.
        :param next_observation: observation fields after the step (for an episode's last step, the
            final observation, not the reset one)
        :param step: step fields, leading dimension ``n_envs``
        :param done: whether each column's episode ended with this step (terminated or truncated)
        :param infos: one info dict per column, stored by reference when ``store_infos``
        :return: what changed, for side tables (priorities, frozen goals)
        """
        n_envs, n_rows = self.n_envs, self.n_rows
        if type(done) is not np.ndarray or done.shape != (n_envs,) or done.dtype != np.bool_:
            done = np.asarray(done, dtype=bool).reshape(n_envs)
        written, open_start = self.written, self.open_start
        # Every check runs before the first write: bad input leaves the buffer as it was.
        for column in range(n_envs):
            start = open_start[column]
            if start >= 0 and written[column] + 1 - start > n_rows:
                self._check_room(column, 1)
        observation = self._check_fields(observation, self.observation_specs, "observation")
        next_observation = self._check_fields(next_observation, self.observation_specs, "next_observation")
        step = self._check_fields(step, self.step_specs, "step")
        self._check_infos(infos, n_envs, "one info dict per env column")
        report = AddReport()
        step_index = self.step_index.reshape(-1)
        stored_infos = None if self.infos is None else self.infos.reshape(-1)
        # One write per field and column into flat (n_rows * n_envs, width) views: slot = ring * n_envs + column.
        for column in range(n_envs):
            start = int(open_start[column])
            if start < 0:
                start = int(written[column])
                slot = self._prepare_row(column, start, report) * n_envs + column
                for name, flat, index in self._observation_writers:
                    flat[slot, index] = observation[name][column]
                open_start[column] = start
                current = start
            else:
                current = int(written[column]) - 1
            slot = current % n_rows * n_envs + column
            for name, flat, index in self._step_writers:
                flat[slot, index] = step[name][column]
            if stored_infos is not None:
                stored_infos[slot] = None if infos is None else infos[column]
            step_index[slot] = current - start
            report.new_transitions.append(slot)
            next_slot = self._prepare_row(column, current + 1, report) * n_envs + column
            for name, flat, index in self._observation_writers:
                flat[next_slot, index] = next_observation[name][column]
            written[column] = current + 2
            if done[column]:
                self._close(column, report)
        self.n_transitions += n_envs
        return report

    def add_steps(
        self,
        observations: Mapping[str, np.ndarray],
        next_observations: Mapping[str, np.ndarray],
        steps: Mapping[str, np.ndarray],
        dones: np.ndarray,
        infos: Any = None,
    ) -> AddReport:
        """Store ``S`` consecutive steps of every env column at once: what ``S`` calls of :meth:`add` store.

        Row bookkeeping is vectorized over the steps, so a chunk costs far less per step than single adds.

        :param observations: observation fields of shape ``(S, n_envs, ...)``; read only for steps that start
            an episode
        :param next_observations: the same after each step (an episode's final observation at its last step)
        :param steps: step fields of shape ``(S, n_envs, ...)``
        :param dones: shape ``(S, n_envs)``: whether each column's episode ended with that step
        :param infos: ``S`` sequences of one info dict per column, or None
        :return: what changed, for side tables (priorities, frozen goals)
        """
        dones = np.asarray(dones, dtype=bool)
        if dones.ndim != 2 or dones.shape[1] != self.n_envs:
            raise ValueError(f"dones must have shape (S, n_envs={self.n_envs}), got {dones.shape}.")
        n_steps = dones.shape[0]
        observations = self._check_fields(
            observations, self.observation_specs, "observations", (n_steps, self.n_envs)
        )
        next_observations = self._check_fields(
            next_observations, self.observation_specs, "next_observations", (n_steps, self.n_envs)
        )
        steps = self._check_fields(steps, self.step_specs, "steps", (n_steps, self.n_envs))
        if infos is not None and len(infos) != n_steps:
            raise ValueError(f"infos has {len(infos)} entries; pass one per step ({n_steps}), or None.")
        for column in range(self.n_envs):  # the room check: before the first write, as add does
            self._plan_rows(column, dones[:, column])
        report = AddReport()
        first = 0
        while first < n_steps:
            chunk = slice(first, first + self._steps_per_part())
            first = chunk.stop
            for column in range(self.n_envs):
                rows, episode_starts = self._plan_rows(column, dones[chunk, column])
                self._write_steps(
                    column,
                    rows,
                    episode_starts,
                    {name: values[chunk] for name, values in observations.items()},
                    {name: values[chunk] for name, values in next_observations.items()},
                    {name: values[chunk] for name, values in steps.items()},
                    dones[chunk],
                    None if infos is None else infos[chunk],
                    report,
                )
        self.n_transitions += n_steps * self.n_envs
        return report

    def _steps_per_part(self) -> int:
        """Steps :meth:`add_steps` writes in one vectorized part.

        A step takes at most 2 rows. A part must not write a ring slot twice, nor the first row of an
        episode open when it begins: that episode may end within the part, and single adds would close it
        (setting its length) before overwriting its first row (invalidating it), an order a part keeps only
        by staying clear of it.
        """
        limit = self.n_rows
        for column in range(self.n_envs):
            start = int(self.open_start[column])
            if start >= 0:
                limit = min(limit, start + self.n_rows - int(self.written[column]))
        return max(1, limit // 2)

    def _plan_rows(self, column: int, dones: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Absolute row of each step's observation in ``column``, and the first row of its episode.

        Worked example: an episode open since row 7 whose pending observation sits in row 9 (written = 10),
        then steps s0 s1 s2 where s1 ends the episode: s0 reads row 9, s1 row 10, s2 starts a new episode at
        row 12 (row 11 holds s1's final observation). Rows: [9, 10, 12]; episode starts: [7, 7, 12].
        """
        n_steps = dones.size
        open_start = int(self.open_start[column])
        starts = np.empty(n_steps, dtype=bool)
        starts[0] = open_start < 0
        starts[1:] = dones[:-1]
        rows = int(self.written[column]) - 1 + np.arange(n_steps) + np.cumsum(starts)
        episode_starts = np.maximum.accumulate(np.where(starts, rows, open_start))
        needed = int((rows + 2 - episode_starts).max())
        if needed > self.n_rows:
            raise ValueError(
                f"An episode in env column {column} needs more than {self.n_rows} rows, the capacity of one "
                "column: raise the buffer capacity (or buffer_size) above "
                f"n_envs * (longest episode + 1) = {self.n_envs} * {needed}."
            )
        return rows, episode_starts

    def _write_steps(
        self,
        column: int,
        rows: np.ndarray,
        episode_starts: np.ndarray,
        observations: Mapping[str, np.ndarray],
        next_observations: Mapping[str, np.ndarray],
        steps: Mapping[str, np.ndarray],
        dones: np.ndarray,
        infos: Any,
        report: AddReport,
    ) -> None:
        n_envs, n_rows = self.n_envs, self.n_rows
        first_new, last = int(self.written[column]), int(rows[-1]) + 1
        self._prepare_rows(column, first_new, last, report)
        slots = rows % n_rows * n_envs + column
        next_slots = (rows + 1) % n_rows * n_envs + column
        starting = rows == episode_starts
        if starting.any():
            start_slots = slots[starting]
            for name, flat, index in self._observation_writers:
                flat[start_slots, index] = observations[name][starting, column]
        for name, flat, index in self._observation_writers:
            flat[next_slots, index] = next_observations[name][:, column]
        for name, flat, index in self._step_writers:
            flat[slots, index] = steps[name][:, column]
        if self.infos is not None:
            stored = self.infos.reshape(-1)
            for slot, step_infos in zip(
                slots.tolist(), infos if infos is not None else [None] * rows.size, strict=True
            ):
                stored[slot] = None if step_infos is None else step_infos[column]
        self.step_index.reshape(-1)[slots] = rows - episode_starts
        report.new_transitions.extend(slots.tolist())
        self.written[column] = last + 1
        ended = np.flatnonzero(dones[:, column])
        for step in ended.tolist():
            start, length = int(episode_starts[step]), int(rows[step]) + 1 - int(episode_starts[step])
            self.episode_length.reshape(-1)[
                np.arange(start, start + length + 1) % n_rows * n_envs + column
            ] = length
            self.n_finished_transitions += length
            report.finished.append((column, start, length))
        self.open_start[column] = -1 if dones[-1, column] else int(episode_starts[-1])

    def _prepare_rows(self, column: int, first: int, last: int, report: AddReport) -> None:
        """Free the ring slots of absolute rows ``first..last`` (inclusive); invalidate episodes whose first
        row they held (see :meth:`_prepare_row`)."""
        slots = np.arange(first, last + 1) % self.n_rows * self.n_envs + column
        if last >= self.n_rows:
            step_index = self.step_index.reshape(-1)
            overwritten = np.flatnonzero(
                (step_index[slots] == 0) & (np.arange(first, last + 1) >= self.n_rows)
            )
            for position in overwritten.tolist():
                absolute = first + position
                old_length = int(self.episode_length.reshape(-1)[slots[position]])
                self.n_transitions -= old_length
                self.n_finished_transitions -= old_length
                rest = np.arange(absolute, absolute + old_length) % self.n_rows
                report.cleared.extend((rest * self.n_envs + column).tolist())
        self.step_index.reshape(-1)[slots] = -1
        self.episode_length.reshape(-1)[slots] = 0

    def add_episode(
        self,
        column: int,
        observations: Mapping[str, np.ndarray],
        steps: Mapping[str, np.ndarray],
        infos: list | np.ndarray | None = None,
    ) -> AddReport:
        """Store a whole finished episode in one column at once.

        :param column: env column to write to (no episode may be in progress there)
        :param observations: observation fields of shape ``(T + 1, ...)``: ``o_0 ... o_T``
        :param steps: step fields of shape ``(T, ...)``
        :param infos: ``T`` info dicts, or None
        :return: what changed
        """
        if self.open_start[column] >= 0:
            raise ValueError(f"An episode is in progress in env column {column}; end it before add_episode.")
        lengths = {len(values) for values in steps.values()}
        if len(lengths) != 1 or min(lengths) < 1:
            raise ValueError(f"Step fields must share one length T >= 1; got lengths {sorted(lengths)}.")
        length = lengths.pop()
        for name, values in observations.items():
            if len(values) != length + 1:
                raise ValueError(
                    f"Observation field {name!r} needs T + 1 = {length + 1} rows, got {len(values)}."
                )
        if length + 1 > self.n_rows:
            raise ValueError(
                f"An episode of {length} steps needs {length + 1} rows but one env column holds {self.n_rows}: "
                "raise the capacity."
            )
        # Names and shapes are checked before the first write (as add does): _prepare_row invalidates the
        # episode it overwrites, so a late error would lose stored data, and every field must be given so
        # that no row keeps an older episode's value.
        observations = self._check_fields(observations, self.observation_specs, "observations", length + 1)
        steps = self._check_fields(steps, self.step_specs, "steps", length)
        self._check_infos(infos, length, "one info dict per step")
        report = AddReport()
        first = int(self.written[column])
        for absolute in range(first, first + length + 1):
            self._prepare_row(column, absolute, report)
        rings = np.arange(first, first + length + 1) % self.n_rows
        for name, values in observations.items():
            self.observations[name][rings, column] = values
        for name, values in steps.items():
            self.steps[name][rings[:-1], column] = values
        if self.infos is not None:
            for ring, info in zip(rings[:-1], infos if infos is not None else [None] * length, strict=True):
                self.infos[ring, column] = info
        self.step_index[rings[:-1], column] = np.arange(length, dtype=np.int32)
        report.new_transitions.extend((rings[:-1] * self.n_envs + column).tolist())
        self.n_transitions += length
        self.open_start[column] = first
        self.written[column] = first + length + 1
        self._close(column, report)
        return report

    def end_episode(self, column: int) -> AddReport:
        """Close the episode in progress in ``column`` (for example after a truncation seen late)."""
        report = AddReport()
        if self.open_start[column] >= 0:
            self._close(column, report)
        return report

    def _close(self, column: int, report: AddReport) -> None:
        start = int(self.open_start[column])
        length = int(self.written[column]) - 1 - start
        rings = np.arange(start, start + length + 1) % self.n_rows
        self.episode_length[rings, column] = length
        self.n_finished_transitions += length
        self.open_start[column] = -1
        report.finished.append((column, start, length))

    def _check_fields(
        self,
        given: Mapping[str, np.ndarray],
        specs: Mapping[str, FieldSpec],
        what: str,
        leading: int | tuple[int, ...] | None = None,
    ) -> Mapping[str, np.ndarray]:
        """Check names and shapes (``(leading, *field shape)``, ``leading`` = n_envs by default); return the
        values reshaped to exactly that shape (a scalar field may come as ``(leading, 1)``)."""
        leading = self.n_envs if leading is None else leading
        lead = leading if isinstance(leading, tuple) else (leading,)
        # Fast path of every add: plain arrays of exactly the expected shapes, returned as given.
        key = (id(specs), leading)
        expected_shapes = self._expected_shapes.get(key)
        if expected_shapes is None:
            expected_shapes = [(name, (*lead, *spec.shape)) for name, spec in specs.items()]
            self._expected_shapes[key] = expected_shapes
        if len(given) == len(expected_shapes):
            for name, shape in expected_shapes:
                value = given.get(name)
                if type(value) is not np.ndarray or value.shape != shape:
                    break
            else:
                return given
        # Comparing the key views is one set comparison; the sets are built only to word an error.
        if given.keys() != specs.keys():
            missing = set(specs) - set(given)
            unknown = set(given) - set(specs)
            raise ValueError(
                f"{what} fields do not match the storage: missing {sorted(missing)}, unknown {sorted(unknown)}; "
                f"pass exactly {sorted(specs)}."
            )
        checked = {}
        for name, values in given.items():
            field_shape = specs[name].shape
            expected = (*lead, *field_shape)
            # .shape of an array directly: np.shape / np.reshape cost microseconds per field on every add.
            shape = values.shape if isinstance(values, np.ndarray) else np.shape(values)
            if shape != expected and not (specs[name].shape == () and shape == (*lead, 1)):
                raise ValueError(
                    f"{what} field {name!r} has shape {shape}, expected {expected} "
                    f"(leading dimensions {lead}: n_envs for add, (S, n_envs) for add_steps, T or T + 1 for "
                    "add_episode; then the field's shape)."
                )
            # A scalar field given as (n_envs, 1) is reshaped to (n_envs,): the write
            # `array[ring, column] = values[column]` takes one scalar per column.
            checked[name] = values if shape == expected else np.reshape(values, expected)
        return checked

    def _check_infos(self, infos: list | tuple | np.ndarray | None, expected: int, what: str) -> None:
        if self.infos is not None and infos is not None and len(infos) != expected:
            raise ValueError(f"infos has {len(infos)} entries; pass {what} ({expected}), or None.")

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


def _packed_groups(
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


def _field_views(groups: list[FieldGroup], specs: Mapping[str, FieldSpec]) -> dict[str, np.ndarray]:
    """The fields of ``specs``, each as a view of shape ``(n_rows, n_envs, *shape)`` into its group's array."""
    views: dict[str, np.ndarray] = {}
    for group in groups:
        for name, (index, _) in group.members.items():
            if name in specs:
                views[name] = group.array[:, :, index] if group.packed else group.array
    return views


def _flat_writers(
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
