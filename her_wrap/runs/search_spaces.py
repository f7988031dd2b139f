"""What ``her-wrap optimize`` samples: HER settings and learner hyperparameters, per learner.

Each space maps a key path of a config entry (``her.n_sampled_goal``, ``learning_rate``) to a distribution.
Two keys stand for more than one setting, as in rl-baselines3-zoo:

- ``train_freq`` also sets ``gradient_steps`` to the same value (one gradient step per env step);
- ``policy_kwargs.net_arch`` is a size name (``small`` [64, 64], ``medium`` [256, 256], ``big``
  [256, 256, 256]) so that Optuna stores a plain string.

A key the user fixed with ``-params`` is not sampled.

``her-wrap optimize --space FILE`` replaces the learner's space with one of the user's own
(:func:`load_search_space`): a YAML mapping of dotted keys to a list of choices or to a float range::

    batch_size: [512, 1024, 2048]
    policy_kwargs.net_arch: [[256, 256], [256, 256, 256]]
    learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}

Such a space samples exactly its keys, with no derived settings (``train_freq`` is then only
``train_freq``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.settings import LaBERVariant
from her_wrap.runs.errors import UsageError
from her_wrap.runs.yaml_io import flow_yaml, load_yaml_file

KeyPath = tuple[str, ...]

NET_ARCHS: dict[str, list[int]] = {"small": [64, 64], "medium": [256, 256], "big": [256, 256, 256]}


def _is_plain(value: Any) -> bool:
    """Whether Optuna stores ``value`` as a categorical choice as it is."""
    return value is None or isinstance(value, (bool, int, float, str))


def choice_label(value: Any) -> Any:
    """How a choice is stored in the study: itself, or its YAML flow text for a list or a mapping."""
    return value if _is_plain(value) else flow_yaml(value)


@dataclass(frozen=True)
class Categorical:
    """One of a few values. Numbers, strings, booleans and ``None`` are stored as they are; a list or a
    mapping (``[256, 256]``) is stored as its YAML text (``'[256, 256]'``) and given back as the value."""

    choices: tuple[Any, ...]

    def suggest(self, trial: Any, name: str) -> Any:
        labels = [choice_label(choice) for choice in self.choices]
        label = trial.suggest_categorical(name, labels)
        return self.choices[labels.index(label)]


@dataclass(frozen=True)
class Uniform:
    """A float uniform in ``[low, high]``, or log-uniform when ``log``."""

    low: float
    high: float
    log: bool = False

    def suggest(self, trial: Any, name: str) -> Any:
        return trial.suggest_float(name, self.low, self.high, log=self.log)


Distribution = Categorical | Uniform

HER_SPACE: dict[KeyPath, Distribution] = {
    ("her", "n_sampled_goal"): Categorical((1, 2, 4, 8)),
    ("her", "goal_selection_strategy"): Categorical(
        tuple(strategy.value for strategy in GoalSelectionStrategy)
    ),
    # Uniform sampling (None) against LaBER; prioritized replay excludes LaBER, so it is left out here.
    ("her", "laber"): Categorical((None, LaBERVariant.MEAN.value, LaBERVariant.MAX.value)),
}

UNIFORM_HER_SPACE = {path: space for path, space in HER_SPACE.items() if path != ("her", "laber")}

OFF_POLICY_SPACE: dict[KeyPath, Distribution] = {
    ("learning_rate",): Uniform(1e-5, 1e-2, log=True),
    ("batch_size",): Categorical((64, 128, 256, 512)),
    ("gamma",): Categorical((0.9, 0.95, 0.98, 0.99)),
    ("train_freq",): Categorical((1, 4, 16, 64)),
    ("policy_kwargs", "net_arch"): Categorical(tuple(NET_ARCHS)),
}

Q_LEARNING_SPACE: dict[KeyPath, Distribution] = {
    ("exploration_fraction",): Uniform(0.0, 0.5),
    ("exploration_final_eps",): Uniform(0.0, 0.2),
    ("target_update_interval",): Categorical((1, 100, 1000, 5000)),
}

ACTOR_CRITIC_SPACE: dict[KeyPath, Distribution] = {
    ("tau",): Categorical((0.005, 0.01, 0.02, 0.05)),
}

DETERMINISTIC_POLICY_SPACE: dict[KeyPath, Distribution] = {
    ("noise_std",): Uniform(0.0, 0.5),
}

SEARCH_SPACES: dict[str, dict[KeyPath, Distribution]] = {
    "dqn": {**HER_SPACE, **OFF_POLICY_SPACE, **Q_LEARNING_SPACE},
    "qrdqn": {**HER_SPACE, **OFF_POLICY_SPACE, **Q_LEARNING_SPACE},
    "sac": {**HER_SPACE, **OFF_POLICY_SPACE, **ACTOR_CRITIC_SPACE},
    "tqc": {**HER_SPACE, **OFF_POLICY_SPACE, **ACTOR_CRITIC_SPACE},
    "td3": {**HER_SPACE, **OFF_POLICY_SPACE, **ACTOR_CRITIC_SPACE, **DETERMINISTIC_POLICY_SPACE},
    "ddpg": {**HER_SPACE, **OFF_POLICY_SPACE, **ACTOR_CRITIC_SPACE, **DETERMINISTIC_POLICY_SPACE},
    # SBX's JAX learners train with their own update, which takes no LaBER weights; CrossQ has no target
    # networks (no tau).
    "sbx.dqn": {**UNIFORM_HER_SPACE, **OFF_POLICY_SPACE, **Q_LEARNING_SPACE},
    "sbx.sac": {**UNIFORM_HER_SPACE, **OFF_POLICY_SPACE, **ACTOR_CRITIC_SPACE},
    "sbx.tqc": {**UNIFORM_HER_SPACE, **OFF_POLICY_SPACE, **ACTOR_CRITIC_SPACE},
    "sbx.td3": {**UNIFORM_HER_SPACE, **OFF_POLICY_SPACE, **ACTOR_CRITIC_SPACE, **DETERMINISTIC_POLICY_SPACE},
    "sbx.ddpg": {**UNIFORM_HER_SPACE, **OFF_POLICY_SPACE, **ACTOR_CRITIC_SPACE, **DETERMINISTIC_POLICY_SPACE},
    "sbx.crossq": {**UNIFORM_HER_SPACE, **OFF_POLICY_SPACE},
}


def parameter_name(path: KeyPath) -> str:
    """The Optuna parameter name of a key path (``her.n_sampled_goal``)."""
    return ".".join(path)


def _distribution(value: Any, key: str, source: str) -> Distribution:
    """One key's distribution in a search-space file: a list of choices, or ``{low, high[, log]}``."""
    if isinstance(value, list) and value:
        return Categorical(tuple(value))
    if isinstance(value, Mapping) and {"low", "high"} <= set(value) <= {"low", "high", "log"}:
        low, high = value["low"], value["high"]
        if all(isinstance(bound, (int, float)) and not isinstance(bound, bool) for bound in (low, high)):
            if low < high and not (value.get("log") and low <= 0):
                return Uniform(float(low), float(high), bool(value.get("log", False)))
    raise UsageError(
        f"{source}: {key}: {value!r} is no search space; give a list of choices ([512, 1024]) or a float "
        "range ({low: 1.0e-4, high: 1.0e-2, log: true}, low below high, and above 0 with log)"
    )


