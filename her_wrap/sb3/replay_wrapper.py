"""The stable-baselines3 replay buffer that relabels goals in hindsight, on the numpy core.

:class:`HindsightExperienceReplayWrapper` is the one storage and sampling path of the SB3 layer: ``HER``
builds it with :meth:`~HindsightExperienceReplayWrapper.for_learner`, the drop-in
:class:`her_wrap.sb3.HerReplayBuffer` is this class behind SB3's own constructor signature, and
stable-baselines v2's form wraps a learner's buffer (see :mod:`her_wrap.sb3.stable_baselines_v2`).
"""

from __future__ import annotations

import copy
import numbers
from typing import Any, overload

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer, ReplayBuffer
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecNormalize
from stable_baselines3.her.her_replay_buffer import HerReplayBuffer as StableBaselinesHerReplayBuffer

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.replay import HindsightReplay
from her_wrap.core.settings import HindsightSettings
from her_wrap.envs.goal_wrapper import GoalObservationLayout, HERGoalEnvWrapper
from her_wrap.envs.goal_wrapper import layout_space as _layout_space
from her_wrap.lazy_imports import lazy_getattr
from her_wrap.sb3 import stable_baselines_v2 as v2
from her_wrap.sb3.goal_functions import GoalFunctions
from her_wrap.sb3.info_probe import InfoProbe
from her_wrap.sb3.samples import HindsightBatch, Samples, to_samples, to_tensor
from her_wrap.sb3.step_writer import StagedStepWriter, storage_fields

# layout_space moved beside flat_observation_space; reading it here warns.
__getattr__ = lazy_getattr(__name__, {"layout_space": "her_wrap.envs.goal_wrapper"}, moved=True)


