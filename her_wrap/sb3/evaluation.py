"""Greedy success rate (and return, length) of a goal-conditioned agent on fresh episodes.

One evaluator serves the tests, the scripts and ``her-wrap train / enjoy / optimize``: SB3's
``evaluate_policy`` runs the episodes, and ``info["is_success"]`` of each episode's last step is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class EpisodeGoals:
    """Where one episode's object (the achieved goal) started and ended, and the goal it was given."""

    start: np.ndarray
    goal: np.ndarray
    end: np.ndarray


@dataclass(frozen=True)
class EvaluationResult:
    """Episodes of one evaluation.

    :param returns: undiscounted return of each episode
    :param lengths: steps of each episode
    :param successes: ``info["is_success"]`` at the end of each episode
    :param goals: where each episode's object started, its desired goal and where it ended (achieved goal
        at the first observation, desired goal, achieved goal at the last), when asked for with
        ``evaluate_agent(..., record_goals=True)``; empty otherwise
    """

    returns: list[float]
    lengths: list[int]
    successes: list[bool]
    goals: list[EpisodeGoals] = field(default_factory=list)

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
    agent: Any,
    eval_env: Any,
    n_episodes: int,
    *,
    deterministic: bool = True,
    seed: int | None = None,
    record_goals: bool = False,
) -> EvaluationResult:
    """Run ``n_episodes`` episodes and record return, length and success of each.

    :param agent: anything with ``predict(observation, state, episode_start, deterministic)``: a
        :class:`her_wrap.HER`, or an SB3 model whose policy takes the env's observations; it receives the
        env's own (dict) observations
    :param eval_env: a goal env, or a ``VecEnv`` of them (wrap its envs in ``Monitor`` so that returns are
        the env's own, not a normalized version); envs report ``is_success``
    :param n_episodes: episodes to run (>= 1)
    :param deterministic: greedy actions (``True``) or sampled ones
    :param seed: seed of the first reset (the next resets continue its random stream); None continues the
        env's stream
    :param record_goals: also record each episode's :class:`EpisodeGoals` (``result.goals``)
    """
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

    if n_episodes < 1:
        raise ValueError(f"n_episodes must be >= 1, got {n_episodes}.")
    venv = eval_env if isinstance(eval_env, VecEnv) else DummyVecEnv([lambda: eval_env])
    if seed is not None:
        venv.seed(seed)
    successes: list[bool] = []
    goals: list[EpisodeGoals] = []
    starts: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def record_success(locals_: dict[str, Any], _globals: dict[str, Any]) -> None:
        if record_goals:
            index, observations = locals_["i"], locals_["observations"]
            if locals_["current_lengths"][index] == 1:  # the episode's first step: its first observation
                starts[index] = (
                    np.array(observations["achieved_goal"][index]),
                    np.array(observations["desired_goal"][index]),
                )
            if locals_["done"]:
                start, goal = starts.pop(index)
                end = np.array(locals_["info"]["terminal_observation"]["achieved_goal"])
                goals.append(EpisodeGoals(start, goal, end))
        if locals_["done"]:
            successes.append(bool(np.asarray(locals_["info"].get("is_success", False))))

    returns, lengths = evaluate_policy(
        agent,
        venv,
        n_eval_episodes=n_episodes,
        deterministic=deterministic,
        return_episode_rewards=True,
        callback=record_success,
        warn=False,
    )
    assert isinstance(returns, list) and isinstance(lengths, list)
    return EvaluationResult(
        [float(value) for value in returns], [int(value) for value in lengths], successes, goals
    )


def success_rate(
    model: Any,
    env: Any,
    n_episodes: int = 100,
    *,
    seed: int | None = None,
    deterministic: bool = True,
) -> float:
    """Share of ``n_episodes`` fresh episodes that end with ``info["is_success"]`` true.

    :param model: anything with ``predict``: a :class:`~her_wrap.HER`, or an SB3 model whose policy takes
        the env's dict observations
    :param env: a goal env (dict observations) or a VecEnv of them
    :param n_episodes: episodes to run
    :param seed: seed of the first reset (the next resets continue its random stream)
    :param deterministic: greedy actions (the default) or sampled ones
    :return: success rate in [0, 1]
    """
    return evaluate_agent(model, env, n_episodes, deterministic=deterministic, seed=seed).success_rate
