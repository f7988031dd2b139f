"""The ``HER`` model class: any SB3 off-policy learner, made goal-conditioned with hindsight relabeling."""

from __future__ import annotations

import copy
import inspect
import pathlib
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.save_util import load_from_pkl, save_to_pkl
from stable_baselines3.common.type_aliases import MaybeCallback
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.settings import LaBERVariant
from her_wrap.envs.registry import make_goal_env
from her_wrap.sb3.batch_sources import BatchSource, UniformSource, make_batch_source
from her_wrap.sb3.distributed import with_distributed_training
from her_wrap.sb3.her_callbacks import as_her_callback
from her_wrap.sb3.her_replay_buffer import HerReplayBuffer, hindsight_settings
from her_wrap.sb3.jax_learners import check_jax_learner, is_jax_learner, jax_learner_class
from her_wrap.sb3.learner_attributes import LearnerAttributes
from her_wrap.sb3.learner_env import DEFAULT_NORMALIZE_KWARGS, normalize_kwargs_of, prepare_learner_env
from her_wrap.sb3.learners import check_keeps_replay_buffer, resolve_model_class
from her_wrap.sb3.persistence import (
    SavedHER,
    read_metadata,
    read_normalizer,
    read_saved_her,
    write_her_members,
)
from her_wrap.sb3.policies import resolve_layer_norm_policy, with_policy_defaults
from her_wrap.sb3.train_steps import (
    TrainFromSourceMixin,
    has_stock_actor_critic_train,
    train_from_source_class,
)
from her_wrap.sb3.update_options import UpdateOptions


