"""Hyperparameter files: one entry per env id, validated into a :class:`RunConfig`.

A file maps env ids to entries; a ``default:`` entry, when present, is merged under every entry (mappings
merged key by key, other values replaced), and YAML anchors (``<<: *name``) work as usual::

    default:
      policy: MultiInputPolicy
      her: {n_sampled_goal: 4, goal_selection_strategy: future, online: true}

    FetchReach-v4:
      model_class: sac
      n_timesteps: 2e4          # read as a number (see yaml_io)
      normalize: true
      batch_size: 256           # any other key is a keyword argument of the learner
      policy_kwargs: {net_arch: [64, 64]}

Keys of an entry:

- ``model_class``: ``dqn``, ``qrdqn``, ``sac``, ``td3``, ``ddpg`` or ``tqc``;
- ``policy``: ``MultiInputPolicy`` (the learner sees the goal dict; the default) or ``MlpPolicy`` (a flat
  vector through ``HERGoalEnvWrapper``);
- ``n_timesteps``: env steps to train for;
- ``her``: settings of the :class:`her_wrap.HER` constructor (see :data:`HER_SETTINGS`);
- ``env_kwargs``: keyword arguments of ``gymnasium.make``;
- ``normalize``: HER's running mean/std normalization of observations and goals: ``false``, ``true``
  (HER's defaults: observations and goals, not rewards, clipped at 5) or a mapping of ``VecNormalize``
  arguments over those defaults (``{norm_reward: true, clip_obs: 10.0}``). The statistics are saved in
  the agent's zip;
- ``n_envs``: envs stepped in parallel (default 1);
- ``num_threads``: torch CPU threads of the run (default 1; ``--num-threads`` replaces it);
- ``workers``: worker processes of ``her-wrap train``, gradients averaged at every step (default 1;
  ``--workers`` replaces it, and under ``torchrun`` the launch's count does; see
  :mod:`her_wrap.runs.workers`);
- ``grasp_start``: the share of training episodes that start with the object in the gripper (Fetch and
  Panda pick-and-place; :class:`her_wrap.envs.GraspStartWrapper`); evaluations start as the task does;
- ``noise_type`` (``normal`` or ``ornstein-uhlenbeck``) and ``noise_std``: exploration noise of the
  continuous-action learners;
- every other key is a keyword argument of the learner (``learning_rate``, ``buffer_size``, ...). A key
  that is none of these is an error that lists the valid ones.

rl-baselines3-zoo's files load too (see :mod:`her_wrap.runs.zoo_translation`): ``"dict(...)"`` strings
are parsed as literals, ``replay_buffer_class: HerReplayBuffer`` with its ``replay_buffer_kwargs``
and the old top-level ``n_sampled_goal``/``goal_selection_strategy``/``online_sampling`` become the ``her``
section, and when an entry has no ``model_class`` the learner comes from ``--algo`` or the file name
(``tqc.yml``).
"""

from __future__ import annotations

import copy
import difflib
import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from her_wrap.core.settings import SETTING_NAMES, HindsightSettings
from her_wrap.runs.env_versions import with_other_version_entry
from her_wrap.runs.errors import UsageError
from her_wrap.runs.model_classes import canonical_learner_name, learner_parameters
from her_wrap.runs.overrides import apply_overrides, parse_override, parse_override_value, set_in
from her_wrap.runs.run_config import RunConfig, hindsight_settings
from her_wrap.runs.yaml_io import load_yaml_file
from her_wrap.runs.zoo_translation import (
    HER_SETTINGS,
    algo_from_file_name,
    parse_literal_strings,
    translate_zoo_keys,
)
from her_wrap.sb3.learners import DISCRETE_ACTION_LEARNERS
from her_wrap.sb3.update_options import UPDATE_OPTION_NAMES, UpdateOptions

# Names that moved to modules of their own, still importable from here.
__all__ = [
    "DEFAULT_ENTRY",
    "HER_SETTINGS",
    "ConfigEntry",
    "RunConfig",
    "algo_from_file_name",
    "apply_overrides",
    "build_run_config",
    "deep_merge",
    "hindsight_settings",
    "load_entry",
    "load_run_config",
    "parse_literal_strings",
    "parse_override",
    "parse_override_value",
    "read_entries",
    "select_entry",
    "set_in",
    "translate_zoo_keys",
    "validate_file",
]

#: Name of the entry merged under every other entry.
DEFAULT_ENTRY = "default"

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


def _one_line(values: Iterable[str]) -> str:
    return ", ".join(values)


