"""Checks that an env can be used with HER, with error messages that name the problem and the fix.

HER needs three things from an env: a dict observation with ``observation``, ``achieved_goal`` and
``desired_goal``; goals of one shape (a relabeled desired goal *is* an achieved goal); and a
``compute_reward(achieved_goal, desired_goal, info)`` that relabeling calls once per batch, so it should
accept batched goals. :func:`make_vectorized_reward` falls back to one call per row, with a warning, for a
``compute_reward`` that does not.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

#: ``compute_reward(achieved_goal, desired_goal, info)`` as goal envs define it.
GoalFunction = Callable[[Any, Any, Any], Any]

#: The keys of a goal observation, in the order they take in a flat observation.
GOAL_KEYS: tuple[str, str, str] = ("observation", "achieved_goal", "desired_goal")


class GoalEnvError(TypeError, ValueError):
    """An env or observation space HER cannot relabel, with a message naming the problem and the fix.

    It is both a ``TypeError`` and a ``ValueError``: the goal checks used to raise one or the other
    depending on the problem, and ``except`` clauses written for either keep catching it.
    """


def check_goal_space(space: spaces.Space) -> None:
    """Check that observations are goal dicts whose goals can be swapped: a ``spaces.Dict`` with
    ``observation``, ``achieved_goal`` and ``desired_goal``, the two goals of one shape.

    :param space: an env's or a VecEnv's observation space
    :raises GoalEnvError: naming what is missing and the fix
    """
    if not isinstance(space, spaces.Dict):
        kind = type(space).__name__
        raise GoalEnvError(
            f"Cannot relabel {kind} observations: HER needs the goal dict, so the observation_space must be "
            f"a spaces.Dict, got {kind}. Fix: return dict observations with the keys {list(GOAL_KEYS)}. "
            "Build the VecEnv from the goal envs themselves (not flattened ones): HER flattens them for "
            "MlpPolicy."
        )
    missing = [key for key in GOAL_KEYS if key not in space.spaces]
    if missing:
        raise GoalEnvError(
            f"The observations lack the goal keys {missing} HER relabels with: the observation_space dict "
            f"lacks the keys {missing}; it has {list(space.spaces)}. Fix: add them, so that it has all of "
            f"{list(GOAL_KEYS)}."
        )
    achieved, desired = space["achieved_goal"].shape, space["desired_goal"].shape
    if achieved != desired:
        raise GoalEnvError(
            f"achieved_goal {achieved} and desired_goal {desired} differ in shape, but HER uses achieved "
            f"goals as desired goals: achieved_goal has shape {achieved} but desired_goal has shape "
            f"{desired}. Fix: give both keys the same space."
        )


def check_goal_env(env: Any) -> None:
    """Raise when ``env`` is not a goal env HER can relabel; return ``None`` when it is.

    :param env: a gymnasium env (wrapped or not); ``compute_reward`` is looked up on ``env.unwrapped``
    :raises GoalEnvError: the observation space fails :func:`check_goal_space`, or the env has no
        ``compute_reward``
    """
    check_goal_space(env.observation_space)
    unwrapped = getattr(env, "unwrapped", env)
    if not callable(getattr(unwrapped, "compute_reward", None)):
        raise GoalEnvError(
            f"{type(unwrapped).__name__} has no compute_reward, which HER calls to reward relabeled goals. "
            "Fix: define compute_reward(achieved_goal, desired_goal, info) on the env, accepting batched goals."
        )


def check_vectorized_reward(
    env_or_compute_reward: Any,
    achieved_goal_batch: npt.ArrayLike,
    desired_goal_batch: npt.ArrayLike,
    infos: Any = None,
) -> bool:
    """Whether ``compute_reward`` takes a batch of goals in one call and returns one reward per row.

    :param env_or_compute_reward: a goal env (its ``unwrapped.compute_reward`` is used) or the function
    :param achieved_goal_batch: at least 2 achieved goals, shape ``(B, ...)``
    :param desired_goal_batch: as many desired goals, same shape
    :param infos: what to pass as ``info`` (``None``, or one dict per row)
    :return: ``True`` when the call returns shape ``(B,)``; ``False`` when it returns a scalar, another
        shape, or raises (a ``compute_reward`` written for single goals often raises on a batch; a real bug
        will raise again in the per-row fallback)
    :raises ValueError: for fewer than 2 goals, or batches of different lengths
    """
    compute_reward = _resolve_compute_reward(env_or_compute_reward)
    achieved, desired = np.asarray(achieved_goal_batch), np.asarray(desired_goal_batch)
    if achieved.ndim == 0 or len(achieved) < 2 or achieved.shape[:1] != desired.shape[:1]:
        raise ValueError(
            "check_vectorized_reward needs two batches of the same length, at least 2 goals each, "
            f"got shapes {achieved.shape} and {desired.shape}."
        )
    try:
        rewards = np.asarray(compute_reward(achieved, desired, infos))
    except Exception:
        return False
    return rewards.shape == (len(achieved),)


@dataclass
class BatchedGoalFunction:
    """A goal function (``compute_reward`` or ``compute_terminated``) that always takes batches.

    Made by :func:`make_vectorized_reward` (decided on sample goals at once), or with ``vectorized=None``
    to decide at the first call with two rows or more, on the real data of that call: a ``compute_reward``
    that needs the env reset first (an image observation read from the env's state) is then not mistaken
    for one that cannot take batches. Picklable when the wrapped function is.

    :param function: ``function(achieved_goal, desired_goal, info)``
    :param vectorized: ``True``: one call per batch; ``False``: one call per row; None: not decided yet
    :param broadcast_scalar: a single value returned for a whole batch, equal to every row's own value
        (gymnasium-robotics' ``compute_terminated`` returns ``False``), is broadcast to the rows instead of
        falling back to one call per row
    """

    function: GoalFunction
    vectorized: bool | None = None
    broadcast_scalar: bool = False
    constant: Any = None

    def __call__(self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike, infos: Any = None) -> Any:
        """Evaluate a batch of goals.

        :param achieved_goal: shape ``(B, ...)``
        :param desired_goal: shape ``(B, ...)``
        :param infos: ``None``, one dict for every row, or a sequence of ``B`` dicts (one per row)
        :return: shape ``(B,)``: the function's own output when vectorized, else the rows' results stacked
        """
        if self.vectorized:
            return self.function(achieved_goal, desired_goal, infos)
        if self.vectorized is None:
            return self.decide(achieved_goal, desired_goal, infos)
        if self.constant is not None:
            return np.full(len(np.asarray(achieved_goal)), self.constant)
        return self._rows(achieved_goal, desired_goal, infos)

    def decide(
        self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike, infos: Any = None
    ) -> np.ndarray:
        """Choose batch or per-row calls on this batch (warning once for per-row) and return its values.

        One row cannot tell a batch from a single goal: such a call is answered row by row and the choice
        waits for a larger batch. An error raised by the rows too is the function's own: it propagates and
        nothing is decided.
        """
        achieved = np.asarray(achieved_goal)
        if len(achieved) < 2:
            return self._rows(achieved_goal, desired_goal, infos)
        try:
            batch = np.asarray(self.function(achieved_goal, desired_goal, infos))
        except Exception:
            batch = None
        if batch is not None and batch.shape == (len(achieved),):
            self.vectorized = True
            return batch
        rows = self._rows(achieved_goal, desired_goal, infos)
        if (
            self.broadcast_scalar
            and batch is not None
            and batch.size == 1
            and bool(np.all(rows == batch.item()))
        ):
            self.constant = batch.item()
            self.vectorized = False
            return rows
        self.vectorized = False
        warnings.warn(
            f"{getattr(self.function, '__qualname__', self.function)!s} does not return one value per row for "
            "a batch of goals; falling back to one call per row, which is slow. "
            "Fix: make compute_reward accept batched goals (shape (B, goal_dim)) and return shape (B,).",
            UserWarning,
            stacklevel=3,
        )
        return rows

    def decide_if_clear(self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike) -> None:
        """Decide on sample goals only when they leave no doubt; otherwise wait for the first real batch.

        Clear: the batch call returns one value per row, or returns something else while every row call
        succeeds. A call that raises (a ``compute_reward`` reading env state that exists only after a
        reset) leaves the choice to the first real batch.
        """
        if self.vectorized is not None:
            return
        try:
            self.decide(achieved_goal, desired_goal, None)
        except Exception:
            self.vectorized = None

    def _rows(self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike, infos: Any) -> np.ndarray:
        achieved, desired = np.asarray(achieved_goal), np.asarray(desired_goal)
        rows = [self.function(achieved[i], desired[i], _row_info(infos, i)) for i in range(len(achieved))]
        return np.asarray(rows).reshape(len(achieved))


def make_vectorized_reward(
    env_or_compute_reward: Any,
    achieved_goal_batch: npt.ArrayLike,
    desired_goal_batch: npt.ArrayLike,
    infos: Any = None,
) -> BatchedGoalFunction:
    """Wrap ``compute_reward`` so that it takes batches: natively when it can, else one call per row.

    The choice is made once, here, by :func:`check_vectorized_reward` on the sample batches; the per-row
    fallback warns once, here, since it costs one Python call per relabeled transition. (The replay
    buffers decide later, on their first real batch: ``BatchedGoalFunction(compute_reward)``.)

    :param env_or_compute_reward: a goal env (its ``unwrapped.compute_reward`` is used) or the function
        (``compute_terminated`` works the same way)
    :param achieved_goal_batch: at least 2 sample achieved goals, shape ``(B, ...)``
    :param desired_goal_batch: as many sample desired goals
    :param infos: what to pass as ``info`` in the sample call
    :return: a callable ``(achieved_goal, desired_goal, infos) -> shape (B,)``
    """
    compute_reward = _resolve_compute_reward(env_or_compute_reward)
    vectorized = check_vectorized_reward(compute_reward, achieved_goal_batch, desired_goal_batch, infos)
    if not vectorized:
        warnings.warn(
            f"{getattr(compute_reward, '__qualname__', compute_reward)!s} does not return one value per row for "
            "a batch of goals; falling back to one call per row, which is slow. "
            "Fix: make compute_reward accept batched goals (shape (B, goal_dim)) and return shape (B,).",
            UserWarning,
            stacklevel=2,
        )
    return BatchedGoalFunction(compute_reward, vectorized)


class _RecordingInfo(dict):
    """An info dict that notes any read of its content (keys, values, membership, iteration, copies)."""

    def __init__(self, content: Any, reads: list[bool]) -> None:
        super().__init__(content if isinstance(content, dict) else {})
        self._reads = reads

    def _note(self) -> None:
        self._reads[0] = True


def _recording(method_name: str) -> Any:
    method = getattr(dict, method_name)

    def recorded(self: _RecordingInfo, *args: Any, **kwargs: Any) -> Any:
        self._note()
        return method(self, *args, **kwargs)

    recorded.__name__ = method_name
    return recorded


for _name in (
    "__getitem__", "__contains__", "__iter__", "__len__", "__eq__", "__repr__", "__or__", "__reduce_ex__",
    "get", "keys", "values", "items", "copy", "pop", "setdefault",
):  # fmt: skip
    setattr(_RecordingInfo, _name, _recording(_name))


def reads_infos(
    compute_reward: GoalFunction,
    achieved_goal_batch: npt.ArrayLike,
    desired_goal_batch: npt.ArrayLike,
    infos: Any,
) -> bool | None:
    """Whether ``compute_reward`` reads the info dicts it is given: one probe call with dicts that record reads.

    A replay buffer keeps every step's info dict only for a ``compute_reward`` that reads them; this tells
    which. The call gets an object array of dicts (one per row, with the content of ``infos`` when given),
    the way relabeling passes stored infos.

    :param compute_reward: ``compute_reward(achieved_goal, desired_goal, info)``
    :param achieved_goal_batch: achieved goals, shape ``(B, ...)``
    :param desired_goal_batch: desired goals, shape ``(B, ...)``
    :param infos: ``B`` info dicts whose content the probe dicts carry, or None for empty ones
    :return: True when it read one; False when it returned without reading any; None when it raised
        before reading one (undecided: keep the infos to be safe)
    """
    achieved = np.asarray(achieved_goal_batch)
    reads = [False]
    probes = np.empty(len(achieved), dtype=object)
    for row in range(len(achieved)):
        probes[row] = _RecordingInfo(None if infos is None else infos[row], reads)
    try:
        compute_reward(achieved_goal_batch, desired_goal_batch, probes)
    except Exception:
        return True if reads[0] else None
    return reads[0]


def _resolve_compute_reward(env_or_compute_reward: Any) -> GoalFunction:
    """The function itself, or a goal env's ``unwrapped.compute_reward``."""
    if callable(env_or_compute_reward):
        return env_or_compute_reward  # type: ignore[no-any-return]
    unwrapped = getattr(env_or_compute_reward, "unwrapped", env_or_compute_reward)
    compute_reward = getattr(unwrapped, "compute_reward", None)
    if not callable(compute_reward):
        raise TypeError(
            f"expected a compute_reward function or a goal env that has one, got {type(unwrapped).__name__}."
        )
    return compute_reward  # type: ignore[no-any-return]


def _row_info(infos: Any, row: int) -> Any:
    """The ``info`` of one row: ``None`` and a single dict apply to every row; a sequence has one per row."""
    if infos is None or isinstance(infos, dict):
        return infos
    return infos[row]


class NonFiniteDataError(ValueError):
    """An env handed a replay buffer a NaN or an infinity: refused before it is stored, so that no update
    ever reads it. The message names the env column, the step and the field."""


def _first_non_finite(values: np.ndarray) -> tuple[int, float] | None:
    """The env column and value of the first non-finite entry of ``values`` (envs on axis 0), or None."""
    finite = np.isfinite(values)
    if finite.all():
        return None
    column = int(np.argwhere(~finite)[0][0])
    return column, float(values[~finite].flat[0])


def check_finite_step(next_obs: np.ndarray | Mapping[str, np.ndarray], reward: np.ndarray, step: int) -> None:
    """Refuse one step of every env column when an observation, a goal or a reward is NaN or infinite.

    A cheap check that replay buffers make before they store a step (one ``np.isfinite`` over the step's
    values side by side; the fields are looked at one by one only to name the culprit): a NaN stored once
    reaches every update that draws it, and a relabeled reward computed from it.

    :param next_obs: the observations the step returned, a goal dict or flat vectors, envs on axis 0
    :param reward: the step's rewards, one per env column
    :param step: how many steps the buffer has taken, for the message
    :raises NonFiniteDataError: naming the column, the step, the field and the fix
    """
    reward = np.asarray(reward)
    n_envs = reward.size
    arrays = next_obs.values() if isinstance(next_obs, Mapping) else (next_obs,)
    side_by_side = np.concatenate(
        [np.asarray(values).reshape(n_envs, -1) for values in arrays] + [reward.reshape(n_envs, 1)], axis=1
    )
    if side_by_side.dtype.kind not in "fc" or np.isfinite(side_by_side).all():
        return
    fields = [*next_obs.items()] if isinstance(next_obs, Mapping) else [("observation", next_obs)]
    for name, values in [*fields, ("reward", reward)]:
        values = np.asarray(values)
        found = _first_non_finite(values.reshape(n_envs, -1)) if values.dtype.kind in "fc" else None
        if found is not None:
            column, value = found
            raise NonFiniteDataError(
                f"env column {column} returned {name} = {value} at step {step}; nothing of that step was "
                "stored. Fix the env (or pass check_finite=False to store non-finite values anyway)."
            )


def check_finite_steps(next_obs: Mapping[str, np.ndarray], reward: np.ndarray, first_step: int) -> int | None:
    """The chunk's index of the first step whose observations, goals or rewards hold a NaN or an infinity.

    The check of :func:`check_finite_step` over a chunk of steps at once (one ``np.isfinite`` per field),
    for buffers that write steps in chunks.

    :param next_obs: the observations the steps returned, by key, shaped ``(steps, n_envs, ...)``
    :param reward: the steps' rewards, shaped ``(steps, n_envs)``
    :param first_step: how many steps the buffer had taken before the chunk, for the message
    :return: None when every value is finite
    """
    finite = np.ones(reward.shape[:2], dtype=bool)
    for values in (*next_obs.values(), reward):
        if values.dtype.kind in "fc":
            finite &= np.isfinite(values.reshape(*reward.shape[:2], -1)).all(axis=2)
    if finite.all():
        return None
    return int(np.argwhere(~finite)[0][0])
