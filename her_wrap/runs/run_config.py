"""A validated config entry (:class:`RunConfig`): what :mod:`her_wrap.runs.config` makes of a file's entry."""

from __future__ import annotations

import copy
import difflib
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from her_wrap.core.settings import SETTING_NAMES, HindsightSettings
from her_wrap.runs.errors import UsageError
from her_wrap.runs.model_classes import canonical_learner_name, learner_parameters
from her_wrap.runs.zoo_translation import HER_SETTINGS
from her_wrap.sb3.learners import DISCRETE_ACTION_LEARNERS
from her_wrap.sb3.update_options import UPDATE_OPTION_NAMES, UpdateOptions

_DEFAULT_SETTINGS = HindsightSettings().to_dict()


@dataclass(frozen=True, init=False)
class RunConfig:
    """A validated config entry: everything a run needs besides the command-line flags.

    The ``her`` section is held as what it means: :attr:`hindsight`, the :class:`HindsightSettings` built
    once from the file's values, and :attr:`her_options`, HER's other keyword arguments (``store_infos`` and
    the update options). Every other value is plain data (numbers, strings, lists, mappings), so
    :meth:`to_entry` writes the config back as YAML that loads into the same config.
    """

    env_id: str
    model_class: str
    n_timesteps: int
    policy: str
    n_envs: int
    #: torch CPU threads (``None``: the command's default)
    num_threads: int | None
    #: how batches are drawn and relabeled
    hindsight: HindsightSettings
    #: HER's keyword arguments besides the hindsight settings (``store_infos``, update options)
    her_options: dict[str, Any]
    learner_kwargs: dict[str, Any]
    env_kwargs: dict[str, Any]
    #: HER's ``normalize``: ``False``, ``True`` (HER's defaults) or ``VecNormalize`` arguments over them
    normalize: bool | dict[str, Any]
    noise_type: str | None
    noise_std: float | None
    #: worker processes of ``her-wrap train`` (``None``: one; ``--workers`` replaces it)
    workers: int | None
    #: share of training episodes started with the object in the gripper (``None``: none)
    grasp_start: float | None
    #: minutes of training (evaluations left out) after which ``her-wrap train`` stops and saves the final
    #: agent, even short of ``n_timesteps`` (``None``: no limit; ``--max-minutes`` replaces it)
    max_minutes: float | None

    def __init__(
        self,
        env_id: str,
        model_class: str,
        n_timesteps: int,
        policy: str = "MultiInputPolicy",
        n_envs: int = 1,
        num_threads: int | None = None,
        learner_kwargs: dict[str, Any] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        normalize: bool | dict[str, Any] = False,
        noise_type: str | None = None,
        noise_std: float | None = None,
        *,
        hindsight: HindsightSettings | None = None,
        her_options: dict[str, Any] | None = None,
        workers: int | None = None,
        grasp_start: float | None = None,
        max_minutes: float | None = None,
    ) -> None:
        values = {
            "env_id": env_id,
            "model_class": model_class,
            "n_timesteps": n_timesteps,
            "policy": policy,
            "n_envs": n_envs,
            "num_threads": num_threads,
            "hindsight": HindsightSettings() if hindsight is None else hindsight,
            "her_options": dict(her_options or {}),
            "learner_kwargs": dict(learner_kwargs or {}),
            "env_kwargs": dict(env_kwargs or {}),
            "normalize": normalize,
            "noise_type": noise_type,
            "noise_std": noise_std,
            "workers": workers,
            "grasp_start": grasp_start,
            "max_minutes": max_minutes,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)  # a frozen dataclass sets its fields only this way

    @property
    def her(self) -> dict[str, Any]:
        """The ``her`` section as plain values: the settings that differ from the defaults, and the options."""
        settings = self.hindsight.to_dict()
        changed = {key: value for key, value in settings.items() if value != _DEFAULT_SETTINGS[key]}
        return {**changed, **copy.deepcopy(self.her_options)}

    def to_entry(self) -> dict[str, Any]:
        """The config as a native entry (what ``config.yml`` holds under the env id)."""
        entry: dict[str, Any] = {
            "model_class": self.model_class,
            "policy": self.policy,
            "n_timesteps": self.n_timesteps,
            "n_envs": self.n_envs,
            "her": self.her,
            **copy.deepcopy(self.learner_kwargs),
            "env_kwargs": copy.deepcopy(self.env_kwargs),
            "normalize": copy.deepcopy(self.normalize),
        }
        if self.num_threads is not None:
            entry["num_threads"] = self.num_threads
        if self.workers is not None:
            entry["workers"] = self.workers
        if self.grasp_start is not None:
            entry["grasp_start"] = self.grasp_start
        if self.max_minutes is not None:
            entry["max_minutes"] = self.max_minutes
        if self.noise_type is not None:
            entry["noise_type"] = self.noise_type
            entry["noise_std"] = self.noise_std
        return entry


