"""cpprb's buffer arguments, checked and mapped onto the storage of :class:`~her_wrap.HindsightReplayBuffer`.

cpprb describes fields with an ``env_dict`` (``{"obs": {"shape": 3}, "act": {"shape": 1}, ...}``) and
n-step returns with an ``Nstep`` dict. This module checks them, and the buffer's other arguments, and says
where each field is stored: the
core keeps one observation column holding ``state[0], next_state[0], ..., next_state[T - 1]`` per episode
(``T + 1`` rows), so its value at row ``t + 1`` is ``next_state[t]`` and new goals come from it.
Compact: that column *is* the state (``state[t] == next_state[t - 1]``). Not compact: the state is also
stored as a step field, and the column is named after ``next_state``.

cpprb's HER buffer takes an episode's steps with ``add`` and stores them, with the episode's goal, at
``on_episode_end(goal)``: until then they are staged in a :class:`StagedEpisode`, in arrays of
``max_episode_len`` rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from her_wrap.core.storage import FieldSpec

#: Fields the buffer adds to cpprb's: the goal of each row and its computed reward.
GOAL = "goal"
REWARD = "rew"
#: What an n-step sample adds: the discount of the bootstrapped value.
DISCOUNTS = "discounts"
#: cpprb's usual name of the termination field, summed over an n-step window when present.
DONE = "done"
# cpprb's buffer accepts these too; default_dtype changes what the HER buffer stores, Nstep how it samples.
_SUPPORTED_KWARGS = ("default_dtype", "Nstep")
_NSTEP_KEYS = ("size", "gamma", "rew", "next")


def check_buffer_arguments(
    size: Any,
    max_episode_len: Any,
    reward_func: Any,
    goal_func: Any,
    additional_goals: Any,
    kwargs: Mapping[str, Any],
) -> None:
    """Check the arguments of ``HindsightReplayBuffer`` that cpprb's signature has and settings do not.

    :raises TypeError: for an unsupported keyword, or a ``reward_func`` / ``goal_func`` that is not callable
    :raises ValueError: for a size or episode length that is not a positive integer, a size below one
        episode, or ``additional_goals`` below 0
    """
    unsupported = sorted(set(kwargs) - set(_SUPPORTED_KWARGS))
    if unsupported:
        raise TypeError(
            f"HindsightReplayBuffer got unsupported keyword arguments {unsupported}; of cpprb's extra "
            f"buffer options only {list(_SUPPORTED_KWARGS)} is supported: remove the others."
        )
    for name, value in (("size", size), ("max_episode_len", max_episode_len)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if size < max_episode_len:
        raise ValueError(
            f"size={size} is smaller than one episode (max_episode_len={max_episode_len}); "
            f"pass size >= {max_episode_len}."
        )
    if not callable(reward_func):
        raise TypeError(
            f"reward_func must be callable as reward_func(next_state, action, goal), got {reward_func!r}."
        )
    if goal_func is not None and not callable(goal_func):
        raise TypeError(
            f"goal_func must be callable as goal_func(states) -> goals, or None; got {goal_func!r}."
        )
    if (
        isinstance(additional_goals, bool)
        or not isinstance(additional_goals, (int, np.integer))
        or additional_goals < 0
    ):
        raise ValueError(
            f"additional_goals must be an integer >= 0 (relabeled goals per real one), got {additional_goals!r}."
        )


def _field_spec(name: str, spec: Any, default_dtype: np.dtype) -> FieldSpec:
    """cpprb's ``env_dict`` entry (``{"shape": 3, "dtype": np.float32}``, shape 1 by default) as a FieldSpec."""
    if not isinstance(spec, Mapping):
        raise TypeError(
            f"env_dict[{name!r}] must be a dict such as {{'shape': 3, 'dtype': np.float32}}, got {spec!r}."
        )
    shape = spec.get("shape", 1)
    return FieldSpec(
        tuple(np.atleast_1d(np.asarray(shape, dtype=np.int64)).tolist()), spec.get("dtype", default_dtype)
    )


def _names(value: Any) -> list[str]:
    """cpprb's ``str or list of str``, as a list."""
    return [value] if isinstance(value, str) else list(value)


