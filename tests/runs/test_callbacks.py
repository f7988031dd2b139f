"""Periodic greedy evaluation of a run (:class:`her_wrap.runs.callbacks.SuccessEvalCallback`)."""

from __future__ import annotations

from stable_baselines3 import DQN

from her_wrap import HER, BitFlippingEnv
from her_wrap.runs.callbacks import SuccessEvalCallback


def agent() -> HER:
    return HER("MultiInputPolicy", BitFlippingEnv(n_bits=4), DQN, learning_starts=10_000, seed=0)


def test_the_curve_holds_one_point_per_evaluation_and_one_at_the_end() -> None:
    model = agent()
    callback = SuccessEvalCallback(
        model, BitFlippingEnv(n_bits=4), eval_freq=40, n_eval_episodes=2, verbose=0
    )
    model.learn(100, callback=callback)
    steps, successes, seconds = callback.curve()
    assert steps == [40, 80, 100]
    assert len(successes) == len(seconds) == 3 and all(0.0 <= value <= 1.0 for value in successes)


def test_a_training_time_budget_stops_training_and_closes_the_curve() -> None:
    model = agent()
    callback = SuccessEvalCallback(
        model, BitFlippingEnv(n_bits=4), eval_freq=1_000, n_eval_episodes=2, max_train_seconds=0.0, verbose=0
    )
    model.learn(500, callback=callback)
    steps, _, _ = callback.curve()
    assert model.num_timesteps < 500
    assert steps == [model.num_timesteps]
