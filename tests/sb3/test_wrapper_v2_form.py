"""stable-baselines v2's form of HindsightExperienceReplayWrapper: a wrapper around a learner's replay buffer.

v2 documented ``HindsightExperienceReplayWrapper(replay_buffer, n_sampled_goal, goal_selection_strategy,
wrapped_env)`` with ``add(obs_t, action, reward, obs_tp1, done)`` on flat observations of a
``HERGoalEnvWrapper`` and ``can_sample(n_samples)``. The wrapped buffer here is stable-baselines3's.
"""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3 import DQN
from stable_baselines3.common.buffers import ReplayBuffer, RolloutBuffer

from her_wrap import (
    BitFlippingEnv,
    GoalSelectionStrategy,
    HERGoalEnvWrapper,
    HindsightExperienceReplayWrapper,
)
from her_wrap.sb3 import HerReplayBuffer

N_BITS = 4


def goal_env(seed: int = 0) -> HERGoalEnvWrapper:
    env = HERGoalEnvWrapper(BitFlippingEnv(n_bits=N_BITS, max_steps=N_BITS))
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return env


def sb3_buffer(env: HERGoalEnvWrapper, size: int = 200) -> ReplayBuffer:
    return ReplayBuffer(size, env.observation_space, env.action_space, device="cpu")


def play(env: HERGoalEnvWrapper, episodes: int, add) -> int:
    """Random episodes of ``env``, each step given to ``add`` in v2's order; returns the steps played."""
    steps = 0
    for _ in range(episodes):
        obs, _ = env.reset()
        done = False
        while not done:
            action = env.action_space.sample()
            next_obs, reward, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            add(obs, action, reward, next_obs, done)
            obs = next_obs
            steps += 1
    return steps


def filled_sb3_buffer(env: HERGoalEnvWrapper, episodes: int = 3) -> ReplayBuffer:
    buffer = sb3_buffer(env)

    def add(obs, action, reward, next_obs, done):
        buffer.add(obs, next_obs, np.array([action]), np.array([reward]), np.array([done]), [{}])

    play(env, episodes, add)
    return buffer


def snapshot(buffer: ReplayBuffer) -> dict[str, object]:
    return {
        "pos": buffer.pos,
        "full": buffer.full,
        **{
            name: getattr(buffer, name).copy()
            for name in ("observations", "next_observations", "actions", "rewards", "dones")
        },
    }


def assert_unchanged(buffer: ReplayBuffer, before: dict[str, object]) -> None:
    after = snapshot(buffer)
    assert after["pos"] == before["pos"] and after["full"] == before["full"]
    for name, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(after[name], value)


def test_v2_documented_use_stores_and_samples_consistently_relabeled_transitions():
    env = goal_env()
    wrapper = HindsightExperienceReplayWrapper(sb3_buffer(env), 4, "future", env)
    assert not wrapper.can_sample(1)
    steps = play(env, 5, wrapper.add)
    assert wrapper.can_sample(steps) and not wrapper.can_sample(steps + 1)

    samples = wrapper.sample(256)
    observations = env.convert_obs_to_dict(samples.observations.numpy())
    next_observations = env.convert_obs_to_dict(samples.next_observations.numpy())
    recomputed = env.compute_reward(
        next_observations["achieved_goal"], observations["desired_goal"], [{}] * 256
    )
    np.testing.assert_array_equal(samples.rewards.numpy().reshape(-1), recomputed)
    # Relabeled goals are achieved goals, and a share of them differs from the episodes' desired goals:
    # with "future" and k = 4, some sampled rows reach their goal (reward 0) though the random episodes
    # rarely did.
    assert (samples.rewards.numpy() == 0).mean() > 0.2


def test_v2_form_takes_capacity_spaces_device_and_n_envs_from_the_buffer():
    env = goal_env()
    buffer = sb3_buffer(env, size=300)
    wrapper = HindsightExperienceReplayWrapper(buffer, 2, GoalSelectionStrategy.FINAL, env)
    inner = wrapper.replay_buffer
    assert (inner.buffer_size, inner.n_envs, inner.device) == (300, 1, buffer.device)
    assert inner.observation_space is buffer.observation_space
    assert inner.action_space is buffer.action_space
    assert (wrapper.n_sampled_goal, wrapper.goal_selection_strategy) == (2, GoalSelectionStrategy.FINAL)


def test_v2_form_keeps_the_transitions_the_buffer_holds_and_leaves_the_buffer_as_it_was():
    env = goal_env()
    buffer = filled_sb3_buffer(env, episodes=3)
    before = snapshot(buffer)
    wrapper = HindsightExperienceReplayWrapper(buffer, 4, "episode", env)
    assert len(wrapper) == buffer.size()
    assert_unchanged(buffer, before)


def test_v2_form_keeps_every_transition_of_a_full_ring():
    env = goal_env()
    buffer = sb3_buffer(env, size=10)
    add = lambda obs, action, reward, next_obs, done: buffer.add(  # noqa: E731
        obs, next_obs, np.array([action]), np.array([reward]), np.array([done]), [{}]
    )
    play(env, 6, add)
    assert buffer.full
    wrapper = HindsightExperienceReplayWrapper(buffer, 4, "future", env)
    assert len(wrapper) == 10


