"""Specification of her_wrap's cpprb-compatible HindsightReplayBuffer (her_wrap.core.hindsight_replay_buffer).

Most tests tag every state with ``(episode, step, 0)`` and map states to goals with ``goal_func = s[:, :2]``,
so a goal shows where it came from: ``(e, s)`` is the state reached after step ``s - 1`` of episode ``e``.
The goal an episode was played for is ``(e, -1)``, which no state has.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

from her_wrap.core.hindsight_replay_buffer import HindsightReplayBuffer
from her_wrap.core.settings import HindsightSettings

cpprb = pytest.importorskip("cpprb")

N_BITS = 6
TAGGED_ENV_DICT = {"obs": {"shape": 3}, "act": {"shape": 1, "dtype": np.int64}, "next_obs": {"shape": 3}}


def bit_reward(next_state: np.ndarray, action: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """The reward of cpprb's bit-flipping example: 0 when every bit matches, else -1."""
    return -1 * (next_state != goal).any(axis=1)


def tag_reward(next_state: np.ndarray, action: np.ndarray, goal: np.ndarray) -> np.ndarray:
    """Reward that encodes its inputs, so a test can check it was computed from the returned row."""
    return (100 * next_state[:, 0] + next_state[:, 1] + 0.5 * (next_state[:, :2] == goal).all(axis=1)).astype(
        np.float32
    )


def tag_goal(states: np.ndarray) -> np.ndarray:
    return states[:, :2]


def cpprb_bit_flipping_usage(buffer_class: type, *, prioritized: bool) -> dict[str, np.ndarray]:
    """cpprb's documented HER loop (bit flipping, add / on_episode_end / sample / update_priorities),
    written against cpprb's API only: the class is the one thing that changes."""
    rng = np.random.default_rng(0)
    rb = buffer_class(
        200,
        {"obs": {"shape": N_BITS}, "act": {"shape": 1, "dtype": np.ubyte}, "next_obs": {"shape": N_BITS}},
        max_episode_len=N_BITS,
        reward_func=bit_reward,
        prioritized=prioritized,
    )
    for _ in range(8):
        obs = rng.integers(0, 2, N_BITS).astype(np.float32)
        goal = rng.integers(0, 2, N_BITS).astype(np.float32)
        for _ in range(N_BITS):
            act = int(rng.integers(N_BITS))
            next_obs = obs.copy()
            next_obs[act] = 1 - next_obs[act]
            rb.add(obs=obs, act=act, next_obs=next_obs)
            obs = next_obs
            if (obs == goal).all():
                break
        rb.on_episode_end(goal)
    sample = rb.sample(32)
    if prioritized:
        rb.update_priorities(sample["indexes"], rng.random(32) + 0.1)
    return sample