class HER(LearnerAttributes):
    """Hindsight Experience Replay around a stable-baselines3 off-policy learner.

    The stable-baselines (v2) ``HER`` API on gymnasium 1.x and SB3 2.x::

        model = HER("MlpPolicy", BitFlippingEnv(n_bits=15), DQN, n_sampled_goal=4,
                    goal_selection_strategy="future", verbose=1)
        model.learn(50_000)
        model.save("her_bitflip")
        model = HER.load("her_bitflip", env=env)
        action, _ = model.predict(obs, deterministic=True)   # obs: the env's own dict

    The learner is built by composition and reachable as :attr:`model`; its replay buffer is a
    :class:`~her_wrap.sb3.HerReplayBuffer`.

    :param policy: ``"MlpPolicy"`` (the learner sees one flat vector: observation, achieved goal, desired
        goal, through :class:`~her_wrap.HERGoalEnvWrapper`) or ``"MultiInputPolicy"`` (dict observations),
        or a policy class
    :param env: goal env (dict observations with ``observation``, ``achieved_goal``, ``desired_goal`` and a
        ``compute_reward``), its gymnasium id, or an SB3 VecEnv of goal envs (``VecNormalize`` allowed)
    :param model_class: DQN, SAC, TD3, DDPG (stable-baselines3), TQC, QRDQN (sb3-contrib), SBX's (JAX)
        SAC, TQC, TD3, DDPG, CrossQ, DQN (see :mod:`her_wrap.sb3.jax_learners`), or one of their names
        (``"sac"``, ``"sbx.crossq"``)
    :param n_sampled_goal: with ``goal_selection_strategy`` and the keywords from ``online`` to ``beta``,
        the hindsight settings, each documented and checked by :class:`~her_wrap.HindsightSettings` (None:
        its default). ``prioritized`` and ``laber`` make the learner train with HER's own (weighted) train step;
        PER's ``beta`` is annealed linearly to 1 over ``learn``
    :param store_infos: keep each step's info dict for ``compute_reward``: see :class:`~her_wrap.sb3.HerReplayBuffer`
    :param check_finite: refuse NaN or infinite env data before it is stored (see the same class)
    :param normalize: running mean/std normalization of observations and goals (``True``, or a dict of
        ``VecNormalize`` arguments over :data:`DEFAULT_NORMALIZE_KWARGS`). Stored transitions stay raw;
        every batch, relabeled goals included (with ``desired_goal``'s statistics), is normalized at
        sample time. A ``VecNormalize`` passed in ``env`` is used as it is (leave ``normalize`` False).
        The statistics are saved in the model zip and applied by :meth:`predict` to raw dict observations.
    :param clip_target: clip the critic's TD target to the range of returns: ``True`` for the -1 / 0
        rewards of goal envs (``(-1 / (1 - gamma), 0)``), or a ``(low, high)`` pair. Off by default
    :param action_l2: weight of an L2 penalty on the actor's actions (0: off)
    :param random_action_prob: probability of a uniformly random action at each exploration step
        (continuous-action learners; 0: off)
    :param target_update_per_cycle: move target networks once per ``train()`` call instead of after every
        gradient step (off by default). See :class:`~her_wrap.sb3.update_options.UpdateOptions` for these
        four; any of them makes the learner train with HER's own train step
    :param model_kwargs: everything else goes to the learner (``learning_rate``, ``buffer_size``,
        ``batch_size``, ``policy_kwargs``, ``seed``, ``verbose``...). ``policy_kwargs=dict(layer_norm=True)``
        builds DDPG's and TD3's networks with LayerNorm, ``actor_average=RATE`` gives them greedy actions
        from a running average of the actor (:mod:`her_wrap.sb3.policies`)
    """

    #: refuse NaN or infinite env data (a loaded model checks again unless this is set to False)
    check_finite: bool = True

    def __init__(
        self,
        policy: str | type,
        env: gym.Env | VecEnv | str,
        model_class: type[OffPolicyAlgorithm] | str,
        n_sampled_goal: int | None = None,
        goal_selection_strategy: str | GoalSelectionStrategy | None = None,
        *,
        online: bool | None = None,
        laber: str | LaBERVariant | None = None,
        laber_m: int | None = None,
        goal_mix: Mapping[str, float] | None = None,
        n_steps: int | None = None,
        movement_clip: float | None = None,
        movement_floor: float | None = None,
        prioritized: bool | None = None,
        alpha: float | None = None,
        beta: float | None = None,
        store_infos: bool | None = None,
        normalize: bool | dict[str, Any] = False,
        clip_target: bool | tuple[float, float] = False,
        action_l2: float = 0.0,
        random_action_prob: float = 0.0,
        target_update_per_cycle: bool = False,
        check_finite: bool = True,
        _init_setup_model: bool = True,
        **model_kwargs: Any,
    ) -> None:
        self.check_finite = bool(check_finite)
        if env is None:
            raise ValueError("HER needs an env to build its learner; pass a goal env, its id or a VecEnv.")
        for key in ("replay_buffer_class", "replay_buffer_kwargs"):
            if key in model_kwargs:
                raise ValueError(
                    f"HER supplies the learner's replay buffer: remove {key}= (set n_sampled_goal, "
                    "goal_selection_strategy, online, prioritized or laber on HER instead)."
                )
        if isinstance(model_kwargs.get("policy_kwargs"), dict):
            # SB3 writes into the policy_kwargs it is given (SAC adds use_sde): keep the caller's intact.
            model_kwargs["policy_kwargs"] = with_policy_defaults(copy.deepcopy(model_kwargs["policy_kwargs"]))
        self._configure(
            SavedHER(
                model_class=resolve_model_class(model_class),
                policy=policy,
                layout=None,
                settings=hindsight_settings(
                    n_sampled_goal=n_sampled_goal,
                    goal_selection_strategy=goal_selection_strategy,
                    online=online,
                    prioritized=prioritized,
                    alpha=alpha,
                    beta=beta,
                    laber=laber,
                    laber_m=laber_m,
                    goal_mix=goal_mix,
                    n_steps=n_steps,
                    movement_clip=movement_clip,
                    movement_floor=movement_floor,
                ),
                store_infos=store_infos,
                normalize_kwargs=normalize_kwargs_of(normalize, model_kwargs.get("gamma")),
                update_options=UpdateOptions(
                    clip_target=_clip_bounds(clip_target, model_class, model_kwargs.get("gamma")),
                    action_l2=action_l2,
                    random_action_prob=random_action_prob,
                    target_update_per_cycle=target_update_per_cycle,
                ),
            ),
            normalizer=None,
        )
        learner_env = self._use_env(env)
        # Any: every concrete learner takes _init_setup_model, their OffPolicyAlgorithm base does not.
        learner_class: Any = self._learner_class()
        # policy_kwargs layer_norm / actor_average on SB3's DDPG / TD3: her_wrap's policy (her_wrap.sb3.policies).
        learner_policy = resolve_layer_norm_policy(policy, learner_class, model_kwargs.get("policy_kwargs"))
        self.model: OffPolicyAlgorithm = learner_class(
            learner_policy, learner_env, _init_setup_model=False, **model_kwargs
        )
        if self.update_options.random_action_prob > 0 and not isinstance(
            self.model.action_space, gym.spaces.Box
        ):
            raise ValueError(
                "random_action_prob applies to continuous actions (SAC, TD3, DDPG, TQC); DQN and QRDQN "
                "explore with exploration_initial_eps / exploration_final_eps instead."
            )
        if _init_setup_model:
            buffer = self._new_replay_buffer()
            self._install_buffer(buffer)
            self.model._setup_model()
            check_keeps_replay_buffer(self.model, buffer)
            self._attach_batch_source()

    # ------------------------------------------------------------------ construction
    def _configure(self, saved: SavedHER, normalizer: VecNormalize | None) -> None:
        """Set everything but the learner and its env: what ``__init__`` and :meth:`load` share."""
        self.model_class = saved.model_class
        self.policy_argument = saved.policy
        self.settings = saved.settings
        self.update_options = saved.update_options
        self.store_infos = saved.store_infos
        self.normalize_kwargs = saved.normalize_kwargs
        self.normalizer = normalizer
        self.normalizes_observations = normalizer is not None
        self.layout = saved.layout
        self._goal_env: Any = None

    def _saved(self) -> SavedHER:
        kept = ("model_class", "layout", "settings", "store_infos", "normalize_kwargs", "update_options")
        return SavedHER(policy=self.policy_argument, **{name: getattr(self, name) for name in kept})

    def _use_env(self, env: gym.Env | VecEnv | str) -> Any:
        """Take a goal env for relabeling and return the env the learner steps."""
        if isinstance(env, str):
            env = make_goal_env(env)
        # The one place the policy decides whether the learner sees flat vectors: it gets a key layout
        # for them, and everything after (buffer, predict, load) asks whether there is one.
        flat = "MultiInput" not in getattr(self.policy_argument, "__name__", str(self.policy_argument))
        prepared = prepare_learner_env(
            env, flat=flat, normalize_kwargs=self.normalize_kwargs, normalizer=self.normalizer
        )
        self._goal_env = prepared.goal_env
        self.layout = prepared.layout
        self.normalizer = prepared.normalizer
        self.normalizes_observations = prepared.normalizes_observations
        return prepared.learner_env

    def _install_buffer(self, buffer: HerReplayBuffer) -> None:
        # SB3 annotates replay_buffer as its ReplayBuffer; the learner calls only what HerReplayBuffer has.
        self.model.replay_buffer = buffer  # type: ignore[assignment]

    def _learner_class(self) -> type[OffPolicyAlgorithm]:
        if is_jax_learner(self.model_class):
            check_jax_learner(self.model_class, self.policy_argument, self.settings, self.update_options)
            return jax_learner_class(self.model_class)
        weighted = (
            self.settings.weighted
            or not self.update_options.is_default
            or has_stock_actor_critic_train(self.model_class)
        )
        return train_from_source_class(self.model_class) if weighted else self.model_class

    def _new_replay_buffer(self) -> HerReplayBuffer:
        learner = self.model
        return HerReplayBuffer(
            learner.buffer_size,
            learner.observation_space,
            learner.action_space,
            self._goal_env,
            device=learner.device,
            n_envs=learner.n_envs,
            settings=self.settings,
            layout=self.layout,
            store_infos=self.store_infos,
            seed=learner.seed,
            gamma=learner.gamma,
            shuffle_rows=is_jax_learner(self.model_class),
            check_finite=self.check_finite,
        )

    def _attach_batch_source(self) -> None:
        if isinstance(self.model, TrainFromSourceMixin):
            source: BatchSource | None = make_batch_source(self.replay_buffer, self.settings)
            if source is None:
                source = UniformSource(self.replay_buffer)
            self.model.batch_source = source
            self.model.update_options = self.update_options

    # ------------------------------------------------------------------ the SB3 model API
    @property
    def flat(self) -> bool:
        """Whether the learner sees flat vectors (``MlpPolicy``): it has a key layout for them."""
        return self.layout is not None

    @property
    def replay_buffer(self) -> HerReplayBuffer:
        """The learner's replay buffer."""
        buffer = self.model.replay_buffer
        assert isinstance(buffer, HerReplayBuffer)
        return buffer

    def learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int | None = 4,
        tb_log_name: str = "HER",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> HER:
        """Train the learner; see ``OffPolicyAlgorithm.learn``.

        A run that resets the env closes the episodes the buffer had in progress. In a process group of
        several workers, the workers train one learner together (see :mod:`her_wrap.sb3.distributed`).

        Callbacks see this HER model as their ``model`` (see :mod:`her_wrap.sb3.her_callbacks`): SB3's
        ``EvalCallback`` evaluates with :meth:`predict` on the env's own observations and saves
        ``best_model.zip`` with :meth:`save`. ``log_interval`` counts episodes between log tables; ``None``
        logs none.
        """
        if reset_num_timesteps or self.model._last_obs is None:
            self.replay_buffer.end_open_episodes()
        self.model.learn(
            total_timesteps,
            callback=with_distributed_training(as_her_callback(callback, self), self.normalizer),
            # SB3 annotates learn's log_interval as int but hands it to collect_rollouts, which takes None.
            log_interval=log_interval,  # type: ignore[arg-type]
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )
        return self

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Action for an observation: the env's own dict (one or a batch) or, with ``MlpPolicy``, flat vectors.

        .. note::
            Under normalization, observations are taken as the env given to HER returns them. When HER
            normalizes (``normalize=``, or a loaded model given a plain env or none), a dict observation is
            the env's raw one and is normalized here with :attr:`normalizer`'s statistics. When the env
            given was already a ``VecNormalize``, its observations come normalized and are used as they
            are (SB3's convention). Flat vectors are never normalized here: they are the learner's inputs.
        """
        if self.normalizes_observations and isinstance(observation, dict):
            assert self.normalizer is not None
            observation = self.normalizer.normalize_obs(observation)  # type: ignore[assignment]
        if self.layout is not None and isinstance(observation, dict):
            observation = self.layout.flatten(observation)
        return self.model.predict(observation, state, episode_start, deterministic)

    def set_env(self, env: gym.Env | VecEnv | str, force_reset: bool = True) -> None:
        """Give the learner (and relabeling) a new goal env of the same task."""
        learner_env = self._use_env(env)
        self.model.set_env(learner_env, force_reset=force_reset)
        self.replay_buffer.set_env(self._goal_env)
        if force_reset:
            self.replay_buffer.end_open_episodes()

    # ------------------------------------------------------------------ files
    def save(self, path: str | pathlib.Path, exclude: list[str] | None = None) -> None:
        """Save the learner, the HER settings (key layout included) and normalization statistics to one zip.

        The statistics are the ``VecNormalize`` pickled without its env, as ``vecnormalize.pkl`` in the zip
        (SB3's own load skips it).

        :param path: file path; ``.zip`` is appended when it has no suffix (as SB3 does)
        """
        path = pathlib.Path(path)
        if path.suffix == "":
            path = path.with_suffix(".zip")
        self.model.save(path, exclude=exclude)
        write_her_members(path, self._saved(), self.normalizer)

    @classmethod
    def load(
        cls,
        path: str | pathlib.Path,
        env: gym.Env | VecEnv | str | None = None,
        custom_objects: dict[str, Any] | None = None,
        *,
        normalize_training: bool = False,
        **kwargs: Any,
    ) -> HER:
        """Load a model saved by :meth:`save`. Without ``env`` it can predict (the key layout and the
        normalization statistics are saved).

        :param path: the zip (``.zip`` may be left out)
        :param env: goal env to keep training or evaluating with; its spaces must match the saved ones.
            A model saved with normalization statistics wraps it in a ``VecNormalize`` holding them, unless
            it is a VecEnv that already normalizes (kept as it is, with its own statistics)
        :param custom_objects: passed to SB3's load
        :param normalize_training: keep updating the restored statistics while training (default: frozen,
            as for evaluation)
        :param kwargs: passed to SB3's load (``device``, ``print_system_info``, attribute overrides)
        """
        path = pathlib.Path(path)
        if not path.exists() and path.with_suffix(".zip").exists():
            path = path.with_suffix(".zip")
        saved = read_saved_her(path)
        normalizer = read_normalizer(path)
        if normalizer is not None:
            normalizer.training = normalize_training
        her = cls.__new__(cls)
        her._configure(saved, normalizer)
        learner_env = her._use_env(env) if env is not None else None
        if saved.layout is not None and her.layout != saved.layout:
            raise ValueError(
                f"The env's goal observation layout {her.layout} differs from the saved model's "
                f"{saved.layout}: pass an env of the task the model was trained on."
            )
        her.layout = saved.layout
        try:
            her.model = her._learner_class().load(
                path, env=learner_env, custom_objects=custom_objects, **kwargs
            )
        except ValueError as error:
            if "spaces do not match" in str(error):
                raise ValueError(
                    f"The env's spaces differ from the saved model's ({error}): pass an env of the task the "
                    "model was trained on."
                ) from error
            raise
        her._install_buffer(her._new_replay_buffer())
        her._attach_batch_source()
        return her

    def save_replay_buffer(self, path: str | pathlib.Path) -> None:
        """Pickle the replay buffer (its goal functions are left out; :meth:`load_replay_buffer` restores them)."""
        save_to_pkl(path, self.replay_buffer, self.model.verbose)

    def load_replay_buffer(self, path: str | pathlib.Path, truncate_last_traj: bool = True) -> None:
        """Load a buffer saved by :meth:`save_replay_buffer`.

        :param truncate_last_traj: close the episodes the buffer had in progress, with a warning when there
            are any (SB3's default). False keeps them open, so that training that goes on from the same
            env state (``learn(..., reset_num_timesteps=False)``) continues them; a ``learn`` that resets
            the env closes them anyway.
        """
        buffer = load_from_pkl(path, self.model.verbose)
        if not isinstance(buffer, HerReplayBuffer):
            raise ValueError(
                f"{path} holds a {type(buffer).__name__}, not a her_wrap replay buffer: load files written "
                "by HER.save_replay_buffer."
            )
        buffer.device = self.model.device
        if self._goal_env is not None:
            buffer.set_env(self._goal_env)
        if truncate_last_traj:
            buffer.truncate_last_trajectory()
        self._install_buffer(buffer)
        self._attach_batch_source()


def _clip_bounds(
    clip_target: bool | tuple[float, float], model_class: type | str, gamma: float | None
) -> tuple[float, float] | None:
    """``clip_target=`` as bounds: ``True`` is the return range of -1 / 0 rewards under the learner's gamma."""
    if clip_target is False or clip_target is None:
        return None
    if clip_target is True:
        if gamma is None:
            gamma = inspect.signature(resolve_model_class(model_class)).parameters["gamma"].default
        return UpdateOptions.sparse_reward_bounds(float(gamma))  # type: ignore[arg-type]
    return clip_target


__all__ = ["DEFAULT_NORMALIZE_KWARGS", "HER", "make_goal_env", "read_metadata", "read_normalizer"]
