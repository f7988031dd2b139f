"""stable-baselines v2's ``HindsightExperienceReplayWrapper``: a wrapper around a learner's replay buffer.

stable-baselines v2 documented::

    env = HERGoalEnvWrapper(goal_env)
    wrapper = HindsightExperienceReplayWrapper(replay_buffer, n_sampled_goal, goal_selection_strategy, env)
    wrapper.add(obs_t, action, reward, obs_tp1, done)      # flat observations of the wrapped env
    if wrapper.can_sample(batch_size):
        batch = wrapper.sample(batch_size)

:class:`HindsightExperienceReplayWrapper` keeps that form on stable-baselines3: it holds a
:class:`~her_wrap.sb3.HerReplayBuffer` (:attr:`~HindsightExperienceReplayWrapper.replay_buffer`, the buffer
to hand a learner) and translates v2's calls to its SB3 interface.
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
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.vec_env import VecNormalize

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.envs.goal_wrapper import HERGoalEnvWrapper
from her_wrap.sb3.her_replay_buffer import HerReplayBuffer
from her_wrap.sb3.samples import Samples

AddArguments = tuple[Any, Any, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]
"""The arguments of SB3's ``add``: ``(obs, next_obs, action, reward, done, infos)``."""


class HindsightExperienceReplayWrapper:
    """stable-baselines v2's hindsight replay wrapper around an SB3 replay buffer or off-policy learner.

    The transitions are stored and sampled by :attr:`replay_buffer`, a :class:`~her_wrap.sb3.HerReplayBuffer`
    built from what the wrapped buffer (or learner) holds; the wrapped buffer itself is only read. To train
    a learner with it, hand the learner that buffer: ``model.replay_buffer = wrapper.replay_buffer``.

    :param replay_buffer: an SB3 ``ReplayBuffer`` (or ``DictReplayBuffer``), or an off-policy learner whose
        buffer is wrapped. Its capacity, spaces, device and ``n_envs`` are taken (and a learner's ``gamma``
        and seed). The transitions it holds move into the wrapper, oldest first: the capacity grows so that
        all fit, and their infos carry only ``TimeLimit.truncated`` (SB3's buffers keep no infos).
    :param n_sampled_goal: see :class:`~her_wrap.HindsightSettings`
    :param goal_selection_strategy: see :class:`~her_wrap.HindsightSettings`
    :param wrapped_env: the :class:`~her_wrap.HERGoalEnvWrapper` whose flat observations :meth:`add` takes
        and whose ``compute_reward`` rewards relabeled goals
    :param online: see :class:`~her_wrap.HindsightSettings` (None: its default)
    :param store_infos: see :class:`~her_wrap.sb3.HerReplayBuffer`
    :param seed: seed of the sampling and relabeling draws (default: the learner's, else a draw from numpy's
        global generator, which a seeded learner has seeded)
    :raises TypeError: for a first argument that is neither an SB3 replay buffer nor an off-policy learner,
        or an env that is not a ``HERGoalEnvWrapper``
    :raises ValueError: for settings out of range, or a buffer whose observations are not the wrapped env's
    """

    def __init__(
        self,
        replay_buffer: ReplayBuffer | BaseAlgorithm,
        n_sampled_goal: int,
        goal_selection_strategy: str | GoalSelectionStrategy,
        wrapped_env: HERGoalEnvWrapper,
        *,
        online: bool | None = None,
        store_infos: bool | None = None,
        seed: int | None = None,
    ) -> None:
        wrapped = wrapped_buffer(replay_buffer, wrapped_env)
        self.env = wrapped_env
        self.replay_buffer = HerReplayBuffer(
            wrapped.buffer_size,
            wrapped.observation_space,
            wrapped.action_space,
            wrapped_env,
            device=wrapped.device,
            n_envs=wrapped.n_envs,
            handle_timeout_termination=wrapped.handle_timeout_termination,
            n_sampled_goal=n_sampled_goal,
            goal_selection_strategy=goal_selection_strategy,
            online=online,
            store_infos=store_infos,
            seed=wrapped.seed if seed is None else seed,
            gamma=wrapped.discount,
        )
        """The hindsight buffer holding the transitions: give it to a learner (``model.replay_buffer``)."""
        if wrapped.replay_buffer is not None:
            for step in stored_steps(wrapped.replay_buffer):
                self.replay_buffer.add(*step)
            self.replay_buffer.flush()

    @property
    def n_sampled_goal(self) -> int:
        """``k``: relabeled goals per real one."""
        return self.replay_buffer.n_sampled_goal

    @property
    def goal_selection_strategy(self) -> GoalSelectionStrategy:
        """Where relabeled goals come from."""
        return self.replay_buffer.goal_selection_strategy

    def add(
        self,
        obs_t: Any,
        action: Any,
        reward: Any,
        obs_tp1: Any,
        done: Any,
        info: dict[str, Any] | list[dict[str, Any]] | None = None,
    ) -> None:
        """Store one step, stable-baselines v2's way.

        :param obs_t: flat observation(s) of the ``HERGoalEnvWrapper`` (or goal dicts), before the step;
            one env's without an env axis when the buffer has one env, as v2 stepped one
        :param action: the action(s) taken
        :param reward: the reward(s)
        :param obs_tp1: the observation(s) after the step
        :param done: whether the step ended the episode (a time limit's end too, as v2 counted it)
        :param info: the step's info dict (a list of them for several envs), or None
        :raises ValueError: when the sizes do not fit the buffer's envs; nothing is stored then
        """
        n_envs, layout = self.replay_buffer.n_envs, self.env.layout
        if info is None:
            infos: list[dict[str, Any]] = [{} for _ in range(n_envs)]
        else:
            infos = [info] if isinstance(info, dict) else list(info)
        if len(infos) != n_envs:
            raise ValueError(f"add got {len(infos)} info dicts for {n_envs} envs: pass one per env.")
        shapes = layout.key_shapes

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

        self.replay_buffer.add(
            per_env(obs_t),
            per_env(obs_tp1),
            np.asarray(action),
            np.asarray(reward, dtype=np.float32).reshape(n_envs),
            np.asarray(done, dtype=bool).reshape(n_envs),
            infos,
        )

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> Samples:
        """A relabeled batch as SB3 samples (torch tensors; flat observations for a flat buffer)."""
        return self.replay_buffer.sample(batch_size, env)

    def can_sample(self, n_samples: int) -> bool:
        """Whether ``n_samples`` transitions are stored (v2's check before a sample)."""
        return len(self) >= n_samples

    def __len__(self) -> int:
        return self.replay_buffer.size()


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