def layout(batch: dict[str, np.ndarray]) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of every field of a batch."""
    return {key: (value.shape, value.dtype) for key, value in batch.items()}


def fill_tagged(rb: HindsightReplayBuffer, episodes: int, length: int, *, first: int = 0) -> None:
    """Store ``episodes`` episodes of ``length`` steps; states are tagged ``(episode, step, 0)``."""
    for episode in range(first, first + episodes):
        for step in range(length):
            rb.add(obs=[episode, step, 0], act=step, next_obs=[episode, step + 1, 0])
        rb.on_episode_end([episode, -1])


def tagged_buffer(**overrides: Any) -> HindsightReplayBuffer:
    options: dict[str, Any] = {
        "size": 400,
        "env_dict": TAGGED_ENV_DICT,
        "max_episode_len": 10,
        "reward_func": tag_reward,
        "goal_func": tag_goal,
        "goal_shape": 2,
        "seed": 0,
    }
    options.update(overrides)
    return HindsightReplayBuffer(**options)


def stored(rb: HindsightReplayBuffer) -> dict[str, np.ndarray]:
    return rb.get_all_transitions()


def assert_same_data(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> None:
    assert before.keys() == after.keys()
    for key in before:
        np.testing.assert_array_equal(before[key], after[key], err_msg=key)


# ---------------------------------------------------------------- cpprb compatibility
@pytest.mark.parametrize("prioritized", [True, False], ids=["prioritized", "uniform"])
def test_cpprb_code_runs_unchanged_and_returns_cpprb_keys_shapes_and_dtypes(prioritized: bool) -> None:
    ours = cpprb_bit_flipping_usage(HindsightReplayBuffer, prioritized=prioritized)
    theirs = cpprb_bit_flipping_usage(cpprb.HindsightReplayBuffer, prioritized=prioritized)
    assert layout(ours) == layout(theirs)


def test_get_all_transitions_has_cpprb_fields_and_dtypes() -> None:
    def fields(buffer_class: type) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        rb = buffer_class(100, TAGGED_ENV_DICT, 10, tag_reward, goal_func=tag_goal, goal_shape=2)
        rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0])
        rb.on_episode_end([0, -1])
        return {key: (value.shape[1:], value.dtype) for key, value in rb.get_all_transitions().items()}

    assert fields(HindsightReplayBuffer) == fields(cpprb.HindsightReplayBuffer)


def test_defaults_match_cpprb() -> None:
    rb = tagged_buffer()
    assert (rb.strategy.value, rb.additional_goals, rb.prioritized, rb.replay.prioritizer is not None) == (
        "future",
        4,
        True,
        True,
    )


def test_alpha_and_eps_default_to_cpprb_prioritized_replay_buffer() -> None:
    prioritizer = tagged_buffer().replay.prioritizer
    assert prioritizer is not None and (prioritizer.alpha, prioritizer.eps) == (0.6, 1e-4)


# ---------------------------------------------------------------- goals and rewards
def test_reward_is_reward_func_of_the_returned_row() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 6, 10)
    batch = rb.sample(256)
    np.testing.assert_array_equal(
        batch["rew"][:, 0], tag_reward(batch["next_obs"], batch["act"], batch["goal"])
    )


def test_reward_is_reward_func_of_the_returned_row_offline() -> None:
    rb = tagged_buffer(online=False)
    fill_tagged(rb, 6, 10)
    batch = rb.sample(256)
    np.testing.assert_array_equal(
        batch["rew"][:, 0], tag_reward(batch["next_obs"], batch["act"], batch["goal"])
    )


@pytest.mark.parametrize("online", [True, False], ids=["online", "offline"])
def test_every_goal_comes_from_the_transitions_own_episode(online: bool) -> None:
    rb = tagged_buffer(online=online)
    fill_tagged(rb, 6, 10)
    batch = rb.sample(512)
    np.testing.assert_array_equal(batch["goal"][:, 0], batch["obs"][:, 0])


def test_future_goals_are_reached_at_or_after_the_transitions_step() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 6, 10)
    batch = rb.sample(512)
    relabeled = batch["goal"][:, 1] >= 0
    # next_state[j] for j >= t is tagged with step j + 1 >= t + 1.
    assert (batch["goal"][relabeled, 1] >= batch["obs"][relabeled, 1] + 1).all()


@pytest.mark.parametrize(
    ("strategy", "allowed_steps"),
    [("final", {10.0}), ("episode", set(range(1, 11))), ("random", set(range(1, 11)))],
)
def test_relabeled_goals_are_next_states_the_strategy_allows(
    strategy: str, allowed_steps: set[float]
) -> None:
    rb = tagged_buffer(strategy=strategy)
    fill_tagged(rb, 6, 10)
    goals = rb.sample(512)["goal"]
    assert set(goals[goals[:, 1] >= 0, 1].tolist()) <= allowed_steps


def test_random_goals_may_come_from_other_episodes() -> None:
    rb = tagged_buffer(strategy="random")
    fill_tagged(rb, 6, 10)
    batch = rb.sample(512)
    relabeled = batch["goal"][:, 1] >= 0
    assert (batch["goal"][relabeled, 0] != batch["obs"][relabeled, 0]).any()


def test_final_strategy_counts_additional_goals_as_one_like_cpprb() -> None:
    assert tagged_buffer(strategy="final", additional_goals=4).additional_goals == 1


def test_online_relabels_a_share_k_over_k_plus_one_of_the_batch() -> None:
    rb = tagged_buffer(additional_goals=3)
    fill_tagged(rb, 6, 10)
    assert int((rb.sample(400)["goal"][:, 1] >= 0).sum()) == 300


def test_original_goal_is_the_one_passed_to_on_episode_end() -> None:
    rb = tagged_buffer(additional_goals=0)
    fill_tagged(rb, 6, 10)
    batch = rb.sample(128)
    np.testing.assert_array_equal(batch["goal"], np.stack([batch["obs"][:, 0], np.full(128, -1.0)], axis=1))


def test_same_seed_gives_the_same_samples() -> None:
    batches = []
    for _ in range(2):
        rb = tagged_buffer(seed=7)
        fill_tagged(rb, 6, 10)
        batches.append(rb.sample(64))
    assert_same_data(batches[0], batches[1])


def test_sampling_leaves_the_stored_data_unchanged() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 6, 10)
    before = stored(rb)
    rb.sample(256)
    assert_same_data(before, stored(rb))


# ---------------------------------------------------------------- adding and sizes
def test_several_rows_in_one_add_equal_one_row_per_add() -> None:
    one_by_one, at_once = tagged_buffer(), tagged_buffer()
    fill_tagged(one_by_one, 1, 4)
    steps = np.arange(4)
    at_once.add(
        obs=np.stack([np.zeros(4), steps, np.zeros(4)], axis=1),
        act=steps,
        next_obs=np.stack([np.zeros(4), steps + 1, np.zeros(4)], axis=1),
    )
    at_once.on_episode_end([0, -1])
    assert_same_data(stored(one_by_one), stored(at_once))


def test_get_all_transitions_returns_real_transitions_with_original_goals_and_rewards() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 2, 3)
    everything = stored(rb)
    expected_goals = np.array([[0, -1]] * 3 + [[1, -1]] * 3, dtype=np.float32)
    np.testing.assert_array_equal(everything["goal"], expected_goals)
    np.testing.assert_array_equal(
        everything["rew"][:, 0], tag_reward(everything["next_obs"], everything["act"], everything["goal"])
    )


def test_shuffled_transitions_are_a_permutation_of_the_stored_ones() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 3, 5)
    ordered, shuffled = rb.get_all_transitions(), rb.get_all_transitions(shuffle=True)
    assert sorted(map(tuple, shuffled["obs"].tolist())) == sorted(map(tuple, ordered["obs"].tolist()))


def test_add_ignores_fields_outside_env_dict_like_cpprb() -> None:
    rb = tagged_buffer()
    rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0], done=1)
    rb.on_episode_end([0, -1])
    assert "done" not in stored(rb)


def test_size_counts_real_transitions_not_relabeled_copies() -> None:
    rb = tagged_buffer(size=100, max_episode_len=10)
    fill_tagged(rb, 25, 10)
    assert (rb.get_stored_size(), rb.get_buffer_size()) == (100, 100)


def test_buffer_size_rounds_up_to_whole_episodes() -> None:
    assert tagged_buffer(size=95, max_episode_len=10).get_buffer_size() == 100


def test_a_full_buffer_forgets_the_oldest_episodes() -> None:
    rb = tagged_buffer(size=30, max_episode_len=10)
    fill_tagged(rb, 5, 10)
    assert np.unique(stored(rb)["obs"][:, 0]).tolist() == [2.0, 3.0, 4.0]


def test_on_episode_end_without_steps_does_nothing() -> None:
    rb = tagged_buffer()
    rb.on_episode_end([0, -1])
    assert rb.get_stored_size() == 0


def test_staged_steps_are_not_stored_before_on_episode_end() -> None:
    rb = tagged_buffer()
    rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0])
    assert rb.get_stored_size() == 0


def test_clear_drops_stored_and_staged_data() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 2, 5)
    rb.add(obs=[9, 0, 0], act=0, next_obs=[9, 1, 0])
    rb.clear()
    rb.on_episode_end([9, -1])
    assert rb.get_stored_size() == 0


# ---------------------------------------------------------------- compact storage
def test_compact_storage_returns_next_state_of_each_step() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 3, 5)
    batch = rb.sample(64)
    np.testing.assert_array_equal(batch["next_obs"][:, 1], batch["obs"][:, 1] + 1)


def test_compact_storage_refuses_an_episode_whose_next_state_is_not_the_next_state() -> None:
    rb = tagged_buffer()
    rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0])
    rb.add(obs=[0, 5, 0], act=1, next_obs=[0, 6, 0])
    with pytest.raises(ValueError, match="compact=False"):
        rb.on_episode_end([0, -1])


def test_compact_refusal_keeps_the_stored_data() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 2, 5)
    before = stored(rb)
    rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0])
    rb.add(obs=[0, 5, 0], act=1, next_obs=[0, 6, 0])
    with pytest.raises(ValueError):
        rb.on_episode_end([0, -1])
    assert_same_data(before, stored(rb))


def test_not_compact_storage_returns_states_exactly_as_added() -> None:
    rb = tagged_buffer(compact=False)
    rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0])
    rb.add(obs=[0, 5, 0], act=1, next_obs=[0, 6, 0])
    rb.on_episode_end([0, -1])
    everything = stored(rb)
    np.testing.assert_array_equal(
        np.concatenate([everything["obs"], everything["next_obs"]], axis=1),
        [[0, 0, 0, 0, 1, 0], [0, 5, 0, 0, 6, 0]],
    )


def test_not_compact_storage_draws_goals_from_next_states() -> None:
    rb = tagged_buffer(compact=False, strategy="final")
    rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0])
    rb.add(obs=[0, 5, 0], act=1, next_obs=[0, 6, 0])
    rb.on_episode_end([0, -1])
    assert set(np.unique(rb.sample(64)["goal"][:, 1]).tolist()) == {-1.0, 6.0}


# ---------------------------------------------------------------- priorities
def test_update_priorities_steers_sampling() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 4, 10)
    everything = rb.sample(256)
    indexes = np.unique(everything["indexes"])
    hot = indexes[0]
    rb.update_priorities(indexes, np.where(indexes == hot, 100.0, 0.0))
    assert np.mean(rb.sample(256)["indexes"] == hot) > 0.9


def test_update_priorities_accepts_a_column_of_priorities() -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 2, 10)
    batch = rb.sample(8)
    rb.update_priorities(batch["indexes"], np.full((8, 1), 3.0))
    assert rb.get_max_priority() == 3.0


def test_max_priority_starts_at_one() -> None:
    assert tagged_buffer().get_max_priority() == 1.0


def test_uniform_buffer_returns_no_weights_or_indexes() -> None:
    rb = tagged_buffer(prioritized=False)
    fill_tagged(rb, 2, 10)
    assert sorted(rb.sample(8)) == ["act", "goal", "next_obs", "obs", "rew"]


# ---------------------------------------------------------------- n-step returns
def expected_n_step(
    batch: dict[str, np.ndarray], n: int, gamma: float, lengths: dict[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reward, next state and discount of each row of a tagged sample, summed by hand for its goal."""
    rewards, next_states, discounts = [], [], []
    for state, goal in zip(batch["obs"], batch["goal"], strict=True):
        episode, step = int(state[0]), int(state[1])
        window = min(n, lengths[episode] - step)
        reached = [np.array([[episode, step + i + 1, 0]], dtype=np.float32) for i in range(window)]
        rewards.append(sum(gamma**i * tag_reward(s, None, goal[None])[0] for i, s in enumerate(reached)))
        next_states.append(reached[-1][0])
        discounts.append(gamma**window)
    return np.array(rewards), np.array(next_states), np.array(discounts)


