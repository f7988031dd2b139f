"""Writing episodes into the storage ring: one step of every env column, chunks of steps, whole episodes.

:class:`EpisodeWrites` is the writing half of :class:`~her_wrap.core.storage.EpisodeStorage` (see the
row layout there); every write checks its input before changing anything and returns an
:class:`AddReport` of what changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from her_wrap.core.storage import FieldSpec


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


class EpisodeWrites:
    """The writes of :class:`~her_wrap.core.storage.EpisodeStorage`, which sets up the state below."""

    n_envs: int
    n_rows: int
    observation_specs: dict[str, FieldSpec]
    step_specs: dict[str, FieldSpec]
    observations: dict[str, np.ndarray]
    steps: dict[str, np.ndarray]
    infos: np.ndarray | None
    step_index: np.ndarray
    episode_length: np.ndarray
    written: np.ndarray
    open_start: np.ndarray
    n_transitions: int
    n_finished_transitions: int
    _observation_writers: list[tuple[str, np.ndarray, Any]]
    _step_writers: list[tuple[str, np.ndarray, Any]]
    _expected_shapes: dict[tuple[int, Any], list[tuple[str, tuple[int, ...]]]]

    def _prepare_row(self, column: int, absolute: int, report: AddReport) -> int:
        """Free ring slot of ``absolute`` for a new row; invalidate the episode whose start it held."""
        ring = absolute % self.n_rows
        slot = ring * self.n_envs + column
        step_index = self.step_index.reshape(-1)
        # Rows are overwritten in absolute order, so a row whose episode started earlier lost its
        # episode when that first row went: only overwriting a first row invalidates anything.
        if absolute >= self.n_rows and step_index[slot] == 0:
            self._forget_episode(column, absolute, slot, report)
        step_index[slot] = -1
        self.episode_length.reshape(-1)[slot] = 0
        return ring

    def _forget_episode(self, column: int, absolute: int, slot: int, report: AddReport) -> None:
        """The ring is about to overwrite the first row (``absolute``, at flat ``slot``) of a stored episode:
        take its transitions off the counts and report the slots it still occupies as cleared."""
        old_length = int(self.episode_length.reshape(-1)[slot])
        self.n_transitions -= old_length
        self.n_finished_transitions -= old_length
        rest = np.arange(absolute, absolute + old_length) % self.n_rows
        report.cleared.extend((rest * self.n_envs + column).tolist())

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
                self._forget_episode(column, first + position, int(slots[position]), report)
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
