"""The stable-baselines3 replay buffer that relabels goals in hindsight, on the numpy core.

:class:`HindsightExperienceReplayWrapper` is the one storage and sampling path of the SB3 layer: ``HER``
builds it with :meth:`~HindsightExperienceReplayWrapper.for_learner`, and the drop-in
:class:`her_wrap.sb3.HerReplayBuffer` is this class behind SB3's own constructor signature.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.type_aliases import DictReplayBufferSamples, ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize
from stable_baselines3.her.her_replay_buffer import HerReplayBuffer as StableBaselinesHerReplayBuffer

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.replay import HindsightReplay
from her_wrap.core.settings import HindsightSettings
from her_wrap.core.storage import FieldSpec
from her_wrap.envs.checks import reads_infos
from her_wrap.envs.goal_wrapper import GoalObservationLayout
from her_wrap.sb3.goal_functions import GoalFunctions

Samples = ReplayBufferSamples | DictReplayBufferSamples

# Fewer staged steps than this are written one by one: a vectorized chunk has a fixed cost of a few
# single writes.
_SINGLE_WRITES_BELOW = 8


class HindsightBatch(NamedTuple):
    """A sample with what weighted train steps need besides the SB3 samples."""

    samples: Samples
    """SB3 samples (dict or flat observations, as the learner's policy expects)."""
    weights: th.Tensor | None
    """Importance weights (prioritized replay), shape ``(B,)``, or None."""
    indexes: np.ndarray
    """Flat storage slots of the samples, for priority updates."""


class HindsightExperienceReplayWrapper(StableBaselinesHerReplayBuffer):
    """Replay buffer for stable-baselines3 off-policy learners with hindsight goal relabeling.

    It speaks SB3's buffer interface (``add(obs, next_obs, action, reward, done, infos)``,
    ``sample(batch_size, env)``, ``set_env``, ``truncate_last_trajectory``) and stores transitions in
    :class:`her_wrap.core.replay.HindsightReplay`: each observation once, goals relabeled at sample time
    (``online=True``) or frozen at episode end. It subclasses SB3's ``HerReplayBuffer`` only so that SB3's
    learners treat it as one (they pass it the env, and ``load_replay_buffer`` restores the env and
    truncates the last trajectory); it allocates none of SB3's arrays.

    .. note::
        Unlike SB3's ``HerReplayBuffer``, the reward of a relabeled transition is computed in this process
        with a local ``compute_reward`` (never an inter-process call under ``SubprocVecEnv``), its
        ``terminated`` is recomputed for the new goal (``compute_terminated`` when the env has one, else
        False) instead of being copied from the original goal, and episodes still in progress can be
        sampled. Time-limit truncations never cut the bootstrap (unless ``handle_timeout_termination``
        is False, as in SB3).

    Capacity: ``buffer_size`` counts rows over all envs (SB3's ``buffer_size`` counts transitions over all
    envs: both give each env ``buffer_size // n_envs``). An episode of ``T`` steps takes ``T + 1`` rows,
    so the buffer holds about ``buffer_size * T / (T + 1)`` transitions.

    Infos: ``store_infos=None`` (default) keeps each step's info dict only when ``compute_reward`` reads
    it. That is found out on real data: the first ``add`` calls ``compute_reward`` once with info dicts
    that record reads; when that call raises before reading anything, infos are kept and the question is
    asked again at the first sample, where unread infos are dropped.

    :param buffer_size: rows over all envs (see Capacity above)
    :param observation_space: the learner's observation space: the goal dict, or flat vectors with
        ``layout``
    :param action_space: the learner's action space
    :param env: the goal env (gymnasium env, :class:`~her_wrap.HERGoalEnvWrapper` or VecEnv) whose
        ``compute_reward`` / ``compute_terminated`` relabeled transitions use; may be given later with
        :meth:`set_env`
    :param device: torch device of the samples
    :param n_envs: envs stepped in parallel (one column of the storage each)
    :param settings: what to relabel and how to sample (default ``HindsightSettings()``: ``future``,
        ``k = 4``, online, uniform)
    :param layout: key layout of flat observations; needed when the learner sees flat vectors
        (``MlpPolicy`` through ``HERGoalEnvWrapper``); taken from ``env`` when it has one
    :param store_infos: keep the info dict of each step for ``compute_reward``: None finds out whether
        ``compute_reward`` reads them (see Infos above); True always; False never (the first sample raises
        if ``compute_reward`` reads them)
    :param copy_info_dict: keep deep copies of the info dicts rather than references; with
        ``store_infos=None`` it also keeps them without asking (SB3's ``copy_info_dict=True`` means the
        rewards need them)
    :param handle_timeout_termination: a step whose info says ``TimeLimit.truncated`` keeps its bootstrap
        (default); False counts it as terminal, as SB3 does with that setting
    :param seed: seed of the relabeling and sampling draws
    :param discount: ``gamma`` of n-step returns (``settings.n_steps > 1``); ``for_learner`` passes the
        learner's
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        env: Any = None,
        device: th.device | str = "auto",
        n_envs: int = 1,
        *,
        settings: HindsightSettings | None = None,
        layout: GoalObservationLayout | None = None,
        store_infos: bool | None = None,
        copy_info_dict: bool = False,
        handle_timeout_termination: bool = True,
        seed: int | None = None,
        discount: float | None = None,
    ) -> None:
        # SB3's HerReplayBuffer.__init__ would allocate its own arrays: only the base class's bookkeeping.
        BaseBuffer.__init__(self, buffer_size, observation_space, action_space, device=device, n_envs=n_envs)
        self.handle_timeout_termination = bool(handle_timeout_termination)
        self.copy_info_dict = bool(copy_info_dict)
        self.store_infos = True if store_infos is None and copy_info_dict else store_infos
        if layout is None and env is not None:
            layout = getattr(env, "layout", None)
        self.flat = isinstance(self.observation_space, spaces.Box)
        if self.flat and layout is None:
            raise ValueError(
                "The learner sees flat observations but no key layout was given: pass the "
                "HERGoalEnvWrapper as env (or layout=GoalObservationLayout.from_space(dict_space))."
            )
        if not self.flat and not isinstance(self.observation_space, spaces.Dict):
            raise ValueError(
                f"Hindsight relabeling needs goal dict observations, got {type(self.observation_space).__name__}: "
                "use a goal env (observation, achieved_goal, desired_goal) and MultiInputPolicy."
            )
        self.layout = layout
        dict_space = self._dict_space()
        self.keys = tuple(dict_space.spaces)
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
            # At least the 2 rows per env that storage needs: a learner loaded only to predict (the zoo's
            # enjoy) asks for buffer_size=1; an episode too long for the rows fails at add, naming the fix.
            max(self.buffer_size, 2 * self.n_envs),
            observation_fields=observation_fields,
            step_fields=step_fields,
            n_envs=self.n_envs,
            settings=settings,
            store_infos=bool(self.store_infos),
            discount=discount,
            seed=seed,
        )
        # What is still to find out on real data: whether compute_reward reads infos (None: not yet); the
        # first add writes at once, so that a setup whose shapes do not fit fails there, not at a sample.
        self._infos_read: bool | None = True if self.store_infos else None
        self._awaiting_first_add = True
        self._first_sample_done = False
        self._no_flags = np.zeros(self.n_envs, dtype=bool)
        self._staged: list[tuple[Any, ...]] = []
        # The next observation of the last step written: where an episode in progress goes on from.
        self._pending_next: dict[str, np.ndarray] | None = None
        # Chunks of this many add calls are written at once; a sample writes what is staged before it.
        self._stage_limit = 256
        self._copy_infos = self.copy_info_dict and self.store_infos is True
        self.env: Any = None
        self.goal_functions: GoalFunctions | None = None
        if env is not None:
            self.set_env(env)

    @classmethod
    def for_learner(
        cls,
        learner: Any,
        goal_env: Any,
        *,
        settings: HindsightSettings,
        layout: GoalObservationLayout | None,
        store_infos: bool | None,
        seed: int | None,
    ) -> HindsightExperienceReplayWrapper:
        """The buffer of an SB3 off-policy learner whose env is (built from) ``goal_env``.

        :param learner: the learner, set up without its own buffer: gives ``buffer_size`` (transitions over
            all envs, as SB3 counts them), the spaces, ``device`` and ``n_envs``
        :param goal_env: the goal env whose ``compute_reward`` rewards relabeled goals
        :param store_infos: see the class (None: keep infos only when ``compute_reward`` reads them)
        """
        return HindsightExperienceReplayWrapper(
            learner.buffer_size,
            learner.observation_space,
            learner.action_space,
            goal_env,
            device=learner.device,
            n_envs=learner.n_envs,
            settings=settings,
            layout=layout,
            store_infos=store_infos,
            seed=seed,
            discount=learner.gamma,
        )

    # ------------------------------------------------------------------ configuration
    @property
    def settings(self) -> HindsightSettings:
        """The hindsight settings the buffer samples with."""
        return self.replay.settings

    @property
    def n_sampled_goal(self) -> int:  # type: ignore[override]
        return self.replay.n_sampled_goal

    @property
    def goal_selection_strategy(self) -> GoalSelectionStrategy:  # type: ignore[override]
        return self.replay.strategy

    @property
    def online(self) -> bool:
        return self.replay.online

    @property
    def prioritized(self) -> bool:
        return self.replay.prioritizer is not None

    @property
    def stores_infos(self) -> bool:
        """Whether info dicts are being kept now."""
        return self.replay.storage.stores_infos

    def _dict_space(self) -> spaces.Dict:
        if self.flat:
            assert self.layout is not None
            return layout_space(self.layout)
        assert isinstance(self.observation_space, spaces.Dict)
        return self.observation_space

    def set_env(self, env: Any) -> None:
        """Take ``compute_reward`` (and ``compute_terminated``) for relabeled transitions from ``env``.

        Unlike SB3's buffer, an env already set is replaced (``HER.set_env`` gives a new env of the task).
        Whether ``compute_reward`` takes batches is decided here when goals sampled from the space leave no
        doubt, else at the next sample on its real data (a ``compute_reward`` that needs a reset first).

        :param env: a goal env, a :class:`~her_wrap.HERGoalEnvWrapper`, a VecEnv of either, or a
            :class:`~her_wrap.sb3.goal_functions.GoalFunctions`
        """
        self.goal_functions = env if isinstance(env, GoalFunctions) else GoalFunctions.from_env(env)
        self.env = None if isinstance(env, GoalFunctions) else env
        sample = self._dict_space().sample()
        batched = self.goal_functions.batched(
            np.stack([sample["achieved_goal"]] * 2), np.stack([sample["desired_goal"]] * 2)
        )
        self.replay.reward_fn = batched.compute_reward
        self.replay.terminated_fn = batched.compute_terminated
        self._first_sample_done = False

    def __getstate__(self) -> dict[str, Any]:
        # The env and the goal functions hold the env: leave them out of pickles; set_env restores them.
        self.flush()
        state = self.__dict__.copy()
        state["env"] = None
        state["goal_functions"] = None
        replay = self.replay.__dict__.copy()
        replay["reward_fn"] = None
        replay["terminated_fn"] = None
        state["replay"] = HindsightReplay.__new__(HindsightReplay)
        state["replay"].__dict__.update(replay)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

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
        """Store one step of every env (unnormalized observations, as SB3 passes them).

        ``obs`` is read only for envs that start an episode with this step: inside an episode it is the
        ``next_obs`` stored with the previous step. Steps are staged and written to the storage in chunks
        (:meth:`flush`), before anything reads it: a sample sees every step added before it. The arrays
        given are kept until then, not copied (SB3 hands each step new arrays).
        """
        n_envs = self.n_envs
        if type(done) is not np.ndarray or done.dtype != np.bool_ or done.shape != (n_envs,):
            done = np.asarray(done, dtype=bool).reshape(n_envs)
        ends = done.tolist()
        if True in ends:
            if self.handle_timeout_termination:
                cut = [
                    end and bool(info.get("TimeLimit.truncated", False))
                    for end, info in zip(ends, infos, strict=True)
                ]
            else:
                cut = [False] * n_envs
            terminated = np.array([end and not late for end, late in zip(ends, cut, strict=True)], dtype=bool)
            truncated = np.array(cut, dtype=bool)
        else:
            terminated = truncated = self._no_flags
        if type(action) is not np.ndarray or action.shape != (n_envs, self.action_dim):
            action = np.asarray(action).reshape(n_envs, self.action_dim)
        if type(reward) is not np.ndarray or reward.shape != (n_envs,):
            reward = np.asarray(reward, dtype=np.float32).reshape(n_envs)
        if self.flat:
            obs, next_obs = self._as_dict(obs), self._as_dict(next_obs)
        first = self._awaiting_first_add
        if first:
            self._first_add(obs, next_obs, infos)
        if self._copy_infos:
            infos = copy.deepcopy(infos)
        self._staged.append((obs, next_obs, action, reward, terminated, truncated, done, infos))
        if first or len(self._staged) >= self._stage_limit:
            self.flush()

    def flush(self) -> None:
        """Write the staged steps to the storage: one vectorized write for a chunk, single writes for a few.

        Every method that reads the storage calls it first; call it before reading ``replay`` directly.
        """
        staged, self._staged = self._staged, []
        if not staged:
            return
        keep_infos = self.replay.storage.stores_infos
        if len(staged) < _SINGLE_WRITES_BELOW:
            for obs, next_obs, action, reward, terminated, truncated, done, infos in staged:
                self._close_episodes_left(obs)
                step = {"action": action, "reward": reward, "terminated": terminated, "truncated": truncated}
                self.replay.add(obs, next_obs, step, done, infos if keep_infos else None)
                self._pending_next = next_obs
            return
        observations, next_observations, actions, rewards, terminated, truncated, dones, infos = zip(
            *staged, strict=True
        )
        self._close_episodes_left(observations[0])
        stacked = {key: _stacked([observation[key] for observation in observations]) for key in self.keys}
        stacked_next = {
            key: _stacked([observation[key] for observation in next_observations]) for key in self.keys
        }
        ends = _stacked(dones)
        # A step inside an episode starts from the previous step's next observation; one that does not was
        # taken after a reset the buffer was not told of: the episode ended with the step before it.
        left = np.zeros(ends[:-1].shape, dtype=bool)
        for key in self.keys:
            differ = stacked[key][1:] != stacked_next[key][:-1]
            left |= differ.reshape(*left.shape, -1).any(axis=2)
        ends[:-1] |= left
        self.replay.add_steps(
            stacked,
            stacked_next,
            {
                "action": _stacked(actions),
                "reward": _stacked(rewards),
                "terminated": _stacked(terminated),
                "truncated": _stacked(truncated),
            },
            ends,
            infos if keep_infos else None,
        )
        self._pending_next = next_observations[-1]

    def _close_episodes_left(self, observation: dict[str, np.ndarray]) -> None:
        """Close the episodes in progress whose env did not go on from their last next observation.

        SB3's ``learn(reset_num_timesteps=True)`` resets the env without telling the buffer: the first step
        after it starts from the reset observation, and the episode in progress must end before it, or the
        buffer would glue two episodes together (a goal from one relabeling the other). Loading a buffer
        with ``truncate_last_traj=False`` and going on in the same episode passes this test.
        """
        pending = self._pending_next
        if pending is None:
            return
        differ = np.zeros(self.n_envs, dtype=bool)
        for key in self.keys:
            differ |= (observation[key] != pending[key]).reshape(self.n_envs, -1).any(axis=1)
        if differ.any():
            for column in np.flatnonzero(differ & (self.replay.storage.open_start >= 0)).tolist():
                self.replay.end_episode(column)

    def _first_add(self, obs: Any, next_obs: Any, infos: list[dict[str, Any]]) -> None:
        """Find out, on the first step's real data, whether ``compute_reward`` reads infos; keep them if so
        (and, when it cannot tell yet, until the first sample tells)."""
        self._awaiting_first_add = False
        if self._infos_read is not None or self.goal_functions is None:
            reads = self._infos_read
        else:
            observation, next_observation = self._as_dict(obs), self._as_dict(next_obs)
            reads = reads_infos(
                self.goal_functions.compute_reward,
                next_observation["achieved_goal"],
                observation["desired_goal"],
                infos,
            )
        self._check_infos_kept(reads)
        self._infos_read = reads
        if self.store_infos is None:
            self.replay.storage.store_infos(reads is not False)
        self._copy_infos = self.copy_info_dict and self.stores_infos

    def _check_infos_kept(self, reads: bool | None) -> None:
        if reads and self.store_infos is False:
            raise ValueError(
                "compute_reward reads the info dicts, but this buffer was built with store_infos=False: "
                "relabeled rewards would be computed without them. Pass store_infos=True (or None: keep them "
                "when compute_reward reads them)."
            )

    def _as_dict(self, obs: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if isinstance(obs, dict):
            return obs
        assert self.layout is not None
        return self.layout.unflatten(obs)

    def end_open_episodes(self) -> None:
        """Close every episode in progress (the env was reset, e.g. at the start of a new ``learn``)."""
        self.flush()
        for column in range(self.n_envs):
            self.replay.end_episode(column)

    def has_open_episodes(self) -> bool:
        """Whether an episode is in progress in some env (it continues with the next ``add``)."""
        self.flush()
        return bool((self.replay.storage.open_start >= 0).any())

    def truncate_last_trajectory(self) -> None:
        """Close the episodes in progress, as SB3's ``load_replay_buffer(truncate_last_traj=True)`` asks.

        Warns when there is one, as SB3 does: training that goes on in the same episode should load with
        ``truncate_last_traj=False``, and the episode then continues with the next ``add``.
        """
        if self.has_open_episodes():
            warnings.warn(
                "The last trajectory in the replay buffer will be truncated. If you are in the same episode "
                "as when the replay buffer was saved, load it with truncate_last_traj=False to go on with it.",
                UserWarning,
                stacklevel=2,
            )
        self.end_open_episodes()

    def size(self) -> int:
        """Transitions that can be sampled."""
        self.flush()
        return len(self.replay)

    def reset(self) -> None:
        """Forget every stored transition."""
        self._staged.clear()
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
        self.flush()
        if self.replay.reward_fn is None:
            raise ValueError(
                "No compute_reward is set for relabeled transitions (the buffer was loaded from a file?): "
                "call set_env(env) with the goal env first."
            )
        if self._first_sample_done:
            batch = self.replay.sample(batch_size, beta=beta)
        else:
            batch = self._first_sample(batch_size, beta)
        weights = batch.get("weights")
        return HindsightBatch(
            self.to_samples(batch, env),
            None if weights is None else self._tensor(weights),
            batch["indexes"],
        )

    def _first_sample(self, batch_size: int, beta: float) -> dict[str, np.ndarray]:
        """The first sample after ``set_env``: settle, on real data, what the first ``add`` could not."""
        assert self.goal_functions is not None
        try:
            batch = self.replay.sample(batch_size, beta=beta)
        except Exception:
            if not self.goal_functions.from_copy or self.env is None:
                raise
            # A copy of a remote env taken before that env was reset may lack the state its compute_reward
            # reads: take a fresh copy (the remote env has been stepped by now) and try once more.
            self.set_env(self.env)
            batch = self.replay.sample(batch_size, beta=beta)
        self._first_sample_done = True
        if self._infos_read is None:
            reads = reads_infos(
                self.goal_functions.compute_reward,
                batch["next_achieved_goal"],
                batch["desired_goal"],
                batch.get("infos"),
            )
            self._check_infos_kept(reads)
            self._infos_read = reads is not False
            if self.store_infos is None and not self._infos_read:
                self.replay.storage.store_infos(False)
                batch.pop("infos", None)
        return batch

    def to_samples(self, batch: dict[str, np.ndarray], env: VecNormalize | None = None) -> Samples:
        """Turn a core batch into SB3 samples: normalize, flatten when the policy is flat, to tensors.

        The batch's arrays are new (the core never hands out views of its storage), so on the CPU they
        become tensors without a copy.
        """
        keys = self.keys
        observations = {key: batch[key] for key in keys}
        next_observations = {key: batch["next_" + key] for key in keys}
        rewards = batch["reward"].reshape(-1, 1)
        if env is not None:
            observations = self._normalize_obs(observations, env)  # type: ignore[assignment]
            next_observations = self._normalize_obs(next_observations, env)  # type: ignore[assignment]
            rewards = self._normalize_reward(rewards, env)
        dones = batch["terminated"].astype(np.float32).reshape(-1, 1)
        tensor = self._tensor
        # n-step samples: gamma ** steps of each, which SB3's train() uses in place of gamma.
        discounts = tensor(batch["discounts"].reshape(-1, 1)) if "discounts" in batch else None
        if self.flat:
            assert self.layout is not None
            return ReplayBufferSamples(
                observations=tensor(self.layout.flatten(observations)),
                actions=tensor(batch["action"]),
                next_observations=tensor(self.layout.flatten(next_observations)),
                dones=tensor(dones),
                rewards=tensor(rewards),
                discounts=discounts,
            )
        return DictReplayBufferSamples(
            observations=self._tensors(observations),
            actions=tensor(batch["action"]),
            next_observations=self._tensors(next_observations),
            dones=tensor(dones),
            rewards=tensor(rewards),
            discounts=discounts,
        )

    def _tensor(self, array: np.ndarray) -> th.Tensor:
        if self.device.type == "cpu":
            return th.from_numpy(array)
        return th.as_tensor(array, device=self.device)

    def _tensors(self, arrays: dict[str, np.ndarray]) -> dict[str, th.Tensor]:
        if self.device.type == "cpu":
            return {key: th.from_numpy(value) for key, value in arrays.items()}
        return {key: th.as_tensor(value, device=self.device) for key, value in arrays.items()}

    def update_priorities(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set priorities of sampled slots (prioritized replay); see :meth:`HindsightReplay.update_priorities`."""
        self.replay.update_priorities(indexes, priorities)

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Samples:  # type: ignore[override]
        raise NotImplementedError("Hindsight relabeling draws its own rows: call sample(batch_size, env).")


def _stacked(arrays: Any) -> np.ndarray:
    """``np.stack`` of arrays of one shape, through one ``np.concatenate`` (several times faster)."""
    return np.concatenate(arrays).reshape(len(arrays), *np.shape(arrays[0]))


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
