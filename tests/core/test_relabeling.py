"""Specification of hindsight relabeling (her_wrap.core.replay.HindsightReplay, her_wrap.core.goal_selection).

Each named trajectory of ``core_trajectories`` tags every achieved goal with ``[episode_id, step]``, so a
relabeled goal ``[g, s]`` says which episode and which observation it came from. A batch row whose
``achieved_goal`` is ``[e, t]`` is transition ``t`` of episode ``e``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from core_trajectories import (
    STRATEGIES,
    TRAJECTORIES,
    TRAJECTORY_IDS,
    Oracle,
    Trajectory,
    fed_replay,
    feed,
    make_replay,
    reward_fn,
    snapshot,
    stored_goal,
    stored_reward,
    stored_terminated,
    stored_truncated,
    terminated_fn,
)
from scipy import stats

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.replay import HindsightReplay

BATCH = 256
ONLINE = pytest.mark.parametrize("online", [True, False], ids=["online", "offline"])
ON_TRAJECTORIES = pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=TRAJECTORY_IDS)
SAME_EPISODE_STRATEGIES = ["future", "final", "episode"]


def _sample(trajectory: Trajectory, strategy: str, online: bool, **options: Any) -> tuple[dict, Oracle]:
    replay, oracle = fed_replay(trajectory, goal_selection_strategy=strategy, online=online, **options)
    return replay.sample(BATCH), oracle


def _episodes_and_steps(batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Episode id and step of each sampled transition, read from its achieved-goal tag."""
    return batch["achieved_goal"][:, 0].astype(int), batch["achieved_goal"][:, 1].astype(int)


