"""stable-baselines v2's form of the hindsight replay wrapper: a wrapper around a learner's replay buffer.

stable-baselines v2 documented::

    env = HERGoalEnvWrapper(goal_env)
    buffer = HindsightExperienceReplayWrapper(replay_buffer, n_sampled_goal, goal_selection_strategy, env)
    buffer.add(obs_t, action, reward, obs_tp1, done)      # flat observations of the wrapped env
    if buffer.can_sample(batch_size):
        batch = buffer.sample(batch_size)

:class:`~her_wrap.sb3.replay_wrapper.HindsightExperienceReplayWrapper` takes that form beside SB3's
constructor. This module turns the v2 arguments into SB3's: :func:`wrapped_buffer` reads what the buffer (or
learner) holds, :func:`stored_steps` replays the transitions it already stores, and :func:`sb3_add_arguments`
turns a five-argument ``add`` into SB3's six.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import BaseBuffer, ReplayBuffer

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.settings import HindsightSettings
from her_wrap.envs.goal_wrapper import GoalObservationLayout, HERGoalEnvWrapper

V2_FORM = "(replay_buffer, n_sampled_goal, goal_selection_strategy, wrapped_env)"
SB3_FORM = "(buffer_size, observation_space, action_space, env, device, n_envs, ...)"

AddArguments = tuple[Any, Any, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]
"""The arguments of SB3's ``add``: ``(obs, next_obs, action, reward, done, infos)``."""


@dataclass(frozen=True)
class WrappedBuffer:
    """What the wrapper takes from the SB3 replay buffer or learner it wraps."""

    buffer_size: int
    """Rows over all envs: the wrapped buffer's capacity, grown where its stored episodes need more."""
    observation_space: spaces.Space
    action_space: spaces.Space
    device: th.device
    n_envs: int
    handle_timeout_termination: bool
    discount: float | None
    """The learner's ``gamma`` (None for a buffer alone)."""
    seed: int | None
    """The learner's seed (None for a buffer alone)."""
    replay_buffer: ReplayBuffer | None
    """The buffer whose stored transitions move into the wrapper (None when there are none)."""