def parse_nstep(nstep: Any, next_state: str) -> tuple[int, float]:
    """``(size, gamma)`` of cpprb's ``Nstep`` dict, checked against what the buffer can sum and move.

    ``rew`` may only name the reward the buffer computes (``"rew"``) and ``next`` only the next-state
    field: the other fields of a sample are those of its first step.
    """
    if not isinstance(nstep, Mapping):
        raise TypeError(f"Nstep must be a dict such as {{'size': 3, 'gamma': 0.99}}, got {nstep!r}.")
    unknown = sorted(set(nstep) - set(_NSTEP_KEYS))
    if unknown:
        raise ValueError(f"Nstep has unknown keys {unknown}; it takes {list(_NSTEP_KEYS)}.")
    size, gamma = nstep.get("size"), nstep.get("gamma", 0.99)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"Nstep['size'] must be an integer >= 1 (steps summed per sample), got {size!r}.")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.floating)) or not 0 < gamma <= 1:
        raise ValueError(f"Nstep['gamma'] must be a discount in (0, 1], got {gamma!r}.")
    if "rew" in nstep and _names(nstep["rew"]) != [REWARD]:
        raise ValueError(
            f"Nstep['rew'] is {nstep['rew']!r}, but the only reward of this buffer is the one it computes, "
            f"{REWARD!r}: pass Nstep['rew'] = {REWARD!r} or leave it out."
        )
    if "next" in nstep and _names(nstep["next"]) != [next_state]:
        raise ValueError(
            f"Nstep['next'] is {nstep['next']!r}; the buffer moves only the next-state field {next_state!r} "
            f"to the window's end: pass Nstep['next'] = {next_state!r} or leave it out."
        )
    return int(size), float(gamma)


@dataclass(frozen=True)
class CpprbLayout:
    """Where the fields of a cpprb ``env_dict`` are stored (see the module docstring).

    :param env_specs: every ``env_dict`` field as a :class:`FieldSpec`
    :param goal_spec: the goal field (the state's dtype, ``goal_shape`` or the state's shape)
    :param row_field: the storage's one observation field: ``state`` when compact, else ``next_state``
    :param step_fields: the storage's step fields: the other ``env_dict`` fields, the goal, and the state
        when not compact
    """

    env_specs: dict[str, FieldSpec]
    goal_spec: FieldSpec
    row_field: str
    step_fields: dict[str, FieldSpec]

    @property
    def next_row_field(self) -> str:
        """The name under which a gathered sample holds the row field's next value (``next_state``)."""
        return "next_" + self.row_field


def cpprb_layout(
    env_dict: Mapping[str, Mapping[str, Any]],
    *,
    state: str,
    action: str,
    next_state: str,
    goal_shape: Iterable[int] | int | None,
    goal_func: Callable[[np.ndarray], np.ndarray] | None,
    default_dtype: np.dtype,
    compact: bool,
) -> CpprbLayout:
    """Check cpprb's ``env_dict`` and the field names given with it; lay the fields out for the storage.

    :raises ValueError: for a missing or reserved field, ``state`` and ``next_state`` that differ, a goal
        shape that needs a ``goal_func``, or a field that clashes with an internal name
    :raises TypeError: for an ``env_dict`` entry that is not a dict
    """
    missing = [key for key in (state, action, next_state) if key not in env_dict]
    if missing:
        raise ValueError(
            f"env_dict has no field {missing}; add them or pass the names of your fields as "
            "state=, action=, next_state=."
        )
    reserved = [key for key in (GOAL, REWARD) if key in env_dict]
    if reserved:
        raise ValueError(
            f"env_dict must not define {reserved}: the buffer adds these fields itself; rename yours."
        )
    specs = {name: _field_spec(name, spec, default_dtype) for name, spec in env_dict.items()}
    if specs[state] != specs[next_state]:
        raise ValueError(
            f"{state!r} is {specs[state]} but {next_state!r} is {specs[next_state]}; "
            "give them the same shape and dtype in env_dict."
        )
    # Goals take the state's dtype, as in cpprb.
    goal_spec = (
        specs[state]
        if goal_shape is None
        else _field_spec(GOAL, {"shape": goal_shape, "dtype": specs[state].dtype}, default_dtype)
    )
    if goal_func is None and goal_spec.shape != specs[state].shape:
        raise ValueError(
            f"goal_shape={goal_spec.shape} differs from the state's shape {specs[state].shape} but no "
            "goal_func maps states to goals; pass goal_func (or drop goal_shape)."
        )
    row_field = state if compact else next_state
    next_row_field = "next_" + row_field
    if next_row_field in specs and next_row_field != next_state:
        raise ValueError(
            f"env_dict field {next_row_field!r} clashes with the name the buffer uses internally for "
            f"{next_state!r}; rename that field."
        )
    step_fields = {name: spec for name, spec in specs.items() if name not in (row_field, next_state)}
    if not compact:
        step_fields[state] = specs[state]
    step_fields[GOAL] = goal_spec
    return CpprbLayout(specs, goal_spec, row_field, step_fields)


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