def load_search_space(path: str | Path) -> dict[KeyPath, Distribution]:
    """Read a search space of ``her-wrap optimize --space``: dotted keys to choices or float ranges.

    :raises UsageError: when the file is no mapping, or a key's value is neither a list nor a range
    """
    data = load_yaml_file(path)
    if not isinstance(data, Mapping) or not data:
        raise UsageError(
            f"{path}: a search space is a YAML mapping of dotted keys to choices, e.g. 'batch_size: [512, 1024]'"
        )
    return {
        tuple(str(key).split(".")): _distribution(value, str(key), str(path)) for key, value in data.items()
    }


def sample_settings(
    trial: Any,
    model_class: str,
    fixed: Collection[KeyPath] = (),
    current: Mapping[str, Any] | None = None,
    space: Mapping[KeyPath, Distribution] | None = None,
) -> dict[KeyPath, Any]:
    """Sample a trial's settings for a learner.

    :param trial: an ``optuna.Trial``
    :param model_class: a learner name (``dqn``, ``sac``, ...)
    :param fixed: key paths the user fixed (``-params``); not sampled
    :param current: the entry being tuned, to keep its ``noise_type`` when it has one
    :param space: the user's own space (:func:`load_search_space`), sampled as it is, instead of the learner's
    :return: key path -> value, derived settings included, ready for :func:`her_wrap.runs.config.set_in`
    """
    if space is not None:
        return {
            path: distribution.suggest(trial, parameter_name(path))
            for path, distribution in space.items()
            if path not in fixed
        }
    settings: dict[KeyPath, Any] = {}
    for path, distribution in SEARCH_SPACES[model_class].items():
        if path in fixed:
            continue
        value = distribution.suggest(trial, parameter_name(path))
        if path == ("policy_kwargs", "net_arch"):
            value = list(NET_ARCHS[value])
        settings[path] = value
        if path == ("train_freq",) and ("gradient_steps",) not in fixed:
            settings[("gradient_steps",)] = value
        if path == ("noise_std",) and not (current or {}).get("noise_type"):
            settings[("noise_type",)] = "normal"
    return settings