def test_v2_form_wraps_a_learner_and_trains_it():
    env = goal_env()
    model = DQN("MlpPolicy", env, buffer_size=500, learning_starts=20, batch_size=16, seed=0)
    wrapper = HindsightExperienceReplayWrapper(model, 4, "future", env)
    assert (wrapper.replay_buffer.buffer_size, wrapper.replay_buffer.replay.discount) == (500, model.gamma)
    model.replay_buffer = wrapper.replay_buffer
    model.learn(60)
    assert len(wrapper) > 0 and model._n_updates > 0


def test_v2_add_takes_the_step_info():
    env = goal_env()
    wrapper = HindsightExperienceReplayWrapper(sb3_buffer(env), 4, "future", env, store_infos=True)
    obs, _ = env.reset()
    next_obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    wrapper.add(obs, 0, reward, next_obs, terminated or truncated, info)
    assert len(wrapper) == 1


def test_sb3_add_with_a_tuple_of_infos_as_subproc_vec_env_gives_them_is_stored():
    env = goal_env()
    buffer = HerReplayBuffer(100, env.observation_space, env.action_space, env, device="cpu")
    obs, _ = env.reset()
    next_obs, *_ = env.step(0)
    buffer.add(obs[None], next_obs[None], np.array([[0]]), np.array([-1.0]), np.array([False]), ({},))
    assert buffer.size() == 1


def test_the_sb3_buffer_takes_the_key_layout_of_flat_observations_from_the_env():
    env = goal_env()
    buffer = HerReplayBuffer(100, env.observation_space, env.action_space, env, device="cpu")
    assert buffer.buffer_size == 100 and buffer.layout == env.layout and buffer.flat


def test_a_capacity_as_first_argument_names_the_sb3_buffer_class():
    env = goal_env()
    with pytest.raises(TypeError, match=r"first argument.*got int.*HerReplayBuffer\(buffer_size"):
        HindsightExperienceReplayWrapper(100, env.observation_space, env.action_space, env)


def test_the_wrapper_hands_the_learner_a_buffer_that_sb3_add_calls_fill():
    """v2's form and SB3's are two classes: the learner calls SB3's add on the buffer the wrapper holds."""
    env = goal_env()
    wrapper = HindsightExperienceReplayWrapper(sb3_buffer(env), 4, "future", env)
    play(env, 1, wrapper.add)
    stored = len(wrapper)
    obs, _ = env.reset()
    next_obs, *_ = env.step(0)
    wrapper.replay_buffer.add(
        obs[None], next_obs[None], np.array([[0]]), np.array([-1.0]), np.array([False]), [{}]
    )
    assert len(wrapper) == stored + 1


BAD_ARGUMENTS = {
    "a rollout buffer": (
        lambda env: (RolloutBuffer(8, env.observation_space, env.action_space), 4, "future", env),
        TypeError,
        "ReplayBuffer",
    ),
    "no buffer at all": (lambda env: ([], 4, "future", env), TypeError, "first argument"),
    "a negative n_sampled_goal": (
        lambda env: (filled_sb3_buffer(env), -1, "future", env),
        ValueError,
        ">= 0",
    ),
    "an unknown strategy": (lambda env: (filled_sb3_buffer(env), 4, "futur", env), ValueError, "future"),
    "a goal env not wrapped": (
        lambda env: (filled_sb3_buffer(env), 4, "future", env.env),
        TypeError,
        "HERGoalEnvWrapper",
    ),
    "a buffer of other observations": (
        lambda env: (filled_sb3_buffer(goal_env()), 4, "future", HERGoalEnvWrapper(BitFlippingEnv(n_bits=3))),
        ValueError,
        "observation_space",
    ),
}


@pytest.mark.parametrize("case", BAD_ARGUMENTS)
def test_bad_arguments_raise_naming_the_fix_and_leave_the_buffer_as_it_was(case: str):
    make_arguments, error, named = BAD_ARGUMENTS[case]
    arguments = make_arguments(goal_env())
    buffer = arguments[0]
    before = snapshot(buffer) if isinstance(buffer, ReplayBuffer) else None
    with pytest.raises(error, match=named):
        HindsightExperienceReplayWrapper(*arguments)
    if before is not None:
        assert_unchanged(buffer, before)


def test_a_hindsight_buffer_is_not_wrapped_again():
    env = goal_env()
    inner = HindsightExperienceReplayWrapper(sb3_buffer(env), 4, "future", env)
    with pytest.raises(TypeError, match="already relabels"):
        HindsightExperienceReplayWrapper(inner, 4, "future", env)


def test_v2_add_of_a_wrong_observation_raises_and_stores_nothing():
    env = goal_env()
    wrapper = HindsightExperienceReplayWrapper(sb3_buffer(env), 4, "future", env)
    obs, _ = env.reset()
    play(env, 1, wrapper.add)
    stored = len(wrapper)
    with pytest.raises(ValueError, match="flat vectors"):
        wrapper.add(obs[:-1], 0, -1.0, obs, False)
    assert len(wrapper) == stored
