"""``HerReplayBuffer``: the stable-baselines3 replay buffer that relabels goals in hindsight, on the numpy core.

It is the one storage and sampling path of the SB3 layer. Code written for SB3's own buffer switches with
one import::

    from her_wrap.sb3 import HerReplayBuffer

    model = SAC("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"))

``HER`` builds the same class for its learner (``model.replay_buffer``), and stable-baselines v2's
:class:`~her_wrap.HindsightExperienceReplayWrapper` holds one and translates v2's calls to it.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.vec_env import VecNormalize
from stable_baselines3.her.her_replay_buffer import HerReplayBuffer as StableBaselinesHerReplayBuffer

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.replay import HindsightReplay
from her_wrap.core.settings import HindsightSettings
from her_wrap.envs.goal_wrapper import GoalObservationLayout, layout_space
from her_wrap.sb3.goal_functions import GoalFunctions
from her_wrap.sb3.jax_learners import shuffled_rows
from her_wrap.sb3.samples import HindsightBatch, Samples, to_samples, to_tensor
from her_wrap.sb3.step_writer import InfoProbe, StagedStepWriter, storage_fields

# Keywords that weight each sample's loss: stock train() ignores the weights, HER's weighted steps use them.
_WEIGHTED_KEYWORDS = ("prioritized", "alpha", "beta", "laber", "laber_m")


class HerReplayBuffer(InfoProbe, StagedStepWriter, StableBaselinesHerReplayBuffer):
    """Hindsight Experience Replay buffer with stable-baselines3's ``HerReplayBuffer`` constructor.

    SB3's learners build it themselves (``replay_buffer_class=HerReplayBuffer``) and pass it their env;
    ``save_replay_buffer`` / ``load_replay_buffer(path, truncate_last_traj=...)`` and ``VecNormalize`` work
    as with SB3's buffer, under ``DummyVecEnv`` and ``SubprocVecEnv`` alike. Transitions are stored in
    :class:`her_wrap.core.replay.HindsightReplay`: each observation once, goals relabeled at sample time
    (``online=True``) or frozen at episode end. It subclasses SB3's ``HerReplayBuffer`` only so that SB3's
    learners treat it as one (they pass it the env, and ``load_replay_buffer`` restores the env and
    truncates the last trajectory); it allocates none of SB3's arrays.

    .. note::
        What differs from SB3's ``HerReplayBuffer``, and why:

        - Rewards of relabeled transitions are computed in this process, one vectorized ``compute_reward``
          call per batch (SB3 calls ``env_method``: an inter-process round trip per batch under
          ``SubprocVecEnv``). A ``compute_reward`` that takes single goals only is called row by row, with
          a warning.
        - ``terminated`` of a relabeled transition is recomputed for its new goal (``compute_terminated``
          when the env has one, else False); SB3 copies the original goal's. Time-limit truncations never
          cut the bootstrap (unless ``handle_timeout_termination`` is False, as in SB3).
        - Episodes in progress can be sampled: training may start before the first episode ends.
        - Each observation is stored once, and sampling costs O(batch) instead of a pass over the whole
          buffer. Capacity: ``buffer_size`` counts rows over all envs, each env getting
          ``buffer_size // n_envs``; an episode of ``T`` steps takes ``T + 1`` rows.
        - Info dicts are kept only when ``compute_reward`` reads them (``store_infos=None``), found out by
          a probe call on the first step's data (see :class:`~her_wrap.sb3.step_writer.InfoProbe`); SB3 keeps none
          unless ``copy_info_dict=True``.
        - ``goal_selection_strategy="random"`` (any stored goal, as in stable-baselines v2) is available.
        - Prioritized replay and LaBER need per-sample weights in the learner's loss, which SB3's own
          ``train()`` ignores: they are ``her_wrap.HER(..., prioritized=True)`` / ``HER(..., laber="mean")``.

    :param buffer_size: capacity in rows over all envs (the learner passes its own ``buffer_size``)
    :param observation_space: the learner's observation space: the goal dict, or flat vectors (``MlpPolicy``
        through :class:`~her_wrap.HERGoalEnvWrapper`) with a key ``layout``
    :param action_space: the action space (the learner passes it)
    :param env: the goal env (gymnasium env, :class:`~her_wrap.HERGoalEnvWrapper` or VecEnv; the learner
        passes its own) whose ``compute_reward`` / ``compute_terminated`` reward relabeled transitions; may
        be given later with :meth:`set_env`
    :param device: torch device of the samples
    :param n_envs: envs stepped in parallel (one column of the storage each)
    :param optimize_memory_usage: must stay False, as for SB3's ``HerReplayBuffer``: each observation is
        stored once already
    :param handle_timeout_termination: a time-limit truncation keeps its bootstrap (default); False counts
        it as terminal, as SB3 does
    :param n_sampled_goal: see :class:`~her_wrap.HindsightSettings` (None: its default)
    :param goal_selection_strategy: see :class:`~her_wrap.HindsightSettings` (None: its default); SB3's own
        ``GoalSelectionStrategy`` members are taken too
    :param copy_info_dict: keep deep copies of the info dicts (and keep them: SB3's meaning of True)
    :param settings: all the hindsight settings as one object, in place of ``n_sampled_goal``,
        ``goal_selection_strategy`` and ``hindsight``; settings that weight the loss (PER, LaBER) need a
        learner whose update takes the weights (``HER`` builds the buffer this way)
    :param layout: key layout of flat observations; taken from ``env`` when not given
    :param store_infos: keep each step's info dict for ``compute_reward``: None (default) when it reads
        them, True always, False never (the first sample raises if ``compute_reward`` reads them)
    :param seed: seed of the sampling and relabeling draws (default: drawn from numpy's global generator,
        which a learner's ``seed=`` seeds before it builds its buffer, so a seeded learner samples the same
        batches run to run)
    :param gamma: discount of n-step returns (``n_steps > 1``): the learner's ``gamma``, which SB3's
        learners do not pass to their buffer
    :param shuffle_rows: return the rows of each sample in random order. SBX's learners cut one
        ``sample(batch_size * gradient_steps)`` into consecutive batches while relabeled rows come first:
        shuffled, each batch gets its share ``k / (k + 1)`` of relabeled goals (``HER`` sets it for them)
    :param check_finite: refuse a step whose observations, goals or rewards hold a NaN or an infinity,
        naming the env column and the step, before it is stored (checked as the staged steps are written,
        one ``np.isfinite`` per field and chunk; the steps before it are stored). ``HER`` also refuses such
        a step in its learner's loop, before its policy sees it. False stores them as they come
    :param hindsight: the other fields of :class:`~her_wrap.HindsightSettings` (``online``, ``goal_mix``,
        ``n_steps``, ``movement_clip``, ``movement_floor``); ``prioritized`` and ``laber`` are refused,
        naming ``her_wrap.HER``
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        env: Any = None,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        n_sampled_goal: int | None = None,
        goal_selection_strategy: GoalSelectionStrategy | str | None = None,
        copy_info_dict: bool = False,
        *,
        settings: HindsightSettings | None = None,
        layout: GoalObservationLayout | None = None,
        store_infos: bool | None = None,
        seed: int | None = None,
        gamma: float | None = None,
        shuffle_rows: bool = False,
        check_finite: bool = True,
        **hindsight: Any,
    ) -> None:
        if optimize_memory_usage:
            raise ValueError(
                "optimize_memory_usage is not supported (nor by SB3's HerReplayBuffer): this buffer stores "
                "each observation once already. Leave it False."
            )
        settings = _settings(settings, n_sampled_goal, goal_selection_strategy, hindsight)
        if settings.n_steps > 1 and gamma is None:
            raise ValueError(
                "n_steps > 1 discounts the summed rewards by the learner's gamma, which SB3's learners do not "
                "pass to their buffer: add gamma=<the learner's gamma> to replay_buffer_kwargs."
            )
        if seed is None:
            # SB3's learners seed numpy's global generator (their seed=) before building the buffer, and
            # pass it no seed: one drawn from there makes a seeded learner's samples the same run to run.
            seed = int(np.random.randint(2**31))  # noqa: NPY002  (the generator SB3 seeds)
        # SB3's HerReplayBuffer.__init__ would allocate its own arrays: only the base class's bookkeeping.
        BaseBuffer.__init__(self, buffer_size, observation_space, action_space, device=device, n_envs=n_envs)
        self.handle_timeout_termination = bool(handle_timeout_termination)
        self.copy_info_dict = bool(copy_info_dict)
        self.store_infos = True if store_infos is None and copy_info_dict else store_infos
        self.shuffle_rows = bool(shuffle_rows)
        self.check_finite = bool(check_finite)
        #: steps of every env column added so far (the step a refused one is named by)
        self.steps_added = 0
        self.layout = _observation_layout(observation_space, layout, env)
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
            discount=gamma,
            seed=seed,
        )
        self._no_flags: np.ndarray = np.zeros(self.n_envs, dtype=bool)
        self._start_probing()
        self._start_staging()
        self.env: Any = None
        self.goal_functions: GoalFunctions | None = None
        if env is not None:
            self.set_env(env)

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

    @property
    def flat(self) -> bool:
        """Whether the learner sees flat vectors (there is a key layout): samples are flattened for it."""
        return self.layout is not None

    def _dict_space(self) -> spaces.Dict:
        if self.layout is not None:
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
        # SB3's convention: the env stays out of pickles and set_env restores it. The goal functions and
        # the core's reward and terminated functions hold the env too.
        self.flush()
        state = super().__getstate__()
        state["goal_functions"] = None
        state["_first_sample_done"] = False  # its checks run again once set_env gives the env back
        state["replay"] = copy.copy(self.replay)
        state["replay"].reward_fn = state["replay"].terminated_fn = None
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
        """Store one step of every env (unnormalized observations, as SB3 passes them).

        ``obs`` is read only for envs that start an episode with this step: inside an episode it is the
        ``next_obs`` stored with the previous step. Steps are staged and written to the storage in chunks
        (:meth:`flush`), before anything reads it: a sample sees every step added before it. The arrays
        given are kept until then, not copied (SB3 hands each step new arrays).

        :param infos: one info dict per env (a list, or the tuple ``SubprocVecEnv`` gives)
        """
        n_envs = self.n_envs
        self.steps_added += 1
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
        """Draw a relabeled batch as SB3 samples (what stock ``train()`` consumes).

        Normalization (``VecNormalize``) is applied after relabeling, to the new goals too.
        """
        samples = self.to_samples(self._draw(batch_size, self.replay.settings.beta), env)
        return shuffled_rows(samples, self.replay.rng) if self.shuffle_rows else samples

    def sample_batch(
        self, batch_size: int, env: VecNormalize | None = None, beta: float | None = None
    ) -> HindsightBatch:
        """Draw a relabeled batch with its importance weights (prioritized) and storage slots.

        :param beta: PER's importance exponent (None: the settings' ``beta``)
        """
        batch = self._draw(batch_size, self.replay.settings.beta if beta is None else beta)
        weights = batch.get("weights")
        return HindsightBatch(
            self.to_samples(batch, env),
            None if weights is None else to_tensor(weights, self.device),
            batch["indexes"],
        )

    def _draw(self, batch_size: int, beta: float) -> dict[str, np.ndarray]:
        """A core batch; every check that needs doing once is done at the first one after ``set_env``."""
        if self._staged:
            self.flush()
        if self._first_sample_done:
            return self.replay.sample(batch_size, beta=beta)
        return self._first_sample(batch_size, beta)

    def _first_sample(self, batch_size: int, beta: float) -> dict[str, np.ndarray]:
        """The first sample after ``set_env``: settle, on real data, what the first ``add`` could not."""
        if self.goal_functions is None:
            raise ValueError(
                "No compute_reward is set for relabeled transitions (the buffer was loaded from a file?): "
                "call set_env(env) with the goal env first."
            )
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
        return to_samples(batch, self.keys, self.device, self.layout, env)

    def update_priorities(self, indexes: np.ndarray, priorities: np.ndarray) -> None:
        """Set priorities of sampled slots (prioritized replay); see :meth:`HindsightReplay.update_priorities`."""
        self.replay.update_priorities(indexes, priorities)

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Samples:  # type: ignore[override]
        raise NotImplementedError("Hindsight relabeling draws its own rows: call sample(batch_size, env).")


