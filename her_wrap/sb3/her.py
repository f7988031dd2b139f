"""The ``HER`` model class: any SB3 off-policy learner, made goal-conditioned with hindsight relabeling."""

from __future__ import annotations

import copy
import importlib
import json
import pathlib
import pickle
import zipfile
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.save_util import load_from_pkl, save_to_pkl
from stable_baselines3.common.type_aliases import MaybeCallback
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecNormalize, unwrap_vec_normalize

from her_wrap.core.settings import HindsightSettings, LaBERVariant
from her_wrap.core.strategies import GoalSelectionStrategy
from her_wrap.envs.checks import check_goal_env
from her_wrap.envs.goal_wrapper import GoalObservationLayout, HERGoalEnvWrapper
from her_wrap.sb3.learners import resolve_model_class
from her_wrap.sb3.replay_wrapper import HindsightExperienceReplayWrapper
from her_wrap.sb3.sources import make_batch_source
from her_wrap.sb3.vec_flatten import VecGoalFlattenWrapper
from her_wrap.sb3.weighted import weighted_learner_class

METADATA_NAME = "her_wrap.json"
NORMALIZER_NAME = "vecnormalize.pkl"
FORMAT_VERSION = 1

#: ``VecNormalize`` settings of ``normalize=True``: observations and goals, not rewards, clipped at 5
#: standard deviations as the HER paper's DDPG did. A ``normalize`` dict overrides them key by key.
DEFAULT_NORMALIZE_KWARGS: dict[str, Any] = {"norm_obs": True, "norm_reward": False, "clip_obs": 5.0}


