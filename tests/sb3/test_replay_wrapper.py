"""HerReplayBuffer driven by hand: episodes added as a VecEnv of one env would add them.

The episodes use 3-bit flipping with the goal ``111``; each step flips one bit, so every state of an
episode is distinct and tells which step a sampled transition (or a relabeled goal) came from.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from stable_baselines3 import DQN
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from her_wrap import BitFlippingEnv, HindsightSettings
from her_wrap.sb3 import HER, HerReplayBuffer

GOAL = [1.0, 1.0, 1.0]
ENV = BitFlippingEnv(n_bits=3)


def wrapper(
    env: BitFlippingEnv, settings: HindsightSettings, store_infos: bool | None = None
) -> HerReplayBuffer:
    """A 64-row buffer for dict observations of ``env``, rewarding relabeled goals with its compute_reward."""
    return HerReplayBuffer(
        64,
        env.observation_space,
        env.action_space,
        env,
        device="cpu",
        settings=settings,
        store_infos=store_infos,
        seed=0,
    )


def vec_observation(state: list[float]) -> dict[str, np.ndarray]:
    """The observation of a VecEnv of one env: every key with a leading env dimension."""
    bits = np.array([state], dtype=np.float32)
    return {"observation": bits, "achieved_goal": bits.copy(), "desired_goal": np.array([GOAL], np.float32)}


def add_episode(
    buffer: HerReplayBuffer,
    states: list[list[float]],
    *,
    ends_by: str,
    infos: list[dict[str, Any]] | None = None,
) -> None:
    """Add the steps between consecutive ``states``, as SB3's ``_store_transition`` does.

    :param ends_by: ``"termination"`` (the goal is reached) or ``"truncation"`` (the time limit): SB3 marks
        the last step done and tells a truncation by ``info["TimeLimit.truncated"]``
    """
    infos = infos if infos is not None else [{} for _ in states[1:]]
    for t, info in enumerate(infos):
        last = t == len(infos) - 1
        info["TimeLimit.truncated"] = last and ends_by == "truncation"
        buffer.add(
            vec_observation(states[t]),
            vec_observation(states[t + 1]),
            np.array([[t]]),
            ENV.compute_reward(np.array([states[t + 1]]), np.array([GOAL]), None),
            np.array([last]),
            [info],
        )


def rows(samples: Any, part: str, key: str) -> np.ndarray:
    return getattr(samples, part)[key].numpy()


def test_relabeled_success_terminates_although_the_original_step_was_truncated():
    """One truncated step 000 -> 100: with goal 100 it is a success (done 1); with goal 111 it bootstraps."""
    buffer = wrapper(ENV, HindsightSettings(4, "final"))
    add_episode(buffer, [[0, 0, 0], [1, 0, 0]], ends_by="truncation")
    samples = buffer.sample(100)
    pairs = {
        (float(r), float(d)) for r, d in zip(samples.rewards.ravel(), samples.dones.ravel(), strict=True)
    }
    assert pairs == {(-1.0, 0.0), (0.0, 1.0)}


def test_truncated_step_keeps_the_bootstrap():
    buffer = wrapper(ENV, HindsightSettings(0, "future"))
    add_episode(buffer, [[0, 0, 0], [1, 0, 0], [1, 1, 0]], ends_by="truncation")
    assert not buffer.sample(50).dones.any()


def test_relabeled_failure_does_not_terminate_although_the_original_step_did():
    """000 -> 100 -> 110 -> 111 reaches the goal; its last step relabeled with goal 100 or 110 fails."""
    buffer = wrapper(ENV, HindsightSettings(4, "episode"))
    add_episode(buffer, [[0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1]], ends_by="termination")
    samples = buffer.sample(300)
    last_step = (rows(samples, "observations", "observation") == [1, 1, 0]).all(axis=1)
    other_goal = (rows(samples, "observations", "desired_goal") != GOAL).any(axis=1)
    dones = samples.dones.numpy().ravel()[last_step & other_goal]
    assert dones.size > 0 and not dones.any()


def test_vec_normalize_applies_to_relabeled_goals():
    """Normalization comes after relabeling: relabeled desired goals arrive normalized too."""
    venv = VecNormalize(DummyVecEnv([lambda: BitFlippingEnv(n_bits=3)]), norm_reward=False, clip_obs=100.0)
    mean, var = np.array([0.1, 0.2, 0.3]), np.array([4.0, 4.0, 4.0])
    for statistics in venv.obs_rms.values():
        statistics.mean, statistics.var = mean, var

    def normalized(goal: list[float]) -> np.ndarray:
        return (np.array(goal) - mean) / np.sqrt(var + venv.epsilon)

    buffer = wrapper(ENV, HindsightSettings(4, "final"))
    add_episode(buffer, [[0, 0, 0], [1, 0, 0]], ends_by="truncation")
    desired = np.unique(rows(buffer.sample(100, env=venv), "observations", "desired_goal").round(5), axis=0)
    expected = np.unique(np.stack([normalized(GOAL), normalized([1, 0, 0])]).round(5), axis=0)
    np.testing.assert_allclose(desired, expected, atol=1e-5)


def test_mlp_policy_under_vec_normalize_stores_raw_observations_across_episode_ends():
    """SB3 stores un-normalized observations, the final one of each episode included, flat policy or not."""
    venv = VecNormalize(DummyVecEnv([lambda: BitFlippingEnv(n_bits=3)]), norm_reward=False)
    model = HER(
        "MlpPolicy", venv, DQN, seed=0, learning_starts=100, batch_size=32, policy_kwargs={"net_arch": [32]}
    )
    model.learn(150)
    stored = model.replay_buffer.sample(64).next_observations.numpy()
    # final observations come back through VecNormalize's unnormalize_obs: bits up to float error
    np.testing.assert_allclose(stored, stored.round().clip(0, 1), atol=1e-5)


class InfoRecordingBitFlippingEnv(BitFlippingEnv):
    """Bit flipping whose ``compute_reward`` keeps every info dict it is given."""

    def __init__(self) -> None:
        super().__init__(n_bits=3)
        self.seen_infos: list[Any] = []

    def compute_reward(self, achieved_goal, desired_goal, info):
        if info is not None:
            self.seen_infos.extend(info)
        return super().compute_reward(achieved_goal, desired_goal, info)


def test_infos_reach_compute_reward_by_reference():
    env = InfoRecordingBitFlippingEnv()
    buffer = wrapper(env, HindsightSettings(4, "future"), store_infos=True)
    added = [{"step": 0}, {"step": 1}]
    add_episode(buffer, [[0, 0, 0], [1, 0, 0], [1, 1, 0]], ends_by="truncation", infos=added)
    buffer.sample(20)
    assert env.seen_infos and all(any(info is step for step in added) for info in env.seen_infos)


def test_offline_relabeling_trains_on_rewards_that_match_the_goals():
    model = HER(
        "MultiInputPolicy",
        BitFlippingEnv(n_bits=3),
        DQN,
        online=False,
        seed=0,
        learning_starts=100,
        batch_size=32,
        policy_kwargs={"net_arch": [32]},
    )
    model.learn(250)
    samples = model.replay_buffer.sample(64)
    expected = ENV.compute_reward(
        rows(samples, "next_observations", "achieved_goal"),
        rows(samples, "observations", "desired_goal"),
        None,
    )
    trained = model.model._n_updates > 0
    assert trained and np.array_equal(samples.rewards.numpy().ravel(), expected)


RELABELED_GOALS_OF_FIRST_EPISODE = {
    # strategy: {state of a transition of 000 -> 100 -> 110: desired goals it can be sampled with}
    "future": {(0, 0, 0): {(1, 0, 0), (1, 1, 0)}, (1, 0, 0): {(1, 1, 0)}},
    "final": {(0, 0, 0): {(1, 1, 0)}, (1, 0, 0): {(1, 1, 0)}},
    "episode": {(0, 0, 0): {(1, 0, 0), (1, 1, 0)}, (1, 0, 0): {(1, 0, 0), (1, 1, 0)}},
    "random": {(0, 0, 0): {(1, 0, 0), (1, 1, 0), (0, 1, 1)}, (1, 0, 0): {(1, 0, 0), (1, 1, 0), (0, 1, 1)}},
}


@pytest.mark.parametrize("strategy", list(RELABELED_GOALS_OF_FIRST_EPISODE))
def test_strategy_picks_goals_among_the_achieved_goals_it_names(strategy):
    """Episodes 000 -> 100 -> 110 and 001 -> 011: only ``random`` borrows a goal from the other one."""
    buffer = wrapper(ENV, HindsightSettings(4, strategy))
    add_episode(buffer, [[0, 0, 0], [1, 0, 0], [1, 1, 0]], ends_by="truncation")
    add_episode(buffer, [[0, 0, 1], [0, 1, 1]], ends_by="truncation")
    samples = buffer.sample(400)
    seen: dict[tuple, set] = {}
    for state, goal in zip(
        rows(samples, "observations", "observation").tolist(),
        rows(samples, "observations", "desired_goal").tolist(),
        strict=True,
    ):
        if tuple(state) in RELABELED_GOALS_OF_FIRST_EPISODE[strategy]:
            seen.setdefault(tuple(state), set()).add(tuple(goal))
    expected = {
        state: goals | {tuple(GOAL)} for state, goals in RELABELED_GOALS_OF_FIRST_EPISODE[strategy].items()
    }
    assert seen == expected


@pytest.mark.parametrize("n_envs", [1, 2, 4])
def test_her_buffer_size_counts_transitions_over_all_envs_as_sb3(n_envs):
    """buffer_size is divided among the envs once: each env column gets buffer_size // n_envs rows."""
    venv = DummyVecEnv([lambda: BitFlippingEnv(n_bits=3)] * n_envs)
    storage = HER("MultiInputPolicy", venv, DQN, buffer_size=1000).replay_buffer.replay.storage
    assert (storage.n_rows, storage.n_envs) == (1000 // n_envs, n_envs)