@pytest.mark.parametrize("online", [True, False], ids=["online", "offline"])
def test_nstep_sums_each_rows_rewards_for_its_own_goal_up_to_the_episode_end(online: bool) -> None:
    rb = tagged_buffer(Nstep={"size": 3, "gamma": 0.5}, online=online)
    lengths = {0: 6, 1: 2, 2: 9}
    for episode, length in lengths.items():
        fill_tagged(rb, 1, length, first=episode)
    batch = rb.sample(400)
    rewards, next_states, discounts = expected_n_step(batch, 3, 0.5, lengths)
    np.testing.assert_allclose(batch["rew"][:, 0], rewards, rtol=1e-6)
    np.testing.assert_array_equal(batch["next_obs"], next_states)
    np.testing.assert_allclose(batch["discounts"][:, 0], discounts, rtol=1e-6)
    relabeled = batch["goal"][:, 1] >= 0
    assert relabeled.any() and (~relabeled).any()
    # Windows of 1, 2 and 3 steps all occur: the episode end cuts the window short.
    assert set(np.round(np.log(discounts) / np.log(0.5)).astype(int)) == {1, 2, 3}


@pytest.mark.parametrize("compact", [True, False], ids=["compact", "not-compact"])
def test_nstep_worked_example_of_the_docstring(compact: bool) -> None:
    rb = tagged_buffer(Nstep={"size": 3, "gamma": 0.5}, additional_goals=0, compact=compact)
    fill_tagged(rb, 1, 6)
    batch = rb.sample(200)
    row = int(np.flatnonzero(batch["obs"][:, 1] == 4)[0])
    # r_4 + g * r_5, for the episode's goal (0, -1), which no state reaches: 100 * 0 + 5, then + 6.
    assert batch["rew"][row, 0] == pytest.approx(5 + 0.5 * 6)
    np.testing.assert_array_equal(batch["next_obs"][row], [0, 6, 0])
    assert batch["discounts"][row, 0] == pytest.approx(0.25)