def hindsight_settings(her: Mapping[str, Any]) -> HindsightSettings:
    """The :class:`HindsightSettings` of a ``her`` section (its other keys are HER's own options).

    :raises ValueError: for a bad value
    """
    return HindsightSettings.from_dict({key: value for key, value in her.items() if key in SETTING_NAMES})


#: Keys of an entry that are not learner kwargs.
RUN_KEYS: tuple[str, ...] = (
    "model_class",
    "policy",
    "n_timesteps",
    "her",
    "env_kwargs",
    "normalize",
    "n_envs",
    "num_threads",
    "workers",
    "grasp_start",
    "max_minutes",
    "noise_type",
    "noise_std",
)

POLICIES = ("MultiInputPolicy", "MlpPolicy")
NOISE_TYPES = ("normal", "ornstein-uhlenbeck")
VEC_NORMALIZE_KEYS = (
    "norm_obs",
    "norm_reward",
    "clip_obs",
    "clip_reward",
    "gamma",
    "epsilon",
    "norm_obs_keys",
)

_INTEGER_HER_KEYS = ("n_sampled_goal", "laber_m")


def listed(values: Iterable[str]) -> str:
    """``values`` joined for a one-line message."""
    return ", ".join(values)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``candidates`` to a misspelt ``name``, else ``""``."""
    matches = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


def _as_minutes(value: Any, where: str) -> float:
    """``max_minutes`` as a float: a positive number of minutes."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not value > 0
        or value == float("inf")
    ):
        raise UsageError(
            f"{where}: max_minutes must be a positive number of minutes, got {value!r} "
            "(leave it out, or set it to null, to train all n_timesteps)"
        )
    return float(value)


def _as_integer(value: Any, name: str, where: str, minimum: int | None = None) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"{where}: {name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{where}: {name} must be at least {minimum}, got {value}")
    return value


def _integral_default(parameter: inspect.Parameter) -> bool:
    default = parameter.default
    return isinstance(default, int) and not isinstance(default, bool)


def _validate_her(her: Mapping[str, Any], where: str) -> tuple[HindsightSettings, dict[str, Any]]:
    """The ``her`` section as its :class:`HindsightSettings` and HER's other options."""
    unknown = [key for key in her if key not in HER_SETTINGS]
    if unknown:
        raise UsageError(
            f"{where}: unknown HER setting {unknown[0]!r}{did_you_mean(unknown[0], HER_SETTINGS)}; "
            f"valid: {listed(HER_SETTINGS)}"
        )
    result = dict(her)
    for key in _INTEGER_HER_KEYS:
        if key in result:
            result[key] = _as_integer(result[key], f"her.{key}", where, minimum=0)
    if result.get("store_infos") is not None and not isinstance(result["store_infos"], bool):
        raise UsageError(
            f"{where}: her.store_infos must be true, false or null (kept when compute_reward reads them), "
            f"got {result['store_infos']!r}"
        )
    if not isinstance(result.get("check_finite", True), bool):
        raise UsageError(f"{where}: her.check_finite must be true or false, got {result['check_finite']!r}")
    options = {key: value for key, value in result.items() if key not in SETTING_NAMES}
    update_options = {key: value for key, value in options.items() if key in UPDATE_OPTION_NAMES}
    if isinstance(update_options.get("clip_target"), bool):
        del update_options["clip_target"]  # true: the bounds follow the learner's gamma (see HER)
    try:
        settings = hindsight_settings(result)
        UpdateOptions.from_dict(update_options)
    except ValueError as error:
        raise UsageError(f"{where}: {error}") from None
    return settings, options


def _validate_normalize(value: Any, where: str) -> bool | dict[str, Any]:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, dict):
        unknown = [key for key in value if key not in VEC_NORMALIZE_KEYS]
        if unknown:
            raise UsageError(
                f"{where}: unknown normalize setting {unknown[0]!r}; valid: {listed(VEC_NORMALIZE_KEYS)}"
            )
        return dict(value)
    raise UsageError(f"{where}: normalize must be true, false or a mapping of VecNormalize arguments")


