"""Invariants of hindsight relabeling under random episode lengths, env columns and ring capacities.

Each example feeds a ``core_trajectories.Trajectory`` drawn by hypothesis (1-3 columns cycling through
episode lengths 1-5, a ring of a few rows more than the longest episode, up to four ring lengths of
steps so the ring wraps and overwrites) and checks one invariant on a sampled batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from core_trajectories import (
    STRATEGIES,
    Oracle,
    Trajectory,
    assert_same_state,
    fed_replay,
    reward_fn,
    snapshot,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

BATCH = 64
EXAMPLES = settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def trajectories(draw: st.DrawFn) -> Trajectory:
    n_envs = draw(st.integers(1, 3))
    lengths = tuple(tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))) for _ in range(n_envs))
    longest = max(max(cycle) for cycle in lengths)
    rows = draw(st.integers(longest + 1, 2 * longest + 4))
    capacity = rows * n_envs + draw(st.integers(0, n_envs - 1))  # a remainder the columns must not use
    return Trajectory("drawn", capacity=capacity, lengths=lengths, n_steps=draw(st.integers(1, 4 * rows)))


def _sampled(trajectory: Trajectory, strategy: str, online: bool, seed: int) -> tuple[dict[str, Any], Oracle]:
    replay, oracle = fed_replay(trajectory, goal_selection_strategy=strategy, online=online, seed=seed)
    assume(len(replay) > 0)  # offline, the only episodes may still be in progress
    return replay.sample(BATCH), oracle


def _tags(batch: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Episode and step of each relabeled transition, and episode and step of its new goal."""
    relabeled = batch["relabeled"]
    transitions = batch["achieved_goal"][relabeled].astype(int)
    goals = batch["desired_goal"][relabeled].astype(int)
    return transitions[:, 0], transitions[:, 1], goals[:, 0], goals[:, 1]


seeds = st.integers(0, 2**32 - 1)


@EXAMPLES
@given(trajectories(), st.sampled_from(["future", "final", "episode"]), st.booleans(), seeds)
def test_goal_comes_from_the_same_episode_and_column(
    trajectory: Trajectory, strategy: str, online: bool, seed: int
) -> None:
    batch, _ = _sampled(trajectory, strategy, online, seed)
    episodes, _, goal_episodes, _ = _tags(batch)
    np.testing.assert_array_equal(goal_episodes, episodes)


@EXAMPLES
@given(trajectories(), st.booleans(), seeds)
def test_future_goal_follows_a_step_j_with_t_le_j_le_end(
    trajectory: Trajectory, online: bool, seed: int
) -> None:
    batch, oracle = _sampled(trajectory, "future", online, seed)
    episodes, steps, _, goal_steps = _tags(batch)
    ends = np.array([oracle.episodes[episode].steps for episode in episodes], dtype=int)
    assert np.all((goal_steps >= steps + 1) & (goal_steps <= ends))


@EXAMPLES
@given(trajectories(), st.booleans(), seeds)
def test_final_goal_is_the_last_stored_observation(trajectory: Trajectory, online: bool, seed: int) -> None:
    batch, oracle = _sampled(trajectory, "final", online, seed)
    episodes, _, _, goal_steps = _tags(batch)
    np.testing.assert_array_equal(goal_steps, [oracle.episodes[episode].steps for episode in episodes])


@EXAMPLES
@given(trajectories(), st.sampled_from(STRATEGIES), st.booleans(), seeds)
def test_reward_is_reward_fn_of_next_achieved_goal_and_goal(
    trajectory: Trajectory, strategy: str, online: bool, seed: int
) -> None:
    batch, _ = _sampled(trajectory, strategy, online, seed)
    relabeled = batch["relabeled"]
    expected = reward_fn(batch["next_achieved_goal"][relabeled], batch["desired_goal"][relabeled], None)
    np.testing.assert_array_equal(batch["reward"][relabeled], expected)


@EXAMPLES
@given(trajectories(), st.sampled_from(STRATEGIES), st.booleans(), seeds)
def test_transitions_and_goals_never_come_from_overwritten_episodes(
    trajectory: Trajectory, strategy: str, online: bool, seed: int
) -> None:
    batch, oracle = _sampled(trajectory, strategy, online, seed)
    _, _, goal_episodes, _ = _tags(batch)
    drawn = set(batch["achieved_goal"][:, 0].astype(int).tolist())
    assert drawn | set(goal_episodes.tolist()) <= oracle.live()


@EXAMPLES
@given(trajectories(), st.sampled_from(STRATEGIES), st.booleans(), st.booleans(), seeds)
def test_same_seed_gives_identical_samples(
    trajectory: Trajectory, strategy: str, online: bool, prioritized: bool, seed: int
) -> None:
    options = {
        "goal_selection_strategy": strategy,
        "online": online,
        "prioritized": prioritized,
        "seed": seed,
    }
    first, _ = fed_replay(trajectory, **options)
    second, _ = fed_replay(trajectory, **options)
    assume(len(first) > 0)
    batches = [(first.sample(BATCH), second.sample(BATCH)) for _ in range(2)]
    assert all(np.array_equal(a[key], b[key]) for a, b in batches for key in a)


def _scramble(batch: dict[str, Any]) -> None:
    for array in batch.values():
        array[...] = array[::-1]
        array.flat[0] = not array.flat[0] if array.dtype == bool else 12345


@EXAMPLES
@given(trajectories(), st.sampled_from(STRATEGIES), st.booleans(), seeds)
def test_changing_a_sample_leaves_the_storage_unchanged(
    trajectory: Trajectory, strategy: str, online: bool, seed: int
) -> None:
    replay, _ = fed_replay(trajectory, goal_selection_strategy=strategy, online=online, seed=seed)
    assume(len(replay) > 0)
    before = snapshot(replay)
    _scramble(replay.sample(BATCH))
    assert_same_state(before, snapshot(replay))


@EXAMPLES
@given(trajectories(), st.sampled_from(STRATEGIES), st.booleans(), seeds)
def test_changing_a_sample_leaves_the_next_sample_unchanged(
    trajectory: Trajectory, strategy: str, online: bool, seed: int
) -> None:
    """Two buffers fed and seeded alike: scrambling the first one's sample must not show in its next one."""
    options = {"goal_selection_strategy": strategy, "online": online, "seed": seed}
    changed, _ = fed_replay(trajectory, **options)
    untouched, _ = fed_replay(trajectory, **options)
    assume(len(changed) > 0)
    _scramble(changed.sample(BATCH))
    untouched.sample(BATCH)
    second, reference = changed.sample(BATCH), untouched.sample(BATCH)
    assert all(np.array_equal(second[key], reference[key]) for key in second)


@EXAMPLES
@given(trajectories(), st.sampled_from(STRATEGIES), st.integers(0, 6), seeds)
def test_online_relabels_exactly_floor_of_batch_times_k_over_k_plus_1(
    trajectory: Trajectory, strategy: str, k: int, seed: int
) -> None:
    replay, _ = fed_replay(trajectory, goal_selection_strategy=strategy, n_sampled_goal=k, seed=seed)
    assert replay.sample(BATCH)["relabeled"].sum() == BATCH * k // (k + 1)
