"""Greedy success rate of an agent on fresh episodes: what train, enjoy and optimize report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class EvaluationResult:
    """Episodes of one evaluation.

    :param returns: undiscounted return of each episode
    :param lengths: steps of each episode
    :param successes: ``info["is_success"]`` at the end of each episode
    """

    returns: list[float]
    lengths: list[int]
    successes: list[bool]

    @property
    def success_rate(self) -> float:
        return float(np.mean(self.successes)) if self.successes else 0.0

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns)) if self.returns else 0.0

    @property
    def std_return(self) -> float:
        return float(np.std(self.returns)) if self.returns else 0.0

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths)) if self.lengths else 0.0

    def ranking_key(self) -> tuple[float, float]:
        """What "best" means: the higher success rate, then the higher mean return."""
        return (self.success_rate, self.mean_return)

    def summary(self) -> str:
        """One line: success rate, return and length."""
        n_successes = sum(bool(success) for success in self.successes)
        return (
            f"success rate {self.success_rate:.3f} ({n_successes}/{len(self.successes)} episodes), "
            f"return {self.mean_return:.2f} +/- {self.std_return:.2f}, length {self.mean_length:.1f}"
        )


def evaluate_agent(
    agent: Any, eval_env: Any, n_episodes: int, *, deterministic: bool = True
) -> EvaluationResult:
    """Run ``n_episodes`` episodes and record return, length and success of each.

    :param agent: anything with ``predict(observation, state, episode_start, deterministic)``, such as
        :class:`her_wrap.HER`; it receives the env's own (dict) observations
    :param eval_env: a ``VecEnv`` whose envs are wrapped in ``Monitor`` (so returns are the env's, not a
        normalized version) and report ``is_success``
    :param n_episodes: episodes to run
    :param deterministic: greedy actions (``True``) or sampled ones
    """
    from stable_baselines3.common.evaluation import evaluate_policy

    successes: list[bool] = []

    def record_success(locals_: dict[str, Any], _globals: dict[str, Any]) -> None:
        if locals_["done"]:
            successes.append(bool(locals_["info"].get("is_success", False)))

    returns, lengths = evaluate_policy(
        agent,
        eval_env,
        n_eval_episodes=n_episodes,
        deterministic=deterministic,
        return_episode_rewards=True,
        callback=record_success,
        warn=False,
    )
    assert isinstance(returns, list) and isinstance(lengths, list)
    return EvaluationResult([float(value) for value in returns], [int(value) for value in lengths], successes)
