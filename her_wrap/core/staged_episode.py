"""The episode in progress of the cpprb-API :class:`~her_wrap.HindsightReplayBuffer`.

cpprb's HER buffer takes an episode's steps with ``add`` and stores them, with the episode's goal, at
``on_episode_end(goal)``: until then they are staged here, in arrays of ``max_episode_len`` rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from her_wrap.core.storage import FieldSpec


class StagedEpisode:
    """Steps added since the last episode ended, one array per field.

    :param specs: the fields of a step (cpprb's ``env_dict``)
    :param max_length: most steps one episode may have
    """

    def __init__(self, specs: Mapping[str, FieldSpec], max_length: int) -> None:
        self.specs = dict(specs)
        self.max_length = int(max_length)
        self._arrays = {
            name: np.zeros((self.max_length, *spec.shape), dtype=spec.dtype) for name, spec in specs.items()
        }
        self._length = 0

    def __len__(self) -> int:
        """Steps staged."""
        return self._length

    def add(self, values: Mapping[str, Any]) -> None:
        """Stage one step, or several rows at once, reshaping each field to ``(n, *shape)`` as cpprb does.

        :param values: one value per field, all with the same number of rows; other keys are ignored
        :raises ValueError: for a missing field, a value that does not reshape to the field's shape, fields
            with different row counts, or an episode that would exceed ``max_length`` (nothing is staged)
        """
        missing = [name for name in self.specs if name not in values]
        if missing:
            raise ValueError(
                f"add() is missing fields {missing}; pass every env_dict field: {list(self.specs)}."
            )
        rows: dict[str, np.ndarray] = {}
        for name, spec in self.specs.items():
            value = np.asarray(values[name], dtype=spec.dtype)
            width = math.prod(spec.shape)
            if value.size == 0 or value.size % width:
                raise ValueError(
                    f"add() got {name!r} of shape {value.shape}, which is not a whole number of rows of shape "
                    f"{spec.shape}; pass {spec.shape} for one step or (n, *{spec.shape}) for n rows."
                )
            rows[name] = value.reshape(-1, *spec.shape)
        counts = {name: len(value) for name, value in rows.items()}
        n = next(iter(counts.values()))
        if any(count != n for count in counts.values()):
            raise ValueError(
                f"add() got different numbers of rows per field {counts}; pass the same count for each."
            )
        if self._length + n > self.max_length:
            raise ValueError(
                f"Adding {n} step(s) to the {self._length} staged ones exceeds max_episode_len="
                f"{self.max_length}; call on_episode_end(goal) at the end of each episode, or raise "
                "max_episode_len."
            )
        end = self._length + n
        for name, value in rows.items():
            self._arrays[name][self._length : end] = value
        self._length = end

    def field(self, name: str) -> np.ndarray:
        """The staged steps of one field (a view: it changes with the next :meth:`add`)."""
        return self._arrays[name][: self._length]

    def clear(self) -> None:
        """Drop the staged steps."""
        self._length = 0


def check_compact(states: np.ndarray, next_states: np.ndarray) -> None:
    """Raise unless ``next_state[t] == state[t + 1]`` (NaN equal to NaN) for every step of the episode."""
    same = next_states[:-1] == states[1:]
    if np.issubdtype(states.dtype, np.inexact):
        same |= np.isnan(next_states[:-1]) & np.isnan(states[1:])
    if same.all():
        return
    step = int(np.flatnonzero(~same.reshape(len(same), -1).all(axis=1))[0])
    raise ValueError(
        f"next_state[{step}] differs from state[{step + 1}] in this episode, so the state cannot be stored "
        "once per row; build the buffer with compact=False (the staged episode is kept: clear() drops it)."
    )


def episode_goals(goal: Any, length: int, goal_shape: tuple[int, ...]) -> np.ndarray:
    """One goal per step, shape ``(length, *goal_shape)``, from ``on_episode_end``'s goal.

    :raises ValueError: for a goal that is neither ``goal_shape`` nor one per step
    """
    goal_array = np.asarray(goal)
    full = (length, *goal_shape)
    if goal_array.shape == full:
        return goal_array
    if goal_array.size == math.prod(goal_shape):
        return np.broadcast_to(goal_array.reshape(goal_shape), full)
    raise ValueError(
        f"on_episode_end got a goal of shape {goal_array.shape}, expected goal_shape={goal_shape} "
        f"(or {full}, one per step); pass the episode's desired goal (set goal_shape if goals differ from states)."
    )
