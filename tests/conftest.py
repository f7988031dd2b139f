"""Shared fixtures: the tiny learner settings that keep HER tests to a few seconds each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings

from her_wrap.core.goal_selection import GoalSelectionStrategy

# Property tests check results, not speed (speed lives in scripts/bench_*.py): no per-example deadline, which a
# loaded machine would turn into failures.
settings.register_profile("her_wrap", deadline=None)
settings.load_profile("her_wrap")


@pytest.fixture(scope="session")
def tiny_learner_kwargs() -> Callable[[], dict[str, Any]]:
    """A factory of learner kwargs for runs of a few hundred steps (training after 100, one 32-unit layer).

    A factory, not a dict: stable-baselines3 writes into the ``policy_kwargs`` it is given (SAC adds
    ``use_sde``, which TD3's policy then rejects), so every model needs its own copy.
    """

    def make() -> dict[str, Any]:
        return {"learning_starts": 100, "batch_size": 32, "policy_kwargs": {"net_arch": [32]}}

    return make


@pytest.fixture
def strategy_parses(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every value GoalSelectionStrategy.parse is called with, from now on."""
    calls: list[object] = []
    parse = GoalSelectionStrategy.parse.__func__  # type: ignore[attr-defined]

    def counting(cls: type, value: object) -> object:
        calls.append(value)
        return parse(cls, value)

    monkeypatch.setattr(GoalSelectionStrategy, "parse", classmethod(counting))
    return calls
