"""The stable-baselines3 replay buffer that relabels goals in hindsight, on the numpy core."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.type_aliases import DictReplayBufferSamples, ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

from her_wrap.core.replay import HindsightReplay
from her_wrap.core.settings import HindsightSettings
from her_wrap.core.storage import FieldSpec
from her_wrap.core.strategies import GoalSelectionStrategy
from her_wrap.envs.goal_wrapper import GoalObservationLayout
from her_wrap.sb3.goal_functions import GoalFunctions

Samples = ReplayBufferSamples | DictReplayBufferSamples


class HindsightBatch(NamedTuple):
    """A sample with what weighted train steps need besides the SB3 samples.

    :param samples: SB3 samples (dict or flat observations, as the learner's policy expects)
    :param weights: importance weights (prioritized replay), shape ``(B,)``, or None
    :param indexes: flat storage slots of the samples, for priority updates
    """

    samples: Samples
    weights: th.Tensor | None
    indexes: np.ndarray


class HindsightExperienceReplayWrapper(BaseBuffer):
    """Replay buffer for stable-baselines3 off-policy learners with hindsight goal relabeling.

    It speaks SB3's buffer interface (``add(obs, next_obs, action, reward, done, infos)``,
    ``sample(batch_size, env)``) and stores transitions in :class:`her_wrap.core.replay.HindsightReplay`:
    each observation once, goals relabeled at sample time (``online=True``) or frozen at episode end.

    .. note::
        Unlike SB3's ``HerReplayBuffer``, the reward of a relabeled transition is computed in this process
        with a local ``compute_reward`` (never an inter-process call under ``SubprocVecEnv``), its
        ``terminated`` is recomputed for the new goal (``compute_terminated`` when the env has one, else
        False) instead of being copied from the original goal, and episodes still in progress can be
        sampled. Time-limit truncations never cut the bootstrap.

    :param replay_buffer: the learner's buffer (or anything with ``buffer_size``, ``observation_space``,
        ``action_space``, ``device`` and ``n_envs``): it gives the size, spaces and device; the
        transitions are stored once, in the her_wrap core, and the wrapped buffer is not kept
    :param wrapped_env: the goal env (gymnasium env, :class:`~her_wrap.HERGoalEnvWrapper` or VecEnv) whose
        ``compute_reward`` / ``compute_terminated`` relabeled transitions use; may be given later with
        :meth:`set_env`
    :param settings: what to relabel and how to sample (default ``HindsightSettings()``: ``future``,
        ``k = 4``, online, uniform)
    :param layout: key layout of flat observations; needed when the learner sees flat vectors
        (``MlpPolicy`` through ``HERGoalEnvWrapper``); taken from ``wrapped_env`` when it has one
    :param store_infos: keep the info dict of each step (by reference, no copy) for ``compute_reward``
    :param seed: seed of the relabeling and sampling draws
    """

    def __init__(
        self,
        replay_buffer: Any,
        wrapped_env: Any = None,
        *,
        settings: HindsightSettings | None = None,
        layout: GoalObservationLayout | None = None,
        store_infos: bool = True,
        seed: int | None = None,
    ) -> None:
        super().__init__(
            replay_buffer.buffer_size,
            replay_buffer.observation_space,
            replay_buffer.action_space,
            device=replay_buffer.device,
            n_envs=replay_buffer.n_envs,
        )
        if layout is None and wrapped_env is not None:
            layout = getattr(wrapped_env, "layout", None)
        self.flat = isinstance(self.observation_space, spaces.Box)
        if self.flat and layout is None:
            raise ValueError(
                "The learner sees flat observations but no key layout was given: pass the "
                "HERGoalEnvWrapper as wrapped_env (or layout=GoalObservationLayout.from_space(dict_space))."
            )
        self.layout = layout
        dict_space = self._dict_space()
        observation_fields = {
            name: FieldSpec(space.shape or (), _storage_dtype(space))
            for name, space in dict_space.spaces.items()
        }
        action_dtype = self.action_space.dtype if self.action_space.dtype is not None else np.float32
        step_fields = {
            "action": FieldSpec(
                (self.action_dim,), np.float32 if action_dtype == np.float64 else action_dtype
            ),
            "reward": FieldSpec((), np.float32),
            "terminated": FieldSpec((), np.bool_),
            "truncated": FieldSpec((), np.bool_),
        }
        self.replay = HindsightReplay(
            self.buffer_size,
            observation_fields=observation_fields,
            step_fields=step_fields,
            n_envs=self.n_envs,
            settings=settings,
            store_infos=store_infos,
            seed=seed,
        )
        if wrapped_env is not None:
            self.set_env(wrapped_env)

    @classmethod
    def for_learner(
        cls,
        learner: Any,
        goal_env: Any,
        *,
        settings: HindsightSettings,
        layout: GoalObservationLayout | None,
        store_infos: bool,
        seed: int | None,
    ) -> HindsightExperienceReplayWrapper:
        """The buffer of an SB3 off-policy learner whose env is (built from) ``goal_env``.

        :param learner: the learner, set up without its own buffer: gives ``buffer_size``, the spaces,
            ``device`` and ``n_envs``
        :param goal_env: the goal env whose ``compute_reward`` rewards relabeled goals
        """
        return cls(learner, goal_env, settings=settings, layout=layout, store_infos=store_infos, seed=seed)

    # ------------------------------------------------------------------ configuration
    @property
    def settings(self) -> HindsightSettings:
        """The hindsight settings the buffer samples with."""
        return self.replay.settings

    @property
    def n_sampled_goal(self) -> int:
        return self.replay.n_sampled_goal

    @property
    def goal_selection_strategy(self) -> GoalSelectionStrategy:
        return self.replay.strategy

    @property
    def online(self) -> bool:
        return self.replay.online

    @property
    def prioritized(self) -> bool:
        return self.replay.prioritizer is not None

    def _dict_space(self) -> spaces.Dict:
        if self.flat:
            assert self.layout is not None
            return layout_space(self.layout)
        assert isinstance(self.observation_space, spaces.Dict)
        return self.observation_space

    def set_env(self, env: Any) -> None:
        """Take ``compute_reward`` (and ``compute_terminated``) for relabeled transitions from ``env``.

        :param env: a goal env, a :class:`~her_wrap.HERGoalEnvWrapper`, a VecEnv of either, or a
            :class:`~her_wrap.sb3.goal_functions.GoalFunctions`
        """
        functions = env if isinstance(env, GoalFunctions) else GoalFunctions.from_env(env)
        sample = self._dict_space().sample()
        functions = functions.vectorized(
            np.stack([sample["achieved_goal"]] * 2), np.stack([sample["desired_goal"]] * 2)
        )
        self.replay.reward_fn = functions.compute_reward
        self.replay.terminated_fn = functions.compute_terminated

    def __getstate__(self) -> dict[str, Any]:
        # The goal functions hold the env: leave them out of pickles; set_env restores them after a load.
        state = self.__dict__.copy()
        replay = self.replay.__dict__.copy()
        replay["reward_fn"] = None
        replay["terminated_fn"] = None
        state["replay"] = HindsightReplay.__new__(HindsightReplay)
        state["replay"].__dict__.update(replay)
        return state

    # ------------------------------------------------------------------ SB3 interface
    def add(  # type: ignore[override]
        self,
        obs: np.ndarray | dict[str, np.ndarray],
        next_obs: np.ndarray | dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """Store one step of every env (unnormalized observations, as SB3 passes them)."""
        done = np.asarray(done, dtype=bool).reshape(self.n_envs)
        truncated = np.array([bool(info.get("TimeLimit.truncated", False)) for info in infos]) & done
        step = {
            "action": np.asarray(action).reshape(self.n_envs, self.action_dim),
            "reward": np.asarray(reward, dtype=np.float32).reshape(self.n_envs),
            "terminated": done & ~truncated,
            "truncated": truncated,
        }
        self.replay.add(self._as_dict(obs), self._as_dict(next_obs), step, done, infos)

    def _as_dict(self, obs: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if isinstance(obs, dict):
            return obs
        assert self.layout is not None
        return self.layout.unflatten(obs)

    def end_open_episodes(self) -> None:
        """Close every episode in progress (the env was reset, e.g. at the start of a new ``learn``)."""
        for column in range(self.n_envs):
            self.replay.end_episode(column)

    def size(self) -> int:
        """Transitions that can be sampled."""
        return len(self.replay)

    def reset(self) -> None:
        """Forget every stored transition."""
        self.replay.clear()

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> Samples:  # type: ignore[override]
        """Draw a relabeled batch as SB3 samples (what stock ``train()`` consumes)."""
        return self.sample_batch(batch_size, env).samples

    def sample_batch(
        self, batch_size: int, env: VecNormalize | None = None, beta: float = 0.4
    ) -> HindsightBatch:
        """Draw a relabeled batch with its importance weights (prioritized) and storage slots.

        Normalization (``VecNormalize``) is applied after relabeling, to the new goals too.
        """
        if self.replay.reward_fn is None:
            raise ValueError(
                "No compute_reward is set for relabeled transitions (the buffer was loaded from a file?): "
                "call set_env(env) with the goal env first."
            )
        batch = self.replay.sample(batch_size, beta=beta)
        weights = batch.get("weights")
        return HindsightBatch(
            self.to_samples(batch, env),
            None if weights is None else self.to_torch(weights),
            batch["indexes"],
        )

    def to_samples(self, batch: dict[str, np.ndarray], env: VecNormalize | None = None) -> Samples:
        """Turn a core batch into SB3 samples: normalize, flatten when the policy is flat, to tensors."""
        keys = self._dict_space().spaces.keys()
        observations = self._normalize_obs({key: batch[key] for key in keys}, env)
        next_observations = self._normalize_obs({key: batch["next_" + key] for key in keys}, env)
        rewards = self._normalize_reward(batch["reward"].reshape(-1, 1), env)
        dones = batch["terminated"].astype(np.float32).reshape(-1, 1)
        actions = self.to_torch(batch["action"])
        if self.flat:
            assert self.layout is not None
            return ReplayBufferSamples(
                observations=self.to_torch(self.layout.flatten(observations)),  # type: ignore[arg-type]
                actions=actions,
                next_observations=self.to_torch(self.layout.flatten(next_observations)),  # type: ignore[arg-type]
                dones=self.to_torch(dones),
                rewards=self.to_torch(rewards),
            )
        assert isinstance(observations, dict) and isinstance(next_observations, dict)
        return DictReplayBufferSamples(
            observations={key: self.to_torch(value) for key, value in observations.items()},
            actions=actions,
            next_observations={key: self.to_torch(value) for key, value in next_observations.items()},
            dones=self.to_torch(dones),
            rewards=self.to_torch(rewards),
        )

    def update_priorities(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set priorities of sampled slots (prioritized replay); see :meth:`HindsightReplay.update_priorities`."""
        self.replay.update_priorities(indexes, priorities)

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Samples:  # type: ignore[override]
        raise NotImplementedError("Hindsight relabeling draws its own rows: call sample(batch_size, env).")


def layout_space(layout: GoalObservationLayout) -> spaces.Dict:
    """The dict observation space a flat layout was made from (bounds aside)."""
    parts: dict[str, spaces.Space] = {}
    for key in layout.keys:
        if key.kind == "discrete":
            parts[key.name] = spaces.Discrete(key.size, start=key.discrete_start)
        else:
            parts[key.name] = spaces.Box(-np.inf, np.inf, key.shape, dtype=np.dtype(key.dtype))
    return spaces.Dict(parts)


def _storage_dtype(space: spaces.Space) -> np.dtype:
    """Store float64 observations as float32 (what the policy computes in), other dtypes as they are."""
    dtype = np.dtype(space.dtype) if space.dtype is not None else np.dtype(np.float32)
    return np.dtype(np.float32) if dtype == np.float64 else dtype