def _suggestion(name: str, candidates: Iterable[str]) -> str:
    matches = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``override``, mappings merged recursively, other values replaced; new objects."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def read_entries(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read a hyperparameter file: a mapping from env id (or ``default``) to entry.

    :raises UsageError: when the file is missing, malformed, or not a mapping of mappings
    """
    data = load_yaml_file(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(
            f"{path}: expected a mapping from env id to hyperparameters, got {type(data).__name__}"
        )
    for key, entry in data.items():
        if entry is None:
            data[key] = {}
        elif not isinstance(entry, dict):
            raise UsageError(f"{path}: entry {key!r} must be a mapping of hyperparameters, got {entry!r}")
    return data


def select_entry(entries: Mapping[str, dict[str, Any]], env_id: str, source: str) -> dict[str, Any]:
    """The entry for ``env_id`` with the ``default`` entry merged under it.

    :raises UsageError: when the file has no entry for ``env_id``, naming the file and listing its entries
    """
    if env_id not in entries or env_id == DEFAULT_ENTRY:
        names = [name for name in entries if name != DEFAULT_ENTRY]
        listed = _one_line(names) if names else "none"
        raise UsageError(
            f"{source} has no entry for {env_id!r}{_suggestion(env_id, names)}; its entries: {listed}"
        )
    return deep_merge(entries.get(DEFAULT_ENTRY, {}), entries[env_id])


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
            f"{where}: unknown HER setting {unknown[0]!r}{_suggestion(unknown[0], HER_SETTINGS)}; "
            f"valid: {_one_line(HER_SETTINGS)}"
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
                f"{where}: unknown normalize setting {unknown[0]!r}; valid: {_one_line(VEC_NORMALIZE_KEYS)}"
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
            f"{_suggestion(unknown[0], valid)}; valid: {_one_line(valid)}"
        )

    policy = entry.pop("policy", "MultiInputPolicy")
    if policy not in POLICIES:
        raise UsageError(f"{where}: policy must be one of {_one_line(POLICIES)}, got {policy!r}")
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
            raise UsageError(
                f"{where}: noise_type must be one of {_one_line(NOISE_TYPES)}, got {noise_type!r}"
            )
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
    )


@dataclass(frozen=True)
class ConfigEntry:
    """An entry as read, before validation: for callers that change it further (Optuna trials).

    :param entry: the entry after the default merge, zoo translation and overrides
    :param env_id: the env id it is for
    :param where: ``"file: env id"`` for error messages
    :param file_algo: the learner a zoo file's name implies, or ``None``
    """

    entry: dict[str, Any]
    env_id: str
    where: str
    file_algo: str | None

    def validate(self, entry: Mapping[str, Any] | None = None) -> RunConfig:
        """Validate this entry, or a changed copy of it, into a :class:`RunConfig`."""
        return build_run_config(
            self.entry if entry is None else entry, self.env_id, self.where, self.file_algo
        )


def load_entry(
    path: str | Path,
    env_id: str,
    *,
    algo: str | None = None,
    overrides: Sequence[str] = (),
    n_timesteps: int | None = None,
    n_envs: int | None = None,
) -> ConfigEntry:
    """Read the entry for ``env_id`` from a hyperparameter file, without validating it yet.

    :param path: a her_wrap or rl-baselines3-zoo YAML file
    :param env_id: the entry to read
    :param algo: learner name that replaces the entry's ``model_class`` (``--algo``)
    :param overrides: ``-params`` items, applied after the default merge (see :func:`parse_override`)
    :param n_timesteps: replaces the entry's ``n_timesteps`` (``-n``)
    :param n_envs: replaces the entry's ``n_envs`` (``--n-envs``)
    :raises UsageError: for any problem with the file or the entry, in one line
    """
    source = str(path)
    where = f"{source}: {env_id}"
    entries = with_other_version_entry(read_entries(path), env_id, source)
    entry = translate_zoo_keys(select_entry(entries, env_id, source), where)
    entry = apply_overrides(entry, overrides)
    if algo is not None:
        entry["model_class"] = algo
    if n_timesteps is not None:
        entry["n_timesteps"] = n_timesteps
    if n_envs is not None:
        entry["n_envs"] = n_envs
    return ConfigEntry(entry, env_id, where, algo_from_file_name(path))


def load_run_config(
    path: str | Path,
    env_id: str,
    *,
    algo: str | None = None,
    overrides: Sequence[str] = (),
    n_timesteps: int | None = None,
    n_envs: int | None = None,
) -> RunConfig:
    """Read and validate the entry for ``env_id``; the arguments are those of :func:`load_entry`.

    :raises UsageError: for any problem with the file or the entry, in one line
    """
    return load_entry(
        path, env_id, algo=algo, overrides=overrides, n_timesteps=n_timesteps, n_envs=n_envs
    ).validate()


def validate_file(path: str | Path) -> list[RunConfig]:
    """Validate every entry of a file (``default`` merged under each).

    :raises UsageError: at the first entry that does not validate
    """
    entries = read_entries(path)
    return [load_run_config(path, env_id) for env_id in entries if env_id != DEFAULT_ENTRY]
