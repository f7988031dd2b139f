"""Relabeled goals from a mix of sources: future, other episodes' desired goals, any achieved goal."""

from __future__ import annotations

import numpy as np
import pytest
from core_trajectories import (
    TRAJECTORIES,
    TRAJECTORY_IDS,
    fed_replay,
    reward_fn,
    stored_goal,
)

from her_wrap import HER, BitFlippingEnv, HindsightReplayBuffer, HindsightSettings
from her_wrap.core.goal_selection import GoalSource

MULTI_EPISODE = [trajectory for trajectory in TRAJECTORIES if trajectory.name != "single_step_episode"]


def relabeled_goals(replay, n: int = 400) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    batch = replay.sample(n)
    return batch["desired_goal"][batch["relabeled"]], batch


def is_desired_tag(goals: np.ndarray) -> np.ndarray:
    """Stored desired goals are tagged ``[-(e + 1), -1]``; achieved goals have a step >= 0."""
    return goals[:, 1] == -1


@pytest.mark.parametrize("trajectory", MULTI_EPISODE, ids=[t.name for t in MULTI_EPISODE])
def test_desired_source_takes_desired_goals_of_live_episodes(trajectory):
    replay, oracle = fed_replay(trajectory, goal_mix={"desired": 1.0})
    goals, _ = relabeled_goals(replay)
    live_goals = {tuple(stored_goal(episode)) for episode in oracle.live()}
    assert goals.size and is_desired_tag(goals).all() and {tuple(goal) for goal in goals} <= live_goals


@pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=TRAJECTORY_IDS)
def test_shares_are_followed(trajectory):
    replay, _ = fed_replay(trajectory, goal_mix={"future": 0.7, "desired": 0.3})
    goals, _ = relabeled_goals(replay, 2000)
    share = is_desired_tag(goals).mean()
    assert 0.25 < share < 0.35


@pytest.mark.parametrize("trajectory", MULTI_EPISODE, ids=[t.name for t in MULTI_EPISODE])
def test_achieved_sources_of_a_mix_keep_their_strategy(trajectory):
    """In a future / desired mix, every goal that is not a desired goal is a future goal of the same episode."""
    replay, _ = fed_replay(trajectory, goal_mix={"future": 0.5, "desired": 0.5})
    batch = replay.sample(600)
    rows = batch["relabeled"] & ~is_desired_tag(batch["desired_goal"])
    goal_episode, goal_step = batch["desired_goal"][rows].T
    episode, step = batch["observation"][rows].T
    assert rows.any() and (goal_episode == episode).all() and (goal_step >= step + 1).all()


def test_rewards_are_computed_against_the_mixed_goals():
    replay, _ = fed_replay(TRAJECTORIES[3], goal_mix={"future": 0.5, "desired": 0.5})
    batch = replay.sample(500)
    rows = batch["relabeled"]
    expected = reward_fn(batch["next_achieved_goal"][rows], batch["desired_goal"][rows], None)
    assert np.array_equal(batch["reward"][rows], expected)


def test_one_strategy_source_samples_as_the_strategy_does():
    """{"future": 1} is the future strategy itself: the same seed gives the same batch."""
    mixed, _ = fed_replay(TRAJECTORIES[2], goal_mix={"future": 1.0})
    plain, _ = fed_replay(TRAJECTORIES[2], goal_selection_strategy="future")
    assert np.array_equal(mixed.sample(64)["desired_goal"], plain.sample(64)["desired_goal"])


@pytest.mark.parametrize(
    ("mix", "online", "message"),
    [
        ({"futur": 1.0}, True, "Unknown goal source 'futur'"),
        ({"future": -0.5, "desired": 1.0}, True, "share of 'future' must be a number >= 0"),
        ({"future": 0.0}, True, "must sum to more than 0"),
        ("future", True, "goal_mix must map goal sources to shares"),
        ({"future": 0.5, "desired": 0.5}, False, "use it with online=True"),
    ],
)
def test_bad_goal_mix_is_refused(mix, online, message):
    with pytest.raises(ValueError, match=message):
        HindsightSettings(goal_mix=mix, online=online)  # type: ignore[arg-type]


def test_shares_are_normalized_in_source_order():
    settings = HindsightSettings(goal_mix={"random": 1, "future": 3})  # type: ignore[arg-type]
    assert settings.goal_sources == ((GoalSource.FUTURE, 0.75), (GoalSource.RANDOM, 0.25))


def test_her_takes_a_goal_mix_and_keeps_it_through_save_and_load(tmp_path):
    env = BitFlippingEnv(n_bits=4)
    model = HER("MlpPolicy", env, "dqn", goal_mix={"future": 0.8, "desired": 0.2}, learning_starts=20)
    model.learn(40)
    model.save(tmp_path / "model")
    loaded = HER.load(tmp_path / "model", env=env)
    assert loaded.settings.goal_mix == ((GoalSource.FUTURE, 0.8), (GoalSource.DESIRED, 0.2))


def test_standalone_buffer_takes_desired_goals_given_at_episode_end():
    buffer = HindsightReplayBuffer(
        100,
        {"obs": {"shape": 2}, "act": {"shape": 1}, "next_obs": {"shape": 2}},
        max_episode_len=5,
        reward_func=lambda next_obs, act, goal: -(next_obs != goal).any(axis=1).astype(np.float32),
        goal_mix={"desired": 1.0},
        prioritized=False,
        seed=0,
    )
    for episode, goal in enumerate(([7.0, 7.0], [8.0, 8.0])):
        for step in range(5):
            buffer.add(obs=[episode, step], act=0, next_obs=[episode, step + 1])
        buffer.on_episode_end(np.array(goal))
    goals = {tuple(goal) for goal in buffer.sample(200)["goal"]}
    assert goals == {(7.0, 7.0), (8.0, 8.0)}