def test_nstep_of_size_one_is_the_one_step_sample_with_discounts() -> None:
    plain, nstep = tagged_buffer(), tagged_buffer(Nstep={"size": 1, "gamma": 0.9})
    for rb in (plain, nstep):
        fill_tagged(rb, 4, 5)
    one_step, with_discounts = plain.sample(64), nstep.sample(64)
    np.testing.assert_allclose(with_discounts.pop("discounts"), np.full((64, 1), 0.9, np.float32))
    assert_same_data(one_step, with_discounts)


def test_nstep_done_is_set_when_any_step_of_the_window_is_done() -> None:
    env_dict = {**TAGGED_ENV_DICT, "done": {}}
    rb = tagged_buffer(env_dict=env_dict, Nstep={"size": 3, "gamma": 0.9})
    for step in range(5):
        rb.add(obs=[0, step, 0], act=step, next_obs=[0, step + 1, 0], done=float(step == 4))
    rb.on_episode_end([0, -1])
    batch = rb.sample(200)
    steps = batch["obs"][:, 1]
    np.testing.assert_array_equal(batch["done"][:, 0], (steps >= 2).astype(np.float32))
    assert set(steps.astype(int)) == set(range(5))


def test_nstep_window_ends_at_a_done_step_inside_the_episode() -> None:
    env_dict = {**TAGGED_ENV_DICT, "done": {}}
    rb = tagged_buffer(env_dict=env_dict, Nstep={"size": 4, "gamma": 0.5}, additional_goals=0)
    for step in range(6):
        rb.add(obs=[0, step, 0], act=step, next_obs=[0, step + 1, 0], done=float(step == 1))
    rb.on_episode_end([0, -1])
    batch = rb.sample(300)
    steps = batch["obs"][:, 1].astype(int)
    # Steps 0 and 1 stop at the done step 1; step 2 sums steps 2 to 5 as usual.
    window = np.where(steps <= 1, 2 - steps, np.minimum(4, 6 - steps))
    np.testing.assert_allclose(batch["discounts"][:, 0], 0.5**window, rtol=1e-6)
    np.testing.assert_array_equal(batch["next_obs"][:, 1], steps + window)
    np.testing.assert_array_equal(batch["done"][:, 0], (steps <= 1).astype(np.float32))
    first = int(np.flatnonzero(steps == 0)[0])
    # The episode's goal (0, -1) is never reached: the reward of step i is i + 1 (see tag_reward).
    assert batch["rew"][first, 0] == pytest.approx(1 + 0.5 * 2)