def _relabeled_goals(batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(episode, step, goal_episode, goal_step)`` of the relabeled rows."""
    episodes, steps = _episodes_and_steps(batch)
    relabeled = batch["relabeled"]
    goals = batch["desired_goal"][relabeled].astype(int)
    return episodes[relabeled], steps[relabeled], goals[:, 0], goals[:, 1]


def _stored_steps(oracle: Oracle, episodes: np.ndarray) -> np.ndarray:
    """Steps stored for each episode: its length, or the steps so far for one in progress."""
    return np.array([oracle.episodes[episode].steps for episode in episodes], dtype=int)


# --------------------------------------------------------------------------------------------------
# Where a new goal comes from
# --------------------------------------------------------------------------------------------------


@ON_TRAJECTORIES
@ONLINE
@pytest.mark.parametrize("strategy", SAME_EPISODE_STRATEGIES)
def test_relabeled_goal_comes_from_the_transitions_own_episode_and_column(
    trajectory: Trajectory, online: bool, strategy: str
) -> None:
    batch, _ = _sample(trajectory, strategy, online)
    episodes, _, goal_episodes, _ = _relabeled_goals(batch)
    np.testing.assert_array_equal(goal_episodes, episodes)


@ON_TRAJECTORIES
@ONLINE
def test_random_goal_comes_from_a_stored_step_of_an_episode_not_overwritten(
    trajectory: Trajectory, online: bool
) -> None:
    batch, oracle = _sample(trajectory, "random", online)
    _, _, goal_episodes, goal_steps = _relabeled_goals(batch)
    # A goal [g, s] is the observation after step s - 1 of episode g: 1 <= s <= steps stored.
    origins = {
        (int(episode), int(step))
        for episode in goal_episodes
        if episode in oracle.live()
        for step in range(1, oracle.episodes[episode].steps + 1)
    }
    assert set(zip(goal_episodes.tolist(), goal_steps.tolist(), strict=True)) <= origins


@ON_TRAJECTORIES
@ONLINE
def test_future_goal_is_the_observation_after_a_step_j_with_t_le_j_le_end(
    trajectory: Trajectory, online: bool
) -> None:
    batch, oracle = _sample(trajectory, "future", online)
    episodes, steps, _, goal_steps = _relabeled_goals(batch)
    inside = (goal_steps >= steps + 1) & (goal_steps <= _stored_steps(oracle, episodes))
    assert inside.all(), f"out of [t + 1, T]: {np.c_[episodes, steps, goal_steps][~inside]}"


@ON_TRAJECTORIES
@ONLINE
def test_final_goal_is_the_episodes_last_stored_observation(trajectory: Trajectory, online: bool) -> None:
    batch, oracle = _sample(trajectory, "final", online)
    episodes, _, _, goal_steps = _relabeled_goals(batch)
    np.testing.assert_array_equal(goal_steps, _stored_steps(oracle, episodes))


@ON_TRAJECTORIES
@ONLINE
def test_episode_goal_is_one_of_the_episodes_stored_observations_after_a_step(
    trajectory: Trajectory, online: bool
) -> None:
    batch, oracle = _sample(trajectory, "episode", online)
    episodes, _, _, goal_steps = _relabeled_goals(batch)
    inside = (goal_steps >= 1) & (goal_steps <= _stored_steps(oracle, episodes))
    assert inside.all()


def test_future_goals_cover_every_step_from_t_on() -> None:
    """Inclusive of t (as SB3): transition 0 of a 3-step episode gets goals of steps 1, 2 and 3."""
    trajectory = Trajectory("one_episode_of_3", capacity=8, lengths=((3,),), n_steps=3)
    replay, _ = fed_replay(trajectory, goal_selection_strategy="future")
    batch = replay.sample(2000)
    _, steps, _, goal_steps = _relabeled_goals(batch)
    assert set(goal_steps[steps == 0].tolist()) == {1, 2, 3}


# --------------------------------------------------------------------------------------------------
# Which transitions are drawn, and what they read
# --------------------------------------------------------------------------------------------------


@ON_TRAJECTORIES
@ONLINE
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_drawn_transitions_belong_to_episodes_not_overwritten(
    trajectory: Trajectory, online: bool, strategy: str
) -> None:
    """Online: every live episode, in progress or not. Offline: only episodes that have ended."""
    batch, oracle = _sample(trajectory, strategy, online)
    episodes, _ = _episodes_and_steps(batch)
    assert set(episodes.tolist()) <= oracle.live(finished_only=not online)


@ON_TRAJECTORIES
@ONLINE
def test_next_observation_of_transition_t_is_observation_t_plus_1(
    trajectory: Trajectory, online: bool
) -> None:
    batch, _ = _sample(trajectory, "future", online)
    episodes, steps = _episodes_and_steps(batch)
    np.testing.assert_array_equal(batch["next_observation"], np.c_[episodes, steps + 1])


@ON_TRAJECTORIES
@ONLINE
def test_last_step_next_observation_is_the_final_observation_given_to_add(
    trajectory: Trajectory, online: bool
) -> None:
    """The final observation is [e, T]; the reset observation of the next episode would be [e + 1, 0]."""
    batch, oracle = _sample(trajectory, "future", online)
    episodes, steps = _episodes_and_steps(batch)
    last = np.array(
        [
            oracle.episodes[e].closed and t == oracle.episodes[e].steps - 1
            for e, t in zip(episodes, steps, strict=True)
        ]
    )
    np.testing.assert_array_equal(batch["next_achieved_goal"][last], np.c_[episodes, steps + 1][last])


# --------------------------------------------------------------------------------------------------
# How much of a batch is relabeled
# --------------------------------------------------------------------------------------------------


@ON_TRAJECTORIES
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("k", [1, 4])
def test_online_relabels_floor_of_batch_times_k_over_k_plus_1(
    trajectory: Trajectory, strategy: str, k: int
) -> None:
    batch, _ = _sample(trajectory, strategy, True, n_sampled_goal=k)
    assert batch["relabeled"].sum() == BATCH * k // (k + 1)


@pytest.mark.parametrize("trajectory", [t for t in TRAJECTORIES if t.name != "single_step_episode"], ids=str)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("k", [1, 4])
def test_offline_relabels_about_k_over_k_plus_1(trajectory: Trajectory, strategy: str, k: int) -> None:
    replay, _ = fed_replay(trajectory, goal_selection_strategy=strategy, online=False, n_sampled_goal=k)
    draws = 4000
    share = k / (k + 1)
    tolerance = 5 * np.sqrt(share * (1 - share) / draws)  # five binomial standard deviations
    assert abs(replay.sample(draws)["relabeled"].mean() - share) < tolerance


@ONLINE
def test_k_zero_relabels_nothing(online: bool) -> None:
    batch, _ = _sample(TRAJECTORIES[2], "future", online, n_sampled_goal=0)
    assert not batch["relabeled"].any()


# --------------------------------------------------------------------------------------------------
# Rewards, goals and flags of the batch
# --------------------------------------------------------------------------------------------------


@ON_TRAJECTORIES
@ONLINE
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_relabeled_reward_is_reward_fn_of_next_achieved_goal_and_new_goal(
    trajectory: Trajectory, online: bool, strategy: str
) -> None:
    batch, _ = _sample(trajectory, strategy, online)
    relabeled = batch["relabeled"]
    expected = reward_fn(batch["next_achieved_goal"][relabeled], batch["desired_goal"][relabeled], None)
    np.testing.assert_array_equal(batch["reward"][relabeled], expected)


@ON_TRAJECTORIES
@ONLINE
def test_relabeled_goal_is_also_the_next_observations_goal(trajectory: Trajectory, online: bool) -> None:
    batch, _ = _sample(trajectory, "future", online)
    relabeled = batch["relabeled"]
    np.testing.assert_array_equal(batch["next_desired_goal"][relabeled], batch["desired_goal"][relabeled])


@ON_TRAJECTORIES
@ONLINE
def test_rows_not_relabeled_keep_their_stored_reward(trajectory: Trajectory, online: bool) -> None:
    batch, _ = _sample(trajectory, "future", online)
    kept = ~batch["relabeled"]
    episodes, steps = _episodes_and_steps(batch)
    expected = [stored_reward(e, t) for e, t in zip(episodes[kept], steps[kept], strict=True)]
    np.testing.assert_array_equal(batch["reward"][kept], expected)


@ON_TRAJECTORIES
@ONLINE
def test_rows_not_relabeled_keep_their_stored_goal(trajectory: Trajectory, online: bool) -> None:
    batch, _ = _sample(trajectory, "future", online)
    kept = ~batch["relabeled"]
    episodes, _ = _episodes_and_steps(batch)
    expected = np.array([stored_goal(e) for e in episodes[kept]]).reshape(-1, 2)
    np.testing.assert_array_equal(batch["desired_goal"][kept], expected)


@ON_TRAJECTORIES
@ONLINE
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_relabeled_terminated_is_terminated_fn_of_the_new_goal(
    trajectory: Trajectory, online: bool, strategy: str
) -> None:
    batch, _ = _sample(trajectory, strategy, online, terminated_fn=terminated_fn)
    relabeled = batch["relabeled"]
    expected = terminated_fn(batch["next_achieved_goal"][relabeled], batch["desired_goal"][relabeled], None)
    np.testing.assert_array_equal(batch["terminated"][relabeled], expected)


@ONLINE
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_relabeled_terminated_is_false_without_terminated_fn(online: bool, strategy: str) -> None:
    """Every step of single-step episodes 0, 2, 4, ... is stored as terminated: none may be copied."""
    trajectory = Trajectory("single_steps", capacity=40, lengths=((1,),), n_steps=16)
    batch, _ = _sample(trajectory, strategy, online)
    assert not batch["terminated"][batch["relabeled"]].any()


@ON_TRAJECTORIES
@ONLINE
def test_rows_not_relabeled_keep_their_stored_terminated(trajectory: Trajectory, online: bool) -> None:
    batch, oracle = _sample(trajectory, "future", online, terminated_fn=terminated_fn)
    kept = ~batch["relabeled"]
    episodes, steps = _episodes_and_steps(batch)
    expected = [
        stored_terminated(e, t, oracle.episodes[e].steps if oracle.episodes[e].closed else -1)
        for e, t in zip(episodes[kept], steps[kept], strict=True)
    ]
    np.testing.assert_array_equal(batch["terminated"][kept], expected)


@ON_TRAJECTORIES
@ONLINE
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_truncation_is_kept_as_stored_on_every_row(
    trajectory: Trajectory, online: bool, strategy: str
) -> None:
    batch, oracle = _sample(trajectory, strategy, online, terminated_fn=terminated_fn)
    episodes, steps = _episodes_and_steps(batch)
    expected = [
        stored_truncated(e, t, oracle.episodes[e].steps if oracle.episodes[e].closed else -1)
        for e, t in zip(episodes, steps, strict=True)
    ]
    np.testing.assert_array_equal(batch["truncated"], expected)


# --------------------------------------------------------------------------------------------------
# Episodes in progress
# --------------------------------------------------------------------------------------------------

ONLY_OPEN = Trajectory("only_an_open_episode", capacity=20, lengths=((10,),), n_steps=4)


def test_an_episode_in_progress_is_sampled_online() -> None:
    replay, _ = fed_replay(ONLY_OPEN)
    assert replay.sample(BATCH)["achieved_goal"].shape == (BATCH, 2)


def test_online_final_goal_of_an_open_episode_is_the_newest_observation() -> None:
    replay, _ = fed_replay(ONLY_OPEN, goal_selection_strategy="final")
    _, _, _, goal_steps = _relabeled_goals(replay.sample(BATCH))
    assert set(goal_steps.tolist()) == {4}


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_an_episode_in_progress_alone_cannot_be_sampled_offline(prioritized: bool) -> None:
    replay, _ = fed_replay(ONLY_OPEN, online=False, prioritized=prioritized)
    with pytest.raises(ValueError, match="Cannot sample"):
        replay.sample(BATCH)


def test_offline_buffer_reports_no_sampleable_transition_before_an_episode_ends() -> None:
    replay, _ = fed_replay(ONLY_OPEN, online=False)
    assert len(replay) == 0


# --------------------------------------------------------------------------------------------------
# Seeds and copies
# --------------------------------------------------------------------------------------------------


@ONLINE
@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_same_seed_gives_the_same_samples(online: bool, prioritized: bool) -> None:
    trajectory = TRAJECTORIES[-1]
    first, _ = fed_replay(trajectory, online=online, prioritized=prioritized, seed=7)
    second, _ = fed_replay(trajectory, online=online, prioritized=prioritized, seed=7)
    a, b = first.sample(BATCH), second.sample(BATCH)
    assert all(np.array_equal(a[key], b[key]) for key in a)


@ONLINE
def test_changing_a_sample_changes_no_stored_data(online: bool) -> None:
    replay, _ = fed_replay(TRAJECTORIES[2], online=online)
    before = snapshot(replay)
    batch = replay.sample(BATCH)
    for array in batch.values():
        array[...] = array[::-1]  # scramble in place
    assert all(np.array_equal(before[key], value) for key, value in snapshot(replay).items())


# --------------------------------------------------------------------------------------------------
# Strategy names and option checks
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "member"), [("FUTURE", "future"), ("Final", "final"), (" episode ", "episode")]
)
def test_strategy_names_are_case_insensitive(name: str, member: str) -> None:
    assert make_replay(TRAJECTORIES[0], goal_selection_strategy=name).strategy is GoalSelectionStrategy(
        member
    )


def test_unknown_strategy_is_refused_with_the_valid_names() -> None:
    with pytest.raises(ValueError, match="'future', 'final', 'episode', 'random'"):
        make_replay(TRAJECTORIES[0], goal_selection_strategy="past")


@pytest.mark.parametrize("k", [-1, 1.5, True])
def test_k_must_be_a_non_negative_integer(k: Any) -> None:
    with pytest.raises(ValueError, match="n_sampled_goal"):
        make_replay(TRAJECTORIES[0], n_sampled_goal=k)


@pytest.mark.parametrize("batch_size", [0, -3, 2.5, "8", True, None])
def test_batch_size_must_be_a_positive_integer(batch_size: Any) -> None:
    replay, _ = fed_replay(TRAJECTORIES[1])
    with pytest.raises((ValueError, TypeError), match="batch_size"):
        replay.sample(batch_size)


@ONLINE
@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_sampling_an_empty_buffer_is_refused(online: bool, prioritized: bool) -> None:
    replay = make_replay(TRAJECTORIES[1], online=online, prioritized=prioritized)
    with pytest.raises(ValueError, match="add transitions first"):
        replay.sample(4)


# --------------------------------------------------------------------------------------------------
# Bad callables: a clear error, and the stored data as it was
# --------------------------------------------------------------------------------------------------


def _first_coordinate(values: np.ndarray) -> np.ndarray:
    return values[..., :1]


def _one_reward_per_goal_coordinate(achieved: np.ndarray, desired: np.ndarray, infos: Any) -> np.ndarray:
    return -np.abs(achieved - desired)  # shape (n, 2): not reduced over the goal


def _scalar_reward(achieved: np.ndarray, desired: np.ndarray, infos: Any) -> np.ndarray:
    return np.asarray(-1.0)


BAD_CALLABLES = {
    "goal_fn_changes_goal_shape": ({"goal_fn": _first_coordinate}, "goal_fn"),
    "reward_fn_not_reduced": ({"reward_fn": _one_reward_per_goal_coordinate}, "reward_fn returned shape"),
    "reward_fn_not_vectorized": ({"reward_fn": _scalar_reward}, "vectorized"),
}


@pytest.mark.parametrize("case", BAD_CALLABLES, ids=str)
def test_bad_callable_gets_an_error_naming_it(case: str) -> None:
    options, message = BAD_CALLABLES[case]
    replay, _ = fed_replay(TRAJECTORIES[2], **options)
    with pytest.raises(ValueError, match=message):
        replay.sample(BATCH)


@pytest.mark.parametrize("case", BAD_CALLABLES, ids=str)
def test_bad_callable_leaves_stored_data_intact(case: str) -> None:
    options, _ = BAD_CALLABLES[case]
    replay, _ = fed_replay(TRAJECTORIES[2], **options)
    before = snapshot(replay)
    with pytest.raises(ValueError):
        replay.sample(BATCH)
    assert all(np.array_equal(before[key], value) for key, value in snapshot(replay).items())


# --------------------------------------------------------------------------------------------------
# Prioritized replay inside HindsightReplay
# --------------------------------------------------------------------------------------------------


def _prioritized(trajectory: Trajectory, **options: Any) -> tuple[HindsightReplay, Oracle]:
    return fed_replay(trajectory, prioritized=True, **options)


def test_new_rows_get_the_largest_priority_seen() -> None:
    trajectory = Trajectory("two_episodes", capacity=20, lengths=((3,),), n_steps=6)
    replay, oracle = _prioritized(trajectory)
    slots = np.array(sorted(oracle.live_slots(1)))
    replay.update_priorities(slots, np.linspace(0.5, 7.0, slots.size))
    feed(replay, Trajectory("one_more", capacity=20, lengths=((2,),), n_steps=2, first_index=2), oracle)
    new_slots = np.array([oracle.slot(2, step, 1) for step in range(2)])
    strongest = replay.prioritizer.probabilities(slots[-1:])
    np.testing.assert_allclose(replay.prioritizer.probabilities(new_slots), np.repeat(strongest, 2))


@ONLINE
def test_prioritized_draw_frequencies_follow_priorities(online: bool) -> None:
    trajectory = Trajectory("four_episodes", capacity=40, lengths=((5,),), n_steps=20)
    replay, oracle = _prioritized(trajectory, online=online, alpha=1.0, seed=3)
    slots = np.array(sorted(oracle.live_slots(1)))
    priorities = np.arange(1.0, slots.size + 1.0)
    replay.update_priorities(slots, priorities)
    drawn = np.concatenate([replay.sample(BATCH)["indexes"] for _ in range(100)])
    observed = np.array([(drawn == slot).sum() for slot in slots])
    expected = (
        drawn.size * (priorities + replay.prioritizer.eps) / (priorities + replay.prioritizer.eps).sum()
    )
    assert stats.chisquare(observed, expected).pvalue > 1e-3


@ONLINE
def test_prioritized_sampling_never_draws_overwritten_rows(online: bool) -> None:
    trajectory = TRAJECTORIES[3]  # overwritten_episode: episode 0 lost its first rows
    replay, oracle = _prioritized(trajectory, online=online, seed=1)
    drawn = np.concatenate([replay.sample(BATCH)["indexes"] for _ in range(20)])
    assert set(drawn.tolist()) <= set(oracle.live_slots(1, finished_only=not online))


@ONLINE
def test_prioritized_sampling_never_draws_rows_of_an_episode_overwritten_after_a_priority_update(
    online: bool,
) -> None:
    """A high priority given before the ring overwrote the episode must not keep it drawable."""
    first = Trajectory("first", capacity=10, lengths=((4,),), n_steps=8)
    replay, oracle = _prioritized(first, online=online, seed=2)
    replay.update_priorities(np.arange(4), np.full(4, 100.0))  # episode 0, rows 0-3
    # Two 1-step episodes take rows 10-13, ring rows 0-3: episode 0 is gone.
    feed(replay, Trajectory("then", capacity=10, lengths=((1,),), n_steps=2, first_index=2), oracle)
    drawn = np.concatenate([replay.sample(BATCH)["achieved_goal"][:, 0] for _ in range(20)])
    assert 0 not in set(drawn.tolist())


@ONLINE
def test_prioritized_weights_lie_in_zero_one(online: bool) -> None:
    replay, oracle = _prioritized(TRAJECTORIES[5], online=online, seed=4)
    slots = np.array(sorted(oracle.live_slots(3, finished_only=not online)))
    replay.update_priorities(slots, np.linspace(0.0, 3.0, slots.size))
    weights = replay.sample(BATCH, beta=0.7)["weights"]
    assert np.all((weights > 0) & (weights <= 1))


BAD_PRIORITIES = {
    "nan": (lambda slots: slots, lambda n: np.full(n, np.nan), ValueError, "finite"),
    "negative": (lambda slots: slots, lambda n: -np.ones(n), ValueError, ">= 0"),
    "index_past_the_end": (lambda slots: slots + 10_000, lambda n: np.ones(n), ValueError, "must lie in"),
    "negative_index": (lambda slots: slots - 10_000, lambda n: np.ones(n), ValueError, "must lie in"),
    "float_indexes": (lambda slots: slots + 0.5, lambda n: np.ones(n), TypeError, "integers"),
    "length_mismatch": (lambda slots: slots, lambda n: np.ones(n + 1), ValueError, "one value per index"),
}


@pytest.mark.parametrize("case", BAD_PRIORITIES, ids=str)
def test_bad_priority_update_is_refused(case: str) -> None:
    make_indexes, make_priorities, error, message = BAD_PRIORITIES[case]
    replay, _ = _prioritized(TRAJECTORIES[5])
    indexes = replay.sample(8)["indexes"]
    with pytest.raises(error, match=message):
        replay.update_priorities(make_indexes(indexes), make_priorities(indexes.size))


@pytest.mark.parametrize("case", BAD_PRIORITIES, ids=str)
def test_bad_priority_update_leaves_priorities_and_data_intact(case: str) -> None:
    make_indexes, make_priorities, error, _ = BAD_PRIORITIES[case]
    replay, _ = _prioritized(TRAJECTORIES[5])
    indexes = replay.sample(8)["indexes"]
    replay.update_priorities(indexes, np.linspace(0.1, 2.0, indexes.size))
    before = snapshot(replay)
    with pytest.raises(error):
        replay.update_priorities(make_indexes(indexes), make_priorities(indexes.size))
    assert all(np.array_equal(before[key], value) for key, value in snapshot(replay).items())


def test_priority_updates_without_prioritized_replay_are_refused() -> None:
    replay, _ = fed_replay(TRAJECTORIES[1])
    with pytest.raises(ValueError, match="prioritized=True"):
        replay.update_priorities(np.array([0]), np.array([1.0]))