def _entry_value(entry: Mapping[str, Any], path: KeyPath) -> tuple[bool, Any]:
    """``(True, value)`` when ``entry`` sets ``path``, else ``(False, None)``."""
    node: Any = entry
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _entry_param(value: Any, distribution: Distribution, path: KeyPath, named_sizes: bool) -> Any:
    """The stored parameter that samples ``value`` back from ``distribution``, or raise ``LookupError``."""
    if isinstance(distribution, Uniform):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if distribution.low <= float(value) <= distribution.high:
                return float(value)
        raise LookupError
    if named_sizes and path == ("policy_kwargs", "net_arch"):
        names = [name for name, sizes in NET_ARCHS.items() if list(sizes) == value]
        if names and names[0] in distribution.choices:
            return names[0]
        raise LookupError
    for choice in distribution.choices:
        if choice == value and isinstance(choice, bool) == isinstance(value, bool):
            return choice_label(choice)
    raise LookupError


def entry_params(
    entry: Mapping[str, Any],
    model_class: str,
    fixed: Collection[KeyPath] = (),
    space: Mapping[KeyPath, Distribution] | None = None,
) -> dict[str, Any]:
    """The trial parameters that sample an entry's own settings back: the first trial of
    ``her-wrap optimize --start-from-entry``, which measures the recipe as it ships beside the others.

    :param entry: the entry being tuned (after its merges and ``-params``)
    :param model_class: the entry's learner, whose space is searched when ``space`` is ``None``
    :param fixed: key paths the user fixed (``-params``); not sampled
    :param space: the user's own space (:func:`load_search_space`), or ``None`` for the learner's
    :return: Optuna parameter name -> stored value, for ``study.enqueue_trial``
    :raises UsageError: when the entry leaves a sampled key unset, or sets it to a value its space cannot
        sample, naming every such key
    """
    searched = SEARCH_SPACES[model_class] if space is None else space
    params: dict[str, Any] = {}
    problems: list[str] = []
    for path, distribution in searched.items():
        if path in fixed:
            continue
        name = parameter_name(path)
        found, value = _entry_value(entry, path)
        if not found:
            problems.append(f"{name} is not set in the entry")
            continue
        try:
            params[name] = _entry_param(value, distribution, path, named_sizes=space is None)
        except LookupError:
            shown = value if _is_plain(value) else choice_label(value)
            problems.append(f"{name}: the entry's {shown} is not in the space")
    if problems:
        raise UsageError(
            "--start-from-entry runs the entry's own settings first, but " + "; ".join(problems) + ": add "
            "those values to the --space file, or fix the keys with -params KEY:VALUE"
        )
    return params