def test_nstep_sample_keeps_the_stored_data() -> None:
    rb = tagged_buffer(Nstep={"size": 4, "gamma": 0.9})
    fill_tagged(rb, 3, 7)
    before = stored(rb)
    rb.sample(300)
    assert_same_data(before, stored(rb))


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"strategy": "futur"}, "Unknown goal_selection_strategy"),
        ({"additional_goals": -1}, "additional_goals must be an integer >= 0"),
        ({"size": 5, "max_episode_len": 10}, "smaller than one episode"),
        ({"goal_func": None}, "no goal_func"),
        ({"env_dict": {"obs": {"shape": 3}, "act": {}}}, "env_dict has no field"),
        ({"env_dict": {**TAGGED_ENV_DICT, "rew": {}}}, "must not define"),
        ({"env_dict": {**TAGGED_ENV_DICT, "next_obs": {"shape": 4}}}, "same shape and dtype"),
    ],
    ids=[
        "unknown-strategy",
        "negative-k",
        "size-below-one-episode",
        "goal-shape-without-goal-func",
        "missing-field",
        "reserved-field",
        "next-state-unlike-state",
    ],
)
def test_bad_constructor_arguments_raise_value_error(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tagged_buffer(**overrides)


def test_unsupported_cpprb_option_raises_type_error() -> None:
    with pytest.raises(TypeError, match="mmap_prefix"):
        tagged_buffer(mmap_prefix="rb")


@pytest.mark.parametrize(
    ("nstep", "error", "message"),
    [
        ([3], TypeError, "Nstep must be a dict"),
        ({"size": 0}, ValueError, "integer >= 1"),
        ({"size": 3, "gamma": 1.5}, ValueError, r"discount in \(0, 1\]"),
        ({"size": 3, "rew": "reward"}, ValueError, "only reward of this buffer"),
        ({"size": 3, "next": "obs"}, ValueError, "moves only the next-state field"),
        ({"size": 3, "discount": 0.9}, ValueError, "unknown keys"),
    ],
    ids=["not-a-dict", "size-zero", "gamma-above-one", "other-reward", "other-next", "unknown-key"],
)
def test_bad_nstep_raises(nstep: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        tagged_buffer(Nstep=nstep)


@pytest.mark.parametrize("batch_size", [0, -3], ids=["zero", "negative"])
def test_non_positive_batch_size_raises(batch_size: int) -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 1, 5)
    with pytest.raises(ValueError, match="batch_size"):
        rb.sample(batch_size)


def test_sampling_an_empty_buffer_names_on_episode_end() -> None:
    with pytest.raises(ValueError, match="on_episode_end"):
        tagged_buffer().sample(4)


def test_goal_of_the_wrong_shape_raises_and_keeps_the_staged_episode() -> None:
    rb = tagged_buffer()
    rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0])
    with pytest.raises(ValueError, match="goal_shape"):
        rb.on_episode_end([0, -1, 7])
    rb.on_episode_end([0, -1])
    assert rb.get_stored_size() == 1