def hindsight_settings(**given: Any) -> HindsightSettings:
    """:class:`HindsightSettings` from keyword arguments where None means "the default", as the signatures of
    ``HER`` and :class:`HerReplayBuffer` write it: the defaults live in :class:`HindsightSettings` alone.

    :raises ValueError: for a name that is not a setting (with the closest one), or a bad value
    """
    return HindsightSettings.from_dict({name: value for name, value in given.items() if value is not None})


def _settings(
    settings: HindsightSettings | None,
    n_sampled_goal: int | None,
    goal_selection_strategy: Any,
    hindsight: dict[str, Any],
) -> HindsightSettings:
    """The buffer's settings: ``settings`` as given, or built from the hindsight keywords given."""
    given = {
        "n_sampled_goal": n_sampled_goal,
        "goal_selection_strategy": goal_selection_strategy,
        **hindsight,
    }
    given = {name: value for name, value in given.items() if value is not None}
    if settings is not None:
        if given:
            raise TypeError(
                f"HerReplayBuffer got settings= and {sorted(given)}: put them in the settings "
                "(settings.replace(...)) or leave settings out."
            )
        return settings
    if any(given.get(name) not in (None, False) for name in _WEIGHTED_KEYWORDS):
        raise ValueError(
            "Prioritized replay and LaBER weight each sample's loss, which the learners' own train() "
            "ignores: use her_wrap.HER(policy, env, SAC, prioritized=True) or HER(..., laber='mean') "
            "instead of replay_buffer_class=HerReplayBuffer."
        )
    return hindsight_settings(**given)


def _observation_layout(
    observation_space: spaces.Space, layout: GoalObservationLayout | None, env: Any
) -> GoalObservationLayout | None:
    """The key layout of flat observations (None for goal dicts); the env's when none is given."""
    if isinstance(observation_space, spaces.Dict):
        return None
    if not isinstance(observation_space, spaces.Box):
        raise ValueError(
            f"Hindsight relabeling needs goal dict observations, got {type(observation_space).__name__}: "
            "use a goal env (observation, achieved_goal, desired_goal) and MultiInputPolicy."
        )
    if layout is None:
        layout = getattr(env, "layout", None)
    if layout is None:
        raise ValueError(
            "The learner sees flat observations but no key layout was given: pass the HERGoalEnvWrapper as "
            "env (or layout=GoalObservationLayout.from_space(dict_space)), or use MultiInputPolicy."
        )
    return layout
