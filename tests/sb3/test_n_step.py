"""n-step returns whose every reward is recomputed for the sample's own (relabeled or original) goal."""

from __future__ import annotations

import numpy as np
import pytest
from core_trajectories import (
    TRAJECTORIES,
    TRAJECTORY_IDS,
    fed_replay,
    reward_fn,
    stored_reward,
    terminated_fn,
)

from her_wrap import HER, BitFlippingEnv, HindsightSettings

GAMMA = 0.5
N = 3


def steps_stored(oracle, episode: int) -> int:
    return oracle.episodes[episode].steps


@pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=TRAJECTORY_IDS)
def test_original_goal_return_sums_the_stored_rewards(trajectory):
    replay, oracle = fed_replay(trajectory, n_sampled_goal=0, n_steps=N, discount=GAMMA)
    batch = replay.sample(200)
    for (episode, step), reward, discount, next_tag in zip(
        batch["observation"].astype(int),
        batch["reward"],
        batch["discounts"],
        batch["next_observation"],
        strict=True,
    ):
        taken = min(N, steps_stored(oracle, episode) - step)
        expected = sum(GAMMA**i * stored_reward(episode, step + i) for i in range(taken))
        assert (reward, discount) == pytest.approx((expected, GAMMA**taken))
        assert tuple(next_tag) == (episode, step + taken)


@pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=TRAJECTORY_IDS)
def test_relabeled_return_recomputes_every_reward_and_stops_at_the_goal(trajectory):
    replay, oracle = fed_replay(trajectory, n_steps=N, discount=GAMMA, terminated_fn=terminated_fn)
    batch = replay.sample(300)
    rows = np.flatnonzero(batch["relabeled"])
    assert rows.size
    for row in rows:
        episode, step = batch["observation"][row].astype(int)
        goal = batch["desired_goal"][row]
        expected, taken, done = 0.0, 0, False
        for i in range(min(N, steps_stored(oracle, episode) - step)):
            achieved = np.array([episode, step + i + 1], dtype=float)
            expected += GAMMA**i * float(reward_fn(achieved[None], goal[None], None)[0])
            taken = i + 1
            if terminated_fn(achieved[None], goal[None], None)[0]:
                done = True
                break
        got = (batch["reward"][row], batch["discounts"][row], bool(batch["terminated"][row]))
        assert got == pytest.approx((expected, GAMMA**taken, done))


@pytest.mark.parametrize("trajectory", TRAJECTORIES, ids=TRAJECTORY_IDS)
def test_next_observation_keeps_the_relabeled_goal(trajectory):
    replay, _ = fed_replay(trajectory, n_steps=N, discount=GAMMA)
    batch = replay.sample(200)
    assert np.array_equal(batch["next_desired_goal"], batch["desired_goal"])


def test_one_step_samples_are_unchanged():
    plain, _ = fed_replay(TRAJECTORIES[2])
    one_step, _ = fed_replay(TRAJECTORIES[2], n_steps=1, discount=GAMMA)
    first, second = plain.sample(64), one_step.sample(64)
    assert "discounts" not in second and all(
        np.array_equal(first[key], second[key]) for key in first if key != "infos"
    )


def test_n_steps_without_a_discount_is_a_clear_error():
    replay, _ = fed_replay(TRAJECTORIES[2], n_steps=2)
    with pytest.raises(ValueError, match="pass discount=gamma"):
        replay.sample(8)


def test_bad_n_steps_is_refused():
    with pytest.raises(ValueError, match="n_steps must be an integer >= 1"):
        HindsightSettings(n_steps=0)


def test_her_samples_carry_the_learners_gamma_to_the_power_of_the_steps_taken():
    model = HER("MlpPolicy", BitFlippingEnv(n_bits=5), "dqn", n_steps=3, gamma=0.9, learning_starts=30)
    model.learn(60)
    discounts = {
        round(float(value), 4) for value in model.replay_buffer.sample(256).discounts.numpy().ravel()
    }
    assert discounts <= {0.9, 0.81, 0.729} and 0.729 in discounts


def test_drop_in_buffer_gives_sb3_learners_n_step_samples_with_their_discounts():
    from stable_baselines3 import DQN

    from her_wrap.sb3 import HerReplayBuffer

    model = DQN(
        "MultiInputPolicy",
        BitFlippingEnv(n_bits=5),
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_steps": 2, "gamma": 0.9, "goal_mix": {"future": 0.5, "desired": 0.5}},
        gamma=0.9,
        learning_starts=30,
        seed=0,
    )
    model.learn(60)
    discounts = {
        round(float(value), 4) for value in model.replay_buffer.sample(256).discounts.numpy().ravel()
    }
    assert discounts == {0.9, 0.81}