class HER:
    """Hindsight Experience Replay around a stable-baselines3 off-policy learner.

    The stable-baselines (v2) ``HER`` API on gymnasium 1.x and SB3 2.x::

        model = HER("MlpPolicy", BitFlippingEnv(n_bits=15), DQN, n_sampled_goal=4,
                    goal_selection_strategy="future", verbose=1)
        model.learn(50_000)
        model.save("her_bitflip")
        model = HER.load("her_bitflip", env=env)
        action, _ = model.predict(obs, deterministic=True)   # obs: the env's own dict

    The learner is built by composition and reachable as :attr:`model`; its replay buffer is a
    :class:`~her_wrap.HindsightExperienceReplayWrapper`.

    :param policy: ``"MlpPolicy"`` (the learner sees one flat vector: observation, achieved goal, desired
        goal, through :class:`~her_wrap.HERGoalEnvWrapper`) or ``"MultiInputPolicy"`` (dict observations),
        or a policy class
    :param env: goal env (dict observations with ``observation``, ``achieved_goal``, ``desired_goal`` and a
        ``compute_reward``), its gymnasium id, or an SB3 VecEnv of goal envs (``VecNormalize`` allowed)
    :param model_class: DQN, SAC, TD3, DDPG (stable-baselines3), TQC, QRDQN (sb3-contrib), or one of
        their lower-case names
    :param n_sampled_goal: ``k``: a share ``k / (k + 1)`` of every batch gets hindsight goals
    :param goal_selection_strategy: ``future`` (default), ``final``, ``episode`` or ``random``
    :param online: relabel at sample time (default) or once at episode end (stable-baselines v2)
    :param laber: ``"mean"``, ``"lazy"``, ``"max"`` for Large Batch Experience Replay, or None
    :param laber_m: LaBER's large batch is ``laber_m`` times the batch size
    :param prioritized: proportional prioritized replay (PER)
    :param alpha: PER priority exponent
    :param beta: PER importance exponent at the start; annealed linearly to 1 over ``learn``
    :param store_infos: keep info dicts for ``compute_reward`` (set False when it ignores them)
    :param normalize: running mean/std normalization of observations and goals (``True``, or a dict of
        ``VecNormalize`` arguments over :data:`DEFAULT_NORMALIZE_KWARGS`). HER wraps the goal env's dict
        VecEnv (built here as ``DummyVecEnv`` of ``Monitor`` when given an env or id) in ``VecNormalize``
        before flattening, so stored transitions stay raw and every batch, relabeled goals included, is
        normalized at sample time with the statistics of its key (a relabeled goal goes where
        ``desired_goal`` goes and gets ``desired_goal``'s). A ``VecNormalize`` passed in ``env`` is used
        as it is (leave ``normalize`` False). Either way the statistics are saved in the model zip,
        restored by :meth:`load` and applied by :meth:`predict` to the env's raw dict observations.
    :param model_kwargs: everything else goes to the learner (``learning_rate``, ``buffer_size``,
        ``batch_size``, ``policy_kwargs``, ``seed``, ``verbose``...)
    """

    def __init__(
        self,
        policy: str | type,
        env: gym.Env | VecEnv | str,
        model_class: type[OffPolicyAlgorithm] | str,
        n_sampled_goal: int = 4,
        goal_selection_strategy: str | GoalSelectionStrategy = "future",
        *,
        online: bool = True,
        laber: str | LaBERVariant | None = None,
        laber_m: int = 4,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        store_infos: bool = True,
        normalize: bool | dict[str, Any] = False,
        _init_setup_model: bool = True,
        **model_kwargs: Any,
    ) -> None:
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
            model_kwargs["policy_kwargs"] = copy.deepcopy(model_kwargs["policy_kwargs"])
        self.model_class = resolve_model_class(model_class)
        self.policy = policy
        self.flat = not _is_dict_policy(policy)
        self.settings = HindsightSettings(
            n_sampled_goal=n_sampled_goal,
            goal_selection_strategy=GoalSelectionStrategy.parse(goal_selection_strategy),
            online=online,
            prioritized=prioritized,
            alpha=alpha,
            beta=beta,
            laber=None if laber is None else LaBERVariant.parse(laber),
            laber_m=laber_m,
        )
        self.store_infos = bool(store_infos)
        self.normalize_kwargs = _normalize_kwargs(normalize, model_kwargs.get("gamma"))
        self.normalizer: VecNormalize | None = None
        self.normalizes_observations = False
        self.layout: GoalObservationLayout | None = None
        self._goal_env: Any = None
        learner_env = self._prepare_env(env)
        # Any: every concrete learner takes _init_setup_model, their OffPolicyAlgorithm base does not.
        learner_class: Any = self._learner_class()
        self.model: OffPolicyAlgorithm = learner_class(
            policy, learner_env, _init_setup_model=False, **model_kwargs
        )
        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ construction
    def _install_buffer(self, buffer: HindsightExperienceReplayWrapper) -> None:
        # SB3 annotates replay_buffer as its own ReplayBuffer; the learner only calls the interface
        # (add, sample, size) that the wrapper implements.
        self.model.replay_buffer = buffer  # type: ignore[assignment]

    def _learner_class(self) -> type[OffPolicyAlgorithm]:
        return weighted_learner_class(self.model_class) if self.settings.weighted else self.model_class

    def _prepare_env(self, env: Any) -> Any:
        """Check a goal env and give the learner the observations its policy takes (normalized when asked)."""
        if isinstance(env, str):
            env = make_goal_env(env)
        given_normalizer = unwrap_vec_normalize(env) if isinstance(env, VecEnv) else None
        if given_normalizer is None and (self.normalize_kwargs is not None or self.normalizer is not None):
            env = self._normalized(env)
        elif given_normalizer is not None and self.normalizer is None and self.normalize_kwargs is not None:
            raise ValueError(
                "The env is already a VecNormalize and normalize= asks HER for another one: pass the VecEnv "
                "without VecNormalize, or leave normalize False."
            )
        self.normalizer = unwrap_vec_normalize(env) if isinstance(env, VecEnv) else None
        # Observations reach predict as the env given here returns them: raw unless it normalizes itself.
        self.normalizes_observations = self.normalizer is not None and given_normalizer is None
        self._goal_env = env
        if isinstance(env, VecEnv):
            _check_goal_space(env.observation_space)
            if self.flat:
                flat_env = VecGoalFlattenWrapper(env)
                self.layout = flat_env.layout
                return flat_env
            self.layout = None
            return env
        if isinstance(env, HERGoalEnvWrapper):
            if not self.flat:
                env = env.env
                self._goal_env = env
            else:
                self.layout = env.layout
                return env
        check_goal_env(env)
        if self.flat:
            wrapped = HERGoalEnvWrapper(env)
            self.layout = wrapped.layout
            return wrapped
        self.layout = None
        return env

    def _normalized(self, env: Any) -> VecNormalize:
        """``env`` (a goal env or a VecEnv of them) under ``VecNormalize``: a new one from
        :attr:`normalize_kwargs`, or a copy of :attr:`normalizer` carrying its statistics."""
        if isinstance(env, VecEnv):
            _check_goal_space(env.observation_space)
            venv = env
        else:
            if isinstance(env, HERGoalEnvWrapper):
                env = env.env
            check_goal_env(env)
            monitored = env if is_wrapped(env, Monitor) else Monitor(env)  # as SB3 wraps a plain env
            venv = DummyVecEnv([lambda: monitored])
        if self.normalizer is None:
            assert self.normalize_kwargs is not None
            return VecNormalize(venv, **self.normalize_kwargs)
        normalizer = detached_normalizer(self.normalizer)
        normalizer.set_venv(venv)
        return normalizer

    def _setup_model(self) -> None:
        self._install_buffer(self._new_replay_buffer())
        self.model._setup_model()
        self._attach_batch_source()

    def _new_replay_buffer(self) -> HindsightExperienceReplayWrapper:
        return HindsightExperienceReplayWrapper.for_learner(
            self.model,
            self._goal_env,
            settings=self.settings,
            layout=self.layout,
            store_infos=self.store_infos,
            seed=self.model.seed,
        )

    def _attach_batch_source(self) -> None:
        if hasattr(self.model, "batch_source"):
            self.model.batch_source = make_batch_source(self.replay_buffer, self.settings)

    # ------------------------------------------------------------------ the SB3 model API
    @property
    def replay_buffer(self) -> HindsightExperienceReplayWrapper:
        """The learner's replay buffer."""
        buffer = self.model.replay_buffer
        assert isinstance(buffer, HindsightExperienceReplayWrapper)
        return buffer

    @property
    def num_timesteps(self) -> int:
        return self.model.num_timesteps

    def learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 4,
        tb_log_name: str = "HER",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> HER:
        """Train the learner; see ``OffPolicyAlgorithm.learn``.

        A run that resets the env closes the episodes the buffer had in progress.
        """
        if reset_num_timesteps or self.model._last_obs is None:
            self.replay_buffer.end_open_episodes()
        self.model.learn(
            total_timesteps,
            callback=callback,
            log_interval=log_interval,
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
        if self.flat and isinstance(observation, dict):
            assert self.layout is not None
            observation = self.layout.flatten(observation)
        return self.model.predict(observation, state, episode_start, deterministic)

    def get_env(self) -> VecEnv | None:
        """The learner's VecEnv."""
        return self.model.get_env()

    def set_env(self, env: gym.Env | VecEnv | str, force_reset: bool = True) -> None:
        """Give the learner (and relabeling) a new goal env of the same task."""
        learner_env = self._prepare_env(env)
        self.model.set_env(learner_env, force_reset=force_reset)
        self.replay_buffer.set_env(self._goal_env)
        if force_reset:
            self.replay_buffer.end_open_episodes()

    def get_parameters(self) -> dict[str, dict]:
        return self.model.get_parameters()

    def set_parameters(self, load_path_or_dict: str | dict[str, Any], exact_match: bool = True) -> None:
        self.model.set_parameters(load_path_or_dict, exact_match=exact_match)

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
        metadata = {
            "format": "her_wrap",
            "version": FORMAT_VERSION,
            "model_class": _qualified_name(self.model_class),
            "policy": self.policy if isinstance(self.policy, str) else _qualified_name(self.policy),
            "flat": self.flat,
            "layout": None if self.layout is None else self.layout.to_dict(),
            "her": {**self.settings.to_dict(), "store_infos": self.store_infos},
            "normalize": self.normalize_kwargs,
        }
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(METADATA_NAME, json.dumps(metadata, indent=2))
            if self.normalizer is not None:
                archive.writestr(NORMALIZER_NAME, pickle.dumps(detached_normalizer(self.normalizer)))

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
        metadata = read_metadata(path)
        her = cls.__new__(cls)
        her.model_class = _import_qualified(metadata["model_class"])
        her.policy = metadata["policy"]
        her.flat = bool(metadata["flat"])
        her_settings = dict(metadata["her"])
        her.store_infos = bool(her_settings.pop("store_infos", True))
        her.settings = HindsightSettings.from_dict(her_settings)
        her.layout = (
            None if metadata["layout"] is None else GoalObservationLayout.from_dict(metadata["layout"])
        )
        saved_layout = her.layout
        her.normalize_kwargs = metadata.get("normalize")
        her.normalizer = read_normalizer(path)
        if her.normalizer is not None:
            her.normalizer.training = normalize_training
        her.normalizes_observations = her.normalizer is not None
        her._goal_env = None
        learner_env = her._prepare_env(env) if env is not None else None
        if her.flat and saved_layout is not None and her.layout != saved_layout:
            raise ValueError(
                f"The env's goal observation layout {her.layout} differs from the saved model's "
                f"{saved_layout}: pass an env of the task the model was trained on."
            )
        her.layout = saved_layout
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

    def load_replay_buffer(self, path: str | pathlib.Path) -> None:
        """Load a buffer saved by :meth:`save_replay_buffer`; episodes it had in progress are closed."""
        buffer = load_from_pkl(path, self.model.verbose)
        if not isinstance(buffer, HindsightExperienceReplayWrapper):
            raise ValueError(
                f"{path} holds a {type(buffer).__name__}, not a her_wrap replay buffer: load files written "
                "by HER.save_replay_buffer."
            )
        buffer.device = self.model.device
        if self._goal_env is not None:
            buffer.set_env(self._goal_env)
        buffer.end_open_episodes()
        self._install_buffer(buffer)
        self._attach_batch_source()


def read_metadata(path: str | pathlib.Path) -> dict[str, Any]:
    """The HER settings stored in a model zip.

    :raises ValueError: when the file is not a zip written by :meth:`HER.save`
    """
    try:
        with zipfile.ZipFile(path) as archive:
            if METADATA_NAME not in archive.namelist():
                raise ValueError(
                    f"{path} is not a her_wrap model (no {METADATA_NAME} inside): load plain SB3 models with "
                    "their own class, e.g. SAC.load(path)."
                )
            metadata = json.loads(archive.read(METADATA_NAME))
    except (zipfile.BadZipFile, IsADirectoryError) as error:
        raise ValueError(
            f"{path} is not a her_wrap model (not a zip file): pass a file written by HER.save."
        ) from error
    except FileNotFoundError as error:
        raise ValueError(f"{path} does not exist: pass the path given to HER.save.") from error
    if metadata.get("format") != "her_wrap" or metadata.get("version", 0) > FORMAT_VERSION:
        raise ValueError(
            f"{path} has an unknown her_wrap format {metadata.get('version')}: upgrade her_wrap."
        )
    return metadata


def read_normalizer(path: str | pathlib.Path) -> VecNormalize | None:
    """The ``VecNormalize`` statistics stored in a model zip (without an env), or None."""
    with zipfile.ZipFile(path) as archive:
        if NORMALIZER_NAME not in archive.namelist():
            return None
        normalizer = pickle.loads(archive.read(NORMALIZER_NAME))
    if not isinstance(normalizer, VecNormalize):
        raise ValueError(
            f"{path} holds a {type(normalizer).__name__} as {NORMALIZER_NAME}, not a VecNormalize."
        )
    return detached_normalizer(normalizer)


def detached_normalizer(normalizer: VecNormalize) -> VecNormalize:
    """A copy of a ``VecNormalize``'s statistics and settings without its env (``set_venv`` gives it one).

    Unlike an unpickled ``VecNormalize``, the copy pickles again (``VecNormalize.load`` reads it) and
    normalizes observations on its own (what ``predict`` needs without an env).
    """
    state = {
        key: value
        for key, value in vars(normalizer).items()
        if key not in ("venv", "class_attributes", "returns")
    }
    clone = VecNormalize.__new__(VecNormalize)
    clone.__setstate__(copy.deepcopy(state))
    # What VecNormalize.__getstate__ drops; set_venv sets both anew.
    clone.class_attributes = {}
    clone.returns = np.zeros(0)
    return clone


def make_goal_env(env_id: str, **env_kwargs: Any) -> gym.Env:
    """``gymnasium.make`` for goal envs, registering her_wrap's, gymnasium-robotics' and panda-gym's ids."""
    import her_wrap.envs  # noqa: F401  (registers the bit-flipping ids)

    if env_id not in gym.registry:
        _register_optional(env_id)
    return gym.make(env_id, **env_kwargs)


def _register_optional(env_id: str) -> None:
    try:
        if env_id.startswith("Panda"):
            import panda_gym  # noqa: F401
        else:
            import gymnasium_robotics

            gym.register_envs(gymnasium_robotics)
    except ImportError as error:
        raise ValueError(
            f"{env_id} needs the robotics extra ({error.name} is missing): pip install 'her_wrap[robotics]'."
        ) from error


def _check_goal_space(space: spaces.Space) -> None:
    if not isinstance(space, spaces.Dict):
        raise ValueError(
            f"This VecEnv has {type(space).__name__} observations: HER needs the goal dict to relabel. "
            "Build the VecEnv from the goal envs themselves; HER flattens for MlpPolicy."
        )
    missing = {"observation", "achieved_goal", "desired_goal"} - set(space.spaces)
    if missing:
        raise ValueError(
            f"The VecEnv's observations lack the goal keys {sorted(missing)} (it has {sorted(space.spaces)}): "
            "HER needs dict observations with observation, achieved_goal and desired_goal."
        )
    if space["achieved_goal"].shape != space["desired_goal"].shape:
        raise ValueError(
            f"achieved_goal {space['achieved_goal'].shape} and desired_goal {space['desired_goal'].shape} "
            "differ in shape: a relabeled goal must fit where the desired goal goes."
        )


def _normalize_kwargs(normalize: bool | dict[str, Any], gamma: float | None) -> dict[str, Any] | None:
    """``VecNormalize`` arguments for ``normalize=``, or None for no normalization."""
    if normalize is False or normalize is None:
        return None
    if normalize is True:
        normalize = {}
    if not isinstance(normalize, dict):
        raise TypeError(
            f"normalize must be True, False or a dict of VecNormalize arguments, got {normalize!r}."
        )
    for key in ("venv", "training"):
        if key in normalize:
            raise ValueError(
                f"normalize sets no {key!r}: HER builds the VecNormalize around its env and trains it."
            )
    kwargs = {**DEFAULT_NORMALIZE_KWARGS, **normalize}
    if gamma is not None:
        kwargs.setdefault("gamma", gamma)  # discount of the return whose scale norm_reward divides by
    return kwargs


def _is_dict_policy(policy: str | type) -> bool:
    name = policy if isinstance(policy, str) else getattr(policy, "__name__", "")
    return "MultiInput" in name


def _qualified_name(obj: Any) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _import_qualified(name: str) -> Any:
    module, _, qualname = name.partition(":")
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


__all__ = [
    "DEFAULT_NORMALIZE_KWARGS",
    "HER",
    "BaseAlgorithm",
    "make_goal_env",
    "read_metadata",
    "read_normalizer",
]
