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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from her_wrap.runs.errors import UsageError
from her_wrap.runs.model_classes import canonical_learner_name, learner_parameters, learner_policies
from her_wrap.runs.run_config import RUN_KEYS, RunConfig, build_run_config, did_you_mean, listed
from her_wrap.runs.yaml_io import load_yaml_file
from her_wrap.runs.zoo_translation import (
    algo_from_file_name,
    apply_overrides,
    parse_override,
    translate_zoo_keys,
    with_other_version_entry,
)

#: Name of the entry merged under every other entry.
DEFAULT_ENTRY = "default"


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
        entries_named = listed(names) if names else "none"
        raise UsageError(
            f"{source} has no entry for {env_id!r}{did_you_mean(env_id, names)}; its entries: {entries_named}"
        )
    return deep_merge(entries.get(DEFAULT_ENTRY, {}), entries[env_id])


@dataclass(frozen=True)
class ConfigEntry:
    """An entry as read, before validation: for callers that change it further (Optuna trials).

    :param entry: the entry after the default merge, zoo translation and overrides
    :param env_id: the env id it is for
    :param where: ``"file: env id"`` for error messages
    :param file_algo: the learner a zoo file's name implies, or ``None``
    :param notes: lines for the user on what the command line changed beyond the entry's own keys
        (keys ``--algo`` left out, the shares of ``--workers``)
    """

    entry: dict[str, Any]
    env_id: str
    where: str
    file_algo: str | None
    notes: tuple[str, ...] = ()

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
    workers: int | None = None,
) -> ConfigEntry:
    """Read the entry for ``env_id`` from a hyperparameter file, without validating it yet.

    :param path: a her_wrap or rl-baselines3-zoo YAML file
    :param env_id: the entry to read
    :param algo: learner name that replaces the entry's ``model_class`` (``--algo``)
    :param overrides: ``-params`` items, applied after the default merge (see :func:`parse_override`)
    :param n_timesteps: replaces the entry's ``n_timesteps`` (``-n``)
    :param n_envs: replaces the entry's ``n_envs`` (``--n-envs``)
    :param workers: worker processes of the run: an entry tuned for one is split among them
        (:func:`split_among_workers`)
    :raises UsageError: for any problem with the file or the entry, in one line
    """
    source = str(path)
    where = f"{source}: {env_id}"
    entries = with_other_version_entry(read_entries(path), env_id, source)
    entry = translate_zoo_keys(select_entry(entries, env_id, source), where)
    entry = apply_overrides(entry, overrides)
    given = {parse_override(text)[0][0] for text in overrides}
    notes: list[str] = []
    if algo is not None:
        notes.extend(drop_keys_for_learner(entry, algo, given, where))
        entry["model_class"] = algo
    if n_timesteps is not None:
        entry["n_timesteps"] = n_timesteps
        given.add("n_timesteps")
    if n_envs is not None:
        entry["n_envs"] = n_envs
    if workers is not None and workers > 1:
        notes.extend(split_among_workers(entry, workers, given, where))
    return ConfigEntry(entry, env_id, where, algo_from_file_name(path), tuple(notes))


def drop_keys_for_learner(entry: dict[str, Any], algo: str, given: set[str], where: str) -> list[str]:
    """Leave out of ``entry``, in place, the learner arguments its own learner takes and ``algo`` lacks.

    ``--algo`` puts another learner on an entry tuned for its ``model_class``: an argument of that learner
    alone (``tau`` of SAC for CrossQ, which has no target networks) is no setting of the new one. Keys the
    command line gave (``given``, from ``-params``) are kept, so a key that does not fit is still an error.

    :return: one line saying what was left out, or none
    """
    old = entry.get("model_class")
    new = canonical_learner_name(algo)
    if old is None or canonical_learner_name(old) == new:
        return []
    keeps = learner_parameters(new)
    dropped = [key for key in entry if key not in RUN_KEYS and key not in keeps and key not in given]
    for key in dropped:
        del entry[key]
    notes = []
    if dropped:
        notes.append(
            f"{where}: {new} takes no {', '.join(dropped)} (arguments of the entry's {old}): left out"
        )
    policies = learner_policies(new)
    policy = entry.get("policy", "MultiInputPolicy")
    if "policy" not in given and policy not in policies and "MlpPolicy" in policies:
        entry["policy"] = "MlpPolicy"
        notes.append(f"{where}: {new} has no {policy}: MlpPolicy instead (HER flattens the goal dict for it)")
    return notes


#: Settings of an entry that count env steps or rows of one process: ``--workers N`` divides them by N.
PER_WORKER_KEYS = ("n_timesteps", "learning_starts", "batch_size")


def split_among_workers(entry: dict[str, Any], workers: int, given: set[str], where: str) -> list[str]:
    """Give each of ``workers`` processes its share of an entry tuned for one, in place.

    Workers average their gradients at every step, so a batch of ``batch_size / N`` rows on each of N
    workers is one update on the entry's ``batch_size`` rows; each worker collects ``train_freq / N`` steps
    of its ``n_envs`` envs per cycle, so a cycle gathers the entry's env steps for the same gradient steps;
    ``learning_starts`` and ``n_timesteps`` count one worker's steps. The run then trains on the entry's
    data per update and in all, N times as fast as the envs and updates allow. An entry that names its own
    ``workers`` is tuned for them and stays as it is, and so do the settings the command line gave
    (``given``) and those that do not divide by N.

    :return: one line saying what was set, or none
    """
    if "workers" in entry:
        return []
    changed: list[str] = []
    kept: list[str] = []
    for key in PER_WORKER_KEYS:
        value = entry.get(key)
        if key in given or value is None:
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value % workers == 0:
            entry[key] = value // workers
            changed.append(f"{key} {entry[key]}")
        else:
            kept.append(key)
    frequency = entry.get("train_freq")
    if frequency is not None and "train_freq" not in given:
        steps, unit = (frequency, "step") if isinstance(frequency, int) else tuple(frequency)
        if unit == "step" and isinstance(steps, int) and steps % workers == 0:
            entry["train_freq"] = [steps // workers, "step"]
            changed.append(f"train_freq [{steps // workers}, step]")
        else:
            kept.append("train_freq")
    entry["workers"] = workers
    if not changed:
        return []
    line = f"{where} on {workers} workers, each: {', '.join(changed)} (the entry's data per update)"
    if kept:
        line += f"; kept as in the entry: {', '.join(kept)}"
    return [line + "; -params sets any of them"]


def load_run_config(
    path: str | Path, env_id: str, *, notes: list[str] | None = None, **options: Any
) -> RunConfig:
    """Read and validate the entry for ``env_id``: :func:`load_entry` with the same ``options`` (``algo``,
    ``overrides``, ``n_timesteps``, ``n_envs``, ``workers``), then :meth:`ConfigEntry.validate`.

    :param notes: when given, the entry's :attr:`ConfigEntry.notes` are appended to it
    :raises UsageError: for any problem with the file or the entry, in one line
    """
    entry = load_entry(path, env_id, **options)
    if notes is not None:
        notes.extend(entry.notes)
    return entry.validate()


def validate_file(path: str | Path) -> list[RunConfig]:
    """Validate every entry of a file (``default`` merged under each).

    :raises UsageError: at the first entry that does not validate
    """
    entries = read_entries(path)
    return [load_run_config(path, env_id) for env_id in entries if env_id != DEFAULT_ENTRY]
