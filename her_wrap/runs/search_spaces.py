"""What ``her-wrap optimize`` samples: HER settings and learner hyperparameters, per learner.

Each space maps a key path of a config entry (``her.n_sampled_goal``, ``learning_rate``) to a distribution.
Two keys stand for more than one setting, as in rl-baselines3-zoo:

- ``train_freq`` also sets ``gradient_steps`` to the same value (one gradient step per env step);
- ``policy_kwargs.net_arch`` is a size name (``small`` [64, 64], ``medium`` [256, 256], ``big``
  [256, 256, 256]) so that Optuna stores a plain string.

A key the user fixed with ``-params`` is not sampled.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.settings import LaBERVariant

KeyPath = tuple[str, ...]

NET_ARCHS: dict[str, list[int]] = {"small": [64, 64], "medium": [256, 256], "big": [256, 256, 256]}


@dataclass(frozen=True)
class Categorical:
    """One of a few values (numbers, strings, booleans or ``None``)."""

    choices: tuple[Any, ...]

    def suggest(self, trial: Any, name: str) -> Any:
        return trial.suggest_categorical(name, list(self.choices))


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
}


def parameter_name(path: KeyPath) -> str:
    """The Optuna parameter name of a key path (``her.n_sampled_goal``)."""
    return ".".join(path)


def sample_settings(
    trial: Any, model_class: str, fixed: Collection[KeyPath] = (), current: Mapping[str, Any] | None = None
) -> dict[KeyPath, Any]:
    """Sample a trial's settings for a learner.

    :param trial: an ``optuna.Trial``
    :param model_class: a learner name (``dqn``, ``sac``, ...)
    :param fixed: key paths the user fixed (``-params``); not sampled
    :param current: the entry being tuned, to keep its ``noise_type`` when it has one
    :return: key path -> value, derived settings included, ready for :func:`her_wrap.runs.config.set_in`
    """
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