def test_goal_func_output_of_the_wrong_shape_raises() -> None:
    rb = tagged_buffer(goal_func=lambda states: states)
    rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0])
    with pytest.raises(ValueError, match="goal_func returned shape"):
        rb.on_episode_end([0, -1])


def test_reward_func_of_the_wrong_shape_raises() -> None:
    rb = tagged_buffer(reward_func=lambda s, a, g: np.zeros((len(s), 2)))
    fill_tagged(rb, 1, 5)
    with pytest.raises(ValueError, match="one reward per row"):
        rb.sample(4)


def test_episode_longer_than_max_episode_len_raises_and_keeps_the_staged_steps() -> None:
    rb = tagged_buffer(max_episode_len=2)
    rb.add(obs=[0, 0, 0], act=0, next_obs=[0, 1, 0])
    with pytest.raises(ValueError, match="max_episode_len=2"):
        rb.add(obs=[[0, 1, 0], [0, 2, 0]], act=[1, 2], next_obs=[[0, 2, 0], [0, 3, 0]])
    rb.on_episode_end([0, -1])
    assert rb.get_stored_size() == 1


def test_add_without_a_field_raises() -> None:
    with pytest.raises(ValueError, match="missing fields"):
        tagged_buffer().add(obs=[0, 0, 0], next_obs=[0, 1, 0])


