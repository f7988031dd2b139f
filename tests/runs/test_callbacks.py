"""Periodic greedy evaluation of a run (:class:`her_wrap.runs.callbacks.SuccessEvalCallback`) and its
training-time budget (:class:`her_wrap.runs.callbacks.TrainingTimeBudget`)."""

from __future__ import annotations

import pytest
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback

from her_wrap import HER, BitFlippingEnv
from her_wrap.runs import callbacks
from her_wrap.runs.callbacks import SuccessEvalCallback, TrainingTimeBudget


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


class Clock:
    """A stand-in for ``time.perf_counter`` that an env step moves on by ``step`` seconds."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        return self.now


class Tick(BaseCallback):
    def __init__(self, clock: Clock) -> None:
        super().__init__(verbose=0)
        self.clock = clock

    def _on_step(self) -> bool:
        self.clock.now += self.clock.step
        return True


def budget_run(monkeypatch: pytest.MonkeyPatch, budget: TrainingTimeBudget, clock: Clock) -> HER:
    """Train DQN (a training cycle every 4 env steps) for up to 200 steps, one env step ``clock.step`` seconds."""
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    model = agent()
    model.learn(200, callback=[Tick(clock), budget])
    return model


def test_a_time_budget_stops_at_the_first_step_of_the_first_cycle_past_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 10 s a step, 1 minute: the cycle starting after step 8 (80 s) is the first past it; its first step ends.
    budget = TrainingTimeBudget(1.0)
    model = budget_run(monkeypatch, budget, Clock(10.0))
    assert budget.spent and model.num_timesteps == 9


def test_a_time_budget_leaves_the_evaluations_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # 30 s of evaluations: 50 s trained at step 8, 90 s at step 12.
    budget = TrainingTimeBudget(1.0, lambda: 30.0)
    model = budget_run(monkeypatch, budget, Clock(10.0))
    assert budget.spent and model.num_timesteps == 13


def test_an_unspent_time_budget_lets_training_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    budget = TrainingTimeBudget(1.0)
    model = budget_run(monkeypatch, budget, Clock(0.01))
    assert not budget.spent and model.num_timesteps == 200


@pytest.mark.parametrize(("leads", "others_due", "stops_at"), [(False, 1, 1), (False, 0, 200), (True, 0, 9)])
def test_workers_stop_on_the_leading_workers_clock(
    monkeypatch: pytest.MonkeyPatch, leads: bool, others_due: int, stops_at: int
) -> None:
    """A worker that does not lead never stops on its own clock; any worker's due budget stops them all."""
    from her_wrap.runs import workers

    monkeypatch.setattr(workers, "largest", lambda value: max(value, others_due))
    budget = TrainingTimeBudget(1.0, synchronized=True, leads=leads)
    model = budget_run(monkeypatch, budget, Clock(10.0))
    assert model.num_timesteps == stops_at