def wraps_a_buffer(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether constructor arguments are stable-baselines v2's form (a buffer or learner first)."""
    if "replay_buffer" in kwargs:
        return True
    return bool(args) and isinstance(args[0], BaseBuffer | BaseAlgorithm)


def is_v2_add(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``add`` arguments are stable-baselines v2's ``(obs_t, action, reward, obs_tp1, done[, info])``.

    SB3's ``(obs, next_obs, action, reward, done, infos)`` has six, the last a list (or, from
    ``SubprocVecEnv``, a tuple) of info dicts; v2's sixth is one info dict.
    """
    if {"next_obs", "infos"} & kwargs.keys():
        return False
    if {"obs_t", "obs_tp1", "info"} & kwargs.keys():
        return True
    given = len(args) + len(kwargs)
    return given == 5 or (given == 6 and len(args) == 6 and (args[5] is None or isinstance(args[5], dict)))


def constructor_arguments(
    replay_buffer: Any,
    n_sampled_goal: int,
    goal_selection_strategy: str | GoalSelectionStrategy,
    wrapped_env: Any,
    *,
    online: bool = True,
    store_infos: bool | None = None,
    seed: int | None = None,
) -> tuple[dict[str, Any], ReplayBuffer | None]:
    """The SB3-form constructor arguments of a v2-form wrapper, and the buffer whose transitions it takes.

    Everything is checked before anything is read: an error leaves the buffer (or learner) as it was.

    :return: keyword arguments of the SB3 form and the buffer holding transitions
        to move into the wrapper (None when there are none)
    :raises ValueError: for ``n_sampled_goal < 0``, an unknown strategy, or observations that are not the
        wrapped env's
    :raises TypeError: see :func:`wrapped_buffer`
    """
    settings = HindsightSettings(
        n_sampled_goal=n_sampled_goal,
        goal_selection_strategy=goal_selection_strategy,
        online=online,
    )
    wrapped = wrapped_buffer(replay_buffer, wrapped_env)
    if seed is None:
        # As the drop-in buffer does: a seeded learner has seeded numpy's global generator.
        seed = wrapped.seed if wrapped.seed is not None else int(np.random.randint(2**31))  # noqa: NPY002
    arguments = {
        "buffer_size": wrapped.buffer_size,
        "observation_space": wrapped.observation_space,
        "action_space": wrapped.action_space,
        "env": wrapped_env,
        "device": wrapped.device,
        "n_envs": wrapped.n_envs,
        "settings": settings,
        "store_infos": store_infos,
        "handle_timeout_termination": wrapped.handle_timeout_termination,
        "seed": seed,
        "discount": wrapped.discount,
    }
    return arguments, wrapped.replay_buffer


def wrapped_buffer(replay_buffer: Any, wrapped_env: Any) -> WrappedBuffer:
    """Check v2's arguments and read what the wrapper takes from the buffer or learner; changes neither.

    :param replay_buffer: an SB3 ``ReplayBuffer`` (or ``DictReplayBuffer``), or an off-policy learner
        (its ``buffer_size``, spaces, device, ``n_envs``, ``gamma`` and seed; its buffer's transitions)
    :param wrapped_env: the :class:`~her_wrap.HERGoalEnvWrapper` whose flat observations are added
    :raises TypeError: for a buffer of another kind, a hindsight buffer already, or an env that is not a
        ``HERGoalEnvWrapper``
    :raises ValueError: when the buffer's observations are not the wrapped env's
    """
    from her_wrap.sb3.replay_wrapper import HindsightExperienceReplayWrapper

    if not isinstance(wrapped_env, HERGoalEnvWrapper):
        raise TypeError(
            f"wrapped_env must be a HERGoalEnvWrapper, got {type(wrapped_env).__name__}: wrap the goal env "
            "first (wrapped_env = HERGoalEnvWrapper(goal_env)); its layout turns the flat observations given "
            "to add back into goal dicts."
        )
    learner: Any = replay_buffer if isinstance(replay_buffer, BaseAlgorithm) else None
    buffer: Any = getattr(learner, "replay_buffer", None) if learner is not None else replay_buffer
    if isinstance(buffer, HindsightExperienceReplayWrapper):
        raise TypeError(
            f"The {type(buffer).__name__} given already relabels goals in hindsight: use it as it is, or wrap "
            "the learner's plain ReplayBuffer."
        )
    if learner is None and not isinstance(buffer, ReplayBuffer):
        raise TypeError(
            f"HindsightExperienceReplayWrapper{V2_FORM} wraps a stable-baselines3 ReplayBuffer or an "
            f"off-policy learner, got {type(buffer).__name__}. On-policy learners (PPO, A2C) keep no replay "
            "buffer; SB3's form of the constructor is HindsightExperienceReplayWrapper" + SB3_FORM + "."
        )
    if learner is not None and not hasattr(learner, "buffer_size"):
        raise TypeError(
            f"{type(learner).__name__} is not an off-policy learner: it keeps no replay buffer to wrap. Use "
            "DQN, SAC, TD3, DDPG (or sb3-contrib's TQC, QRDQN)."
        )
    source: Any = learner if learner is not None else buffer
    observation_space = source.observation_space
    _check_observations(observation_space, wrapped_env)
    stored = buffer if isinstance(buffer, ReplayBuffer) and buffer.size() > 0 else None
    n_envs = int(source.n_envs)
    # SB3's learner counts its buffer_size over all envs; its buffer keeps buffer_size // n_envs rows per env.
    capacity = int(learner.buffer_size) if learner is not None else int(buffer.buffer_size) * n_envs
    if stored is not None:
        capacity = max(capacity, _rows_needed(stored) * n_envs)
    return WrappedBuffer(
        buffer_size=capacity,
        observation_space=observation_space,
        action_space=source.action_space,
        device=th.device(source.device),
        n_envs=n_envs,
        handle_timeout_termination=bool(getattr(buffer, "handle_timeout_termination", True)),
        discount=None if learner is None else float(learner.gamma),
        seed=None if learner is None else learner.seed,
        replay_buffer=stored,
    )


def _check_observations(observation_space: spaces.Space, wrapped_env: HERGoalEnvWrapper) -> None:
    flat_shape = (wrapped_env.layout.flat_size,)
    if isinstance(observation_space, spaces.Box) and observation_space.shape == flat_shape:
        return
    if isinstance(observation_space, spaces.Dict) and set(observation_space.spaces) == set(
        wrapped_env.layout.key_order
    ):
        return
    raise ValueError(
        f"The replay buffer stores observations of {observation_space}, but the wrapped env's are flat "
        f"vectors of shape {flat_shape}: build the buffer (or learner) with the HERGoalEnvWrapper's "
        "observation_space."
    )


def _rows(buffer: ReplayBuffer) -> list[int]:
    """The stored rows of an SB3 buffer, oldest first (a full ring starts at ``pos``)."""
    if not buffer.full:
        return list(range(buffer.pos))
    rows = [*range(buffer.pos, buffer.buffer_size), *range(buffer.pos)]
    # Saving memory, the row at pos had its observation overwritten by the newest next observation.
    return rows[1:] if buffer.optimize_memory_usage else rows


def _field(data: Any, row: int) -> Any:
    return {key: value[row] for key, value in data.items()} if isinstance(data, dict) else data[row]


def _next_observation(buffer: ReplayBuffer, row: int) -> Any:
    if buffer.optimize_memory_usage:
        return _field(buffer.observations, (row + 1) % buffer.buffer_size)
    return _field(buffer.next_observations, row)


def _same(first: Any, second: Any) -> np.ndarray:
    """Per env column: whether two observations (arrays or dicts of arrays) are equal."""
    pairs = [(first[key], second[key]) for key in first] if isinstance(first, dict) else [(first, second)]
    same = np.ones(len(pairs[0][0]), dtype=bool)
    for one, other in pairs:
        same &= (one == other).reshape(len(same), -1).all(axis=1)
    return same


def _rows_needed(buffer: ReplayBuffer) -> int:
    """Storage rows per env that the stored transitions take: one per transition and one per episode."""
    rows = _rows(buffer)
    episodes = np.ones(buffer.n_envs, dtype=np.int64)
    for row, following in itertools.pairwise(rows):
        ends = buffer.dones[row].astype(bool)
        ends |= ~_same(_field(buffer.observations, following), _next_observation(buffer, row))
        episodes += ends
    return len(rows) + int(episodes.max())


def stored_steps(buffer: ReplayBuffer) -> Iterator[AddArguments]:
    """The transitions an SB3 buffer stores, oldest first, as the arguments of SB3's ``add``.

    SB3's buffers keep no info dicts: each step's infos carry only ``TimeLimit.truncated``.
    """
    for row in _rows(buffer):
        truncated = buffer.timeouts[row].astype(bool).tolist()
        yield (
            _field(buffer.observations, row),
            _next_observation(buffer, row),
            buffer.actions[row],
            buffer.rewards[row],
            buffer.dones[row].astype(bool),
            [{"TimeLimit.truncated": late} for late in truncated],
        )


def sb3_add_arguments(
    n_envs: int,
    dict_space: spaces.Dict,
    layout: GoalObservationLayout | None,
    obs_t: Any,
    action: Any,
    reward: Any,
    obs_tp1: Any,
    done: Any,
    info: dict[str, Any] | list[dict[str, Any]] | None = None,
) -> AddArguments:
    """stable-baselines v2's ``add(obs_t, action, reward, obs_tp1, done[, info])`` as SB3's arguments.

    :param n_envs: envs of the buffer (v2 stepped one: scalars and single observations are one env's)
    :param dict_space: the goal dict space of the observations
    :param layout: key layout of the flat observations (None: the dict space's keys in goal order)
    :param obs_t: flat observation(s) of a ``HERGoalEnvWrapper`` (or goal dicts), before the step
    :param action: the action(s) taken
    :param reward: the reward(s)
    :param obs_tp1: the observation(s) after the step
    :param done: whether the step ended the episode (a time limit's end too, as v2 counted it)
    :param info: the step's info dict (a list of them for several envs), or None
    :return: goal dicts with one row per env, actions, rewards, dones and one info dict per env
    :raises ValueError: when the sizes do not fit ``n_envs`` envs
    """
    if info is None:
        infos: list[dict[str, Any]] = [{} for _ in range(n_envs)]
    else:
        infos = [info] if isinstance(info, dict) else list(info)
    if len(infos) != n_envs:
        raise ValueError(f"add got {len(infos)} info dicts for {n_envs} envs: pass one per env.")
    if layout is None:
        layout = GoalObservationLayout.from_space(dict_space)
    shapes = {key: space.shape or () for key, space in dict_space.spaces.items()}

    def per_env(observation: Any) -> dict[str, np.ndarray]:
        if isinstance(observation, dict):
            return {key: np.asarray(observation[key]).reshape(n_envs, *shapes[key]) for key in shapes}
        array = np.asarray(observation)
        if array.size != n_envs * layout.flat_size:
            raise ValueError(
                f"add got an observation of shape {array.shape}; the wrapped env's are flat vectors of "
                f"{layout.flat_size} entries ({n_envs} of them: one per env)."
            )
        return layout.unflatten(array.reshape(n_envs, layout.flat_size))

    return (
        per_env(obs_t),
        per_env(obs_tp1),
        np.asarray(action),
        np.asarray(reward, dtype=np.float32).reshape(n_envs),
        np.asarray(done, dtype=bool).reshape(n_envs),
        infos,
    )