@pytest.mark.parametrize(
    ("priorities", "message"),
    [([np.nan, 1.0], "finite"), ([-1.0, 1.0], ">= 0"), ([1.0], "shape")],
    ids=["nan", "negative", "wrong-length"],
)
def test_bad_priorities_raise_and_keep_the_priorities(priorities: list[float], message: str) -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 2, 5)
    indexes = rb.sample(2)["indexes"]
    total = rb.replay.prioritizer.total() if rb.replay.prioritizer else None
    with pytest.raises(ValueError, match=message):
        rb.update_priorities(indexes, priorities)
    assert rb.replay.prioritizer is not None and rb.replay.prioritizer.total() == total


@pytest.mark.parametrize(
    "indexes",
    [np.array([10**6], dtype=np.uint64), np.array([-1]), np.array([10**6])],
    ids=["uint", "negative", "big"],
)
def test_out_of_range_indexes_raise(indexes: np.ndarray) -> None:
    rb = tagged_buffer()
    fill_tagged(rb, 2, 5)
    with pytest.raises(ValueError, match="indexes must lie in"):
        rb.update_priorities(indexes, [1.0])


def test_priorities_on_a_uniform_buffer_raise() -> None:
    rb = tagged_buffer(prioritized=False)
    fill_tagged(rb, 2, 5)
    with pytest.raises(ValueError, match="prioritized=True"):
        rb.update_priorities(np.array([0]), [1.0])


def test_max_priority_on_a_uniform_buffer_raises() -> None:
    with pytest.raises(ValueError, match="prioritized=True"):
        tagged_buffer(prioritized=False).get_max_priority()


@pytest.mark.parametrize(
    ("parameter", "setting"),
    [
        ("strategy", "goal_selection_strategy"),
        ("additional_goals", "n_sampled_goal"),
        ("online", "online"),
        ("alpha", "alpha"),
        ("goal_mix", "goal_mix"),
    ],
)
def test_hindsight_defaults_are_those_of_the_settings(parameter: str, setting: str) -> None:
    default = inspect.signature(HindsightReplayBuffer).parameters[parameter].default
    assert default == getattr(HindsightSettings(), setting)


def test_sample_without_beta_uses_the_settings_beta() -> None:
    buffer = HindsightReplayBuffer(
        40,
        {"obs": {"shape": 2}, "act": {"shape": 1}, "next_obs": {"shape": 2}},
        4,
        lambda s, a, g: s[:, 0],
        seed=0,
    )
    for episode in range(6):
        states = np.arange(10, dtype=np.float32).reshape(5, 2) + episode
        buffer.add(obs=states[:-1], act=np.zeros((4, 1)), next_obs=states[1:])
        buffer.on_episode_end(np.zeros(2))
    batch = buffer.sample(16)
    buffer.update_priorities(batch["indexes"], np.arange(16.0))
    state = buffer.replay.rng.bit_generator.state
    implicit = buffer.sample(16)["weights"]
    buffer.replay.rng.bit_generator.state = state
    explicit = buffer.sample(16, beta=buffer.settings.beta)["weights"]
    buffer.replay.rng.bit_generator.state = state
    other = buffer.sample(16, beta=1.0)["weights"]
    assert np.array_equal(implicit, explicit) and not np.array_equal(implicit, other)