def wrapped_buffer(replay_buffer: Any, wrapped_env: Any) -> WrappedBuffer:
    """Check v2's arguments and read what the wrapper takes from the buffer or learner; changes neither.

    :param replay_buffer: an SB3 ``ReplayBuffer`` (or ``DictReplayBuffer``), or an off-policy learner
        (its ``buffer_size``, spaces, device, ``n_envs``, ``gamma`` and seed; its buffer's transitions)
    :param wrapped_env: the :class:`~her_wrap.HERGoalEnvWrapper` whose flat observations are added
    :raises TypeError: for a buffer of another kind, a hindsight buffer already, or an env that is not a
        ``HERGoalEnvWrapper``
    :raises ValueError: when the buffer's observations are not the wrapped env's
    """
    if not isinstance(wrapped_env, HERGoalEnvWrapper):
        raise TypeError(
            f"wrapped_env must be a HERGoalEnvWrapper, got {type(wrapped_env).__name__}: wrap the goal env "
            "first (wrapped_env = HERGoalEnvWrapper(goal_env)); its layout turns the flat observations given "
            "to add back into goal dicts."
        )
    learner: Any = replay_buffer if isinstance(replay_buffer, BaseAlgorithm) else None
    buffer: Any = getattr(learner, "replay_buffer", None) if learner is not None else replay_buffer
    if isinstance(replay_buffer, HindsightExperienceReplayWrapper) or isinstance(buffer, HerReplayBuffer):
        raise TypeError(
            f"The {type(buffer).__name__} given already relabels goals in hindsight: use it as it is, or wrap "
            "the learner's plain ReplayBuffer."
        )
    if learner is None and not isinstance(buffer, ReplayBuffer):
        raise TypeError(
            "HindsightExperienceReplayWrapper's first argument is a stable-baselines3 ReplayBuffer or an "
            f"off-policy learner, got {type(buffer).__name__}. On-policy learners (PPO, A2C) keep no replay "
            "buffer; a hindsight buffer built from a capacity is her_wrap.sb3.HerReplayBuffer(buffer_size, "
            "observation_space, action_space, env)."
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