class HindsightExperienceReplayWrapper(InfoProbe, StagedStepWriter, StableBaselinesHerReplayBuffer):
    """Replay buffer for stable-baselines3 off-policy learners with hindsight goal relabeling.

    It speaks SB3's buffer interface (``add(obs, next_obs, action, reward, done, infos)``,
    ``sample(batch_size, env)``, ``set_env``, ``truncate_last_trajectory``) and stable-baselines v2's
    (``add(obs_t, action, reward, obs_tp1, done[, info])``, ``can_sample(n_samples)``), and stores
    transitions in :class:`her_wrap.core.replay.HindsightReplay`: each observation once, goals relabeled at
    sample time (``online=True``) or frozen at episode end. It subclasses SB3's ``HerReplayBuffer`` only so
    that SB3's learners treat it as one (they pass it the env, and ``load_replay_buffer`` restores the env
    and truncates the last trajectory); it allocates none of SB3's arrays.

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
    it, found out on real data (see :mod:`her_wrap.sb3.info_probe`).

    The constructor takes two forms, told apart by the first argument.

    SB3's form, ``HindsightExperienceReplayWrapper(buffer_size, observation_space, action_space, env=None,
    device="auto", n_envs=1, *, settings=None, layout=None, ...)``:

    - ``buffer_size``: rows over all envs (see Capacity above)
    - ``observation_space``: the learner's observation space: the goal dict, or flat vectors with ``layout``
    - ``action_space``: the learner's action space
    - ``env``: the goal env (gymnasium env, :class:`~her_wrap.HERGoalEnvWrapper` or VecEnv) whose
      ``compute_reward`` / ``compute_terminated`` relabeled transitions use; may be given later with
      :meth:`set_env`
    - ``device``: torch device of the samples
    - ``n_envs``: envs stepped in parallel (one column of the storage each)
    - ``settings``: what to relabel and how to sample (default ``HindsightSettings()``: ``future``,
      ``k = 4``, online, uniform)
    - ``layout``: key layout of flat observations; needed when the learner sees flat vectors
      (``MlpPolicy`` through ``HERGoalEnvWrapper``); taken from ``env`` when it has one
    - ``store_infos``: keep the info dict of each step for ``compute_reward``: None finds out whether
      ``compute_reward`` reads them (see Infos above); True always; False never (the first sample raises
      if ``compute_reward`` reads them)
    - ``copy_info_dict``: keep deep copies of the info dicts; with ``store_infos=None`` it also keeps them
      without asking (SB3's ``copy_info_dict=True`` means the rewards need them)
    - ``handle_timeout_termination``: a step whose info says ``TimeLimit.truncated`` keeps its bootstrap
      (default); False counts it as terminal, as SB3 does with that setting
    - ``seed``: seed of the relabeling and sampling draws
    - ``discount``: ``gamma`` of n-step returns (``settings.n_steps > 1``); ``for_learner`` passes the learner's

    stable-baselines v2's form, ``HindsightExperienceReplayWrapper(replay_buffer, n_sampled_goal,
    goal_selection_strategy, wrapped_env, *, online=True, store_infos=None, seed=None)``, a wrapper around a
    learner's buffer (give it to the learner: ``model.replay_buffer = wrapper``):

    - ``replay_buffer``: an SB3 ``ReplayBuffer`` (or ``DictReplayBuffer``), or an off-policy learner whose
      buffer is wrapped. Its capacity, spaces, device and ``n_envs`` are taken (and a learner's ``gamma``
      and seed). The transitions it holds move into the wrapper, oldest first: the capacity grows so that
      all fit, and their infos carry only ``TimeLimit.truncated`` (SB3's buffers keep no infos). The
      buffer itself is only read.
    - ``n_sampled_goal``: ``k``: a share ``k / (k + 1)`` of every batch gets new goals
    - ``goal_selection_strategy``: ``"future"``, ``"final"``, ``"episode"`` or ``"random"`` (or the enum)
    - ``wrapped_env``: the :class:`~her_wrap.HERGoalEnvWrapper` whose flat observations ``add`` takes and
      whose ``compute_reward`` rewards relabeled goals
    - ``online``: relabel at sample time (default), or freeze ``k`` goals per transition at episode end (v2)
    - ``store_infos``, ``seed``: as in SB3's form (the seed defaults to the learner's, else to a draw from
      numpy's global generator, which a seeded learner has seeded)
    """

    @overload
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
    ) -> None: ...

    @overload
    def __init__(
        self,
        replay_buffer: ReplayBuffer | OffPolicyAlgorithm,
        n_sampled_goal: int,
        goal_selection_strategy: str | GoalSelectionStrategy,
        wrapped_env: HERGoalEnvWrapper,
        *,
        online: bool = True,
        store_infos: bool | None = None,
        seed: int | None = None,
    ) -> None: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not v2.wraps_a_buffer(args, kwargs):
            self._build(*args, **kwargs)
            return
        # Every v2 argument is checked before the wrapped buffer is read; it is never written.
        arguments, stored = v2.constructor_arguments(*args, **kwargs)
        self._build(**arguments)
        if stored is not None:
            for step in v2.stored_steps(stored):
                self.add(*step)
            self.flush()

    def _build(
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
        if not isinstance(buffer_size, numbers.Real):
            raise TypeError(
                f"HindsightExperienceReplayWrapper takes SB3's form {v2.SB3_FORM} or stable-baselines v2's "
                f"{v2.V2_FORM}; its first argument is a {type(buffer_size).__name__}: neither a capacity nor "
                "an SB3 ReplayBuffer or off-policy learner."
            )
        # SB3's HerReplayBuffer.__init__ would allocate its own arrays: only the base class's bookkeeping.
        BaseBuffer.__init__(self, buffer_size, observation_space, action_space, device=device, n_envs=n_envs)
        self.handle_timeout_termination = bool(handle_timeout_termination)
        self.copy_info_dict = bool(copy_info_dict)
        self.store_infos = True if store_infos is None and copy_info_dict else store_infos
        if layout is None and env is not None:
            layout = getattr(env, "layout", None)
        self.flat: bool = isinstance(self.observation_space, spaces.Box)
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
        self.layout: GoalObservationLayout | None = layout
        dict_space = self._dict_space()
        self.keys = tuple(dict_space.spaces)
        observation_fields, step_fields = storage_fields(dict_space, self.action_space, self.action_dim)
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
        self._no_flags: np.ndarray = np.zeros(self.n_envs, dtype=bool)
        self._start_probing()
        self._start_staging()
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
        return cls(
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
        return self.replay.settings.prioritized

    def _dict_space(self) -> spaces.Dict:
        if self.flat:
            assert self.layout is not None
            return _layout_space(self.layout)
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
    def add(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Store one step of every env: SB3's ``add(obs, next_obs, action, reward, done, infos)``, or
        stable-baselines v2's ``add(obs_t, action, reward, obs_tp1, done[, info])`` (flat observations of
        the wrapped :class:`~her_wrap.HERGoalEnvWrapper`, or goal dicts; one env's step without an env axis).

        Told apart by the arguments: v2's has five (or a sixth that is one info dict, not SB3's sequence).
        """
        if len(args) == 6 and not kwargs and isinstance(args[5], list | tuple):
            self._add(*args)
        elif v2.is_v2_add(args, kwargs):
            self._add(*v2.sb3_add_arguments(self.n_envs, self._dict_space(), self.layout, *args, **kwargs))
        else:
            self._add(*args, **kwargs)

    def can_sample(self, n_samples: int) -> bool:
        """Whether ``n_samples`` transitions are stored (stable-baselines v2's check before a sample)."""
        return self.size() >= n_samples

    def _add(
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
        observation, next_observation = self._as_dict(obs), self._as_dict(next_obs)
        first = self._awaiting_first_add
        if first:
            self._first_add(observation, next_observation, infos)
        if self._copy_infos:
            infos = copy.deepcopy(infos)
        step = (observation, next_observation, action, reward, terminated, truncated, done, infos)
        self._stage(step, write_now=first)

    def _as_dict(self, obs: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if isinstance(obs, dict):
            return obs
        assert self.layout is not None
        return self.layout.unflatten(obs)

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
            None if weights is None else to_tensor(weights, self.device),
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
        self._settle_infos(batch)
        return batch

    def to_samples(self, batch: dict[str, np.ndarray], env: VecNormalize | None = None) -> Samples:
        """Turn a core batch into SB3 samples: normalize, flatten when the policy is flat, to tensors."""
        return to_samples(batch, self.keys, self.device, self.layout if self.flat else None, env)

    def update_priorities(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set priorities of sampled slots (prioritized replay); see :meth:`HindsightReplay.update_priorities`."""
        self.replay.update_priorities(indexes, priorities)

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Samples:  # type: ignore[override]
        raise NotImplementedError("Hindsight relabeling draws its own rows: call sample(batch_size, env).")