def build_run_config(entry: Mapping[str, Any], env_id: str, where: str, algo: str | None = None) -> RunConfig:
    """Validate a translated entry (see :func:`translate_zoo_keys`) into a :class:`RunConfig`.

    :param entry: the entry, after the default merge, zoo translation and overrides
    :param env_id: the env id the entry is for
    :param where: ``"file: env id"`` for error messages
    :param algo: learner name to use when the entry has no ``model_class`` (``--algo`` or the file name)
    :raises UsageError: for a missing or unknown model class, a missing ``n_timesteps``, an unknown key
        (listing the valid ones) or a value of the wrong kind
    """
    entry = dict(entry)
    model_class = entry.pop("model_class", None) or algo
    if model_class is None:
        raise UsageError(
            f"{where}: no model_class; add 'model_class: sac' (or dqn, td3, ...) to the entry or pass --algo"
        )
    model_class = canonical_learner_name(model_class)
    if "n_timesteps" not in entry:
        raise UsageError(f"{where}: no n_timesteps; add it to the entry or pass -n")
    parameters = learner_parameters(model_class)
    unknown = [key for key in entry if key not in RUN_KEYS and key not in parameters]
    if unknown:
        valid = sorted({*RUN_KEYS, *parameters})
        raise UsageError(
            f"{where}: unknown hyperparameter {unknown[0]!r} for {model_class}"
            f"{did_you_mean(unknown[0], valid)}; valid: {listed(valid)}"
        )

    policy = entry.pop("policy", "MultiInputPolicy")
    if policy not in POLICIES:
        raise UsageError(f"{where}: policy must be one of {listed(POLICIES)}, got {policy!r}")
    n_timesteps = _as_integer(entry.pop("n_timesteps"), "n_timesteps", where, minimum=1)
    n_envs = _as_integer(entry.pop("n_envs", 1), "n_envs", where, minimum=1)
    num_threads = entry.pop("num_threads", None)
    if num_threads is not None:
        num_threads = _as_integer(num_threads, "num_threads", where, minimum=1)
    workers = entry.pop("workers", None)
    if workers is not None:
        workers = _as_integer(workers, "workers", where, minimum=1)
    grasp_start = entry.pop("grasp_start", None)
    if grasp_start is not None:
        from her_wrap.envs.grasp_start import check_share  # the env package only for entries that use it

        try:
            grasp_start = check_share(grasp_start)
        except ValueError as error:
            raise UsageError(f"{where}: {error}") from None
    max_minutes = entry.pop("max_minutes", None)
    if max_minutes is not None:
        max_minutes = _as_minutes(max_minutes, where)
    hindsight, her_options = _validate_her(entry.pop("her", None) or {}, where)
    env_kwargs = entry.pop("env_kwargs", None) or {}
    if not isinstance(env_kwargs, dict):
        raise UsageError(f"{where}: env_kwargs must be a mapping, got {env_kwargs!r}")
    normalize = _validate_normalize(entry.pop("normalize", False), where)
    noise_type = entry.pop("noise_type", None)
    noise_std = entry.pop("noise_std", None)
    if noise_type is not None or noise_std is not None:
        if model_class in DISCRETE_ACTION_LEARNERS:
            raise UsageError(
                f"{where}: noise_type/noise_std apply to continuous actions, not to {model_class}"
            )
        if noise_type not in NOISE_TYPES:
            raise UsageError(f"{where}: noise_type must be one of {listed(NOISE_TYPES)}, got {noise_type!r}")
        if not isinstance(noise_std, (int, float)) or isinstance(noise_std, bool) or noise_std < 0:
            raise UsageError(f"{where}: noise_std must be a non-negative number, got {noise_std!r}")
        noise_std = float(noise_std)

    learner_kwargs = {}
    for key, value in entry.items():
        if _integral_default(parameters[key]) and isinstance(value, float) and value.is_integer():
            value = int(value)
        learner_kwargs[key] = value
    return RunConfig(
        env_id=env_id,
        model_class=model_class,
        n_timesteps=n_timesteps,
        policy=policy,
        n_envs=n_envs,
        num_threads=num_threads,
        hindsight=hindsight,
        her_options=her_options,
        learner_kwargs=learner_kwargs,
        env_kwargs=env_kwargs,
        normalize=normalize,
        noise_type=noise_type,
        noise_std=noise_std,
        workers=workers,
        grasp_start=grasp_start,
        max_minutes=max_minutes,
    )
