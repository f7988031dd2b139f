"""The ``HER`` model class as stable-baselines users know it: learn, save, load, predict, replay buffer files.

Every run is tiny (a few hundred steps of 4-bit flipping, one 32-unit layer): these tests check the API
and its plumbing; whether HER learns is the slow tests' job.
"""

from __future__ import annotations

import pathlib
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from sb3_contrib import QRDQN, TQC
from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

import her_wrap.envs  # noqa: F401  (registers BitFlipping-v0 here, where HER builds its local copy)
from her_wrap import HER, BitFlippingEnv, GoalSelectionStrategy, HERGoalEnvWrapper, HindsightSettings

N_BITS = 4


def fresh_observations(n_bits: int, count: int, seed: int = 100) -> dict[str, np.ndarray]:
    """A batch of first observations of ``count`` new episodes, stacked key by key."""
    env = BitFlippingEnv(n_bits=n_bits)
    observations = [env.reset(seed=seed + i)[0] for i in range(count)]
    return {key: np.stack([obs[key] for obs in observations]) for key in observations[0]}


def documentation_example(
    directory: pathlib.Path,
    model_class: type,
    goal_selection_strategy: GoalSelectionStrategy,
    learner_kwargs: dict[str, Any],
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The stable-baselines v2 HER example, ported to gymnasium (five-value ``step``, ``reset`` with info).

    :return: the greedy actions of the trained model and of the model loaded back, along one rollout
    """
    env = BitFlippingEnv(N_BITS, continuous=model_class not in (DQN, QRDQN), max_steps=N_BITS)
    model = HER(
        "MlpPolicy",
        env,
        model_class,
        n_sampled_goal=4,
        goal_selection_strategy=goal_selection_strategy,
        seed=0,
        **learner_kwargs,
    )
    model.learn(150)
    model.save(directory / "her_bit_env")
    loaded = HER.load(directory / "her_bit_env", env=env)

    actions, loaded_actions = [], []
    obs, _ = env.reset(seed=0)
    for _ in range(3 * N_BITS):
        actions.append(model.predict(obs, deterministic=True)[0])
        action, _ = loaded.predict(obs, deterministic=True)
        loaded_actions.append(action)
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
    return actions, loaded_actions


@pytest.mark.parametrize("goal_selection_strategy", list(GoalSelectionStrategy))
@pytest.mark.parametrize("model_class", [DQN, SAC, TD3, DDPG])
def test_stable_baselines_v2_example_loaded_model_acts_like_the_trained_one(
    tmp_path, model_class, goal_selection_strategy, tiny_learner_kwargs
):
    actions, loaded_actions = documentation_example(
        tmp_path, model_class, goal_selection_strategy, tiny_learner_kwargs()
    )
    np.testing.assert_array_equal(loaded_actions, actions)


@pytest.mark.parametrize("model_class", [TQC, QRDQN])
def test_sb3_contrib_learner_runs_the_example(tmp_path, model_class, tiny_learner_kwargs):
    learner_kwargs = tiny_learner_kwargs()
    learner_kwargs["policy_kwargs"]["n_quantiles"] = 8  # the defaults (25, 200) cost seconds per update here
    actions, loaded_actions = documentation_example(
        tmp_path, model_class, GoalSelectionStrategy.FUTURE, learner_kwargs
    )
    np.testing.assert_array_equal(loaded_actions, actions)


# ---------------------------------------------------------------------- policies and observations
@pytest.fixture(scope="module", params=["MlpPolicy", "MultiInputPolicy"])
def trained_dqn(request, tiny_learner_kwargs) -> HER:
    model = HER(request.param, BitFlippingEnv(n_bits=N_BITS), DQN, seed=0, **tiny_learner_kwargs())
    model.learn(150)
    return model


def test_policy_predicts_one_valid_action_for_the_env_dict_observation(trained_dqn):
    obs, _ = BitFlippingEnv(n_bits=N_BITS).reset(seed=1)
    action, _ = trained_dqn.predict(obs, deterministic=True)
    assert action.shape == () and 0 <= int(action) < N_BITS


def test_policy_predicts_a_batch_of_dict_observations_row_by_row(trained_dqn):
    batch = fresh_observations(N_BITS, 6)
    actions, _ = trained_dqn.predict(batch, deterministic=True)
    one_by_one = [
        trained_dqn.predict({key: value[i] for key, value in batch.items()}, deterministic=True)[0]
        for i in range(6)
    ]
    np.testing.assert_array_equal(actions, one_by_one)


def test_mlp_policy_takes_the_flat_vector_of_her_goal_env_wrapper_or_the_dict(tiny_learner_kwargs):
    wrapper = HERGoalEnvWrapper(BitFlippingEnv(n_bits=N_BITS))
    model = HER("MlpPolicy", wrapper, DQN, seed=0, **tiny_learner_kwargs())
    batch = fresh_observations(N_BITS, 6)
    from_flat, _ = model.predict(wrapper.convert_dict_to_obs(batch), deterministic=True)
    from_dict, _ = model.predict(batch, deterministic=True)
    np.testing.assert_array_equal(from_flat, from_dict)


# ---------------------------------------------------------------------- several envs
def test_subproc_vec_env_rewards_relabeled_batches_in_this_process(monkeypatch, tiny_learner_kwargs):
    """One vectorized compute_reward call per gradient step, counted in this process.

    The counter lives in this process: calls made inside the SubprocVecEnv workers (the envs' own steps,
    or an ``env_method("compute_reward")`` per batch) never reach it.
    """
    calls: list[int] = []
    compute_reward = BitFlippingEnv.compute_reward

    def counting_compute_reward(self, achieved_goal, desired_goal, info):
        calls.append(len(achieved_goal))
        return compute_reward(self, achieved_goal, desired_goal, info)

    monkeypatch.setattr(BitFlippingEnv, "compute_reward", counting_compute_reward)
    # "module:id" makes the workers import her_wrap.envs (which registers the id) before gymnasium.make;
    # render_mode=None overrides the "rgb_array" that make_vec_env asks every env for.
    venv = make_vec_env(
        "her_wrap.envs:BitFlipping-v0",
        n_envs=2,
        vec_env_cls=SubprocVecEnv,
        env_kwargs={"n_bits": N_BITS, "render_mode": None},
        seed=0,
    )
    try:
        # store_infos=True: no probe of whether compute_reward reads infos at the first stored step, so
        # that every call counted below is a relabeling one.
        model = HER("MlpPolicy", venv, DQN, seed=0, store_infos=True, **tiny_learner_kwargs())
        calls.clear()  # HER probes compute_reward once when it is built
        model.learn(300)
    finally:
        venv.close()
    assert model.model._n_updates > 0 and len(calls) == model.model._n_updates


# ---------------------------------------------------------------------- model files
@pytest.fixture(scope="module")
def saved_sac(tmp_path_factory, tiny_learner_kwargs) -> tuple[HER, pathlib.Path]:
    path = tmp_path_factory.mktemp("sac") / "her_sac.zip"
    model = HER(
        "MlpPolicy", BitFlippingEnv(n_bits=N_BITS, continuous=True), SAC, seed=0, **tiny_learner_kwargs()
    )
    model.learn(150)
    model.save(path)
    return model, path


def test_loaded_model_predicts_a_fresh_batch_exactly_like_the_saved_one(saved_sac):
    model, path = saved_sac
    loaded = HER.load(path, env=BitFlippingEnv(n_bits=N_BITS, continuous=True))
    batch = fresh_observations(N_BITS, 8)
    np.testing.assert_array_equal(
        loaded.predict(batch, deterministic=True)[0], model.predict(batch, deterministic=True)[0]
    )


def test_model_loaded_without_env_predicts_from_dict_observations(saved_sac):
    model, path = saved_sac
    loaded = HER.load(path)
    batch = fresh_observations(N_BITS, 8)
    np.testing.assert_array_equal(
        loaded.predict(batch, deterministic=True)[0], model.predict(batch, deterministic=True)[0]
    )


CONTINUED_STEPS = 40


@pytest.fixture(scope="module")
def restored_dqn(tmp_path_factory, tiny_learner_kwargs) -> dict[str, Any]:
    """A model trained 200 steps, saved with its replay buffer, loaded back, then trained 40 more steps."""
    directory = tmp_path_factory.mktemp("buffer")
    model = HER("MultiInputPolicy", BitFlippingEnv(n_bits=N_BITS), DQN, seed=0, **tiny_learner_kwargs())
    model.learn(200)
    model.save(directory / "model")
    model.save_replay_buffer(directory / "buffer.pkl")

    restored = HER.load(directory / "model", env=BitFlippingEnv(n_bits=N_BITS))
    restored.load_replay_buffer(directory / "buffer.pkl")
    loaded_size, loaded_updates = restored.replay_buffer.size(), restored.model._n_updates
    samples = restored.replay_buffer.sample(64)
    restored.learn(CONTINUED_STEPS, reset_num_timesteps=False)
    return {
        "saved_size": model.replay_buffer.size(),
        "loaded_size": loaded_size,
        "loaded_updates": loaded_updates,
        "samples": samples,
        "restored": restored,
    }


def test_loaded_replay_buffer_holds_every_saved_transition(restored_dqn):
    assert restored_dqn["loaded_size"] == restored_dqn["saved_size"]


def test_loaded_replay_buffer_rewards_relabeled_goals_with_the_env(restored_dqn):
    samples = restored_dqn["samples"]
    achieved = samples.next_observations["achieved_goal"].numpy()
    desired = samples.observations["desired_goal"].numpy()
    expected = BitFlippingEnv(n_bits=N_BITS).compute_reward(achieved, desired, None)
    np.testing.assert_array_equal(samples.rewards.numpy().ravel(), expected)


def test_training_continues_on_top_of_the_loaded_replay_buffer(restored_dqn):
    restored = restored_dqn["restored"]
    grown = restored.replay_buffer.size() == restored_dqn["loaded_size"] + CONTINUED_STEPS
    assert grown and restored.model._n_updates > restored_dqn["loaded_updates"]


@pytest.mark.parametrize(("model_class", "continuous"), [(DQN, False), (SAC, True)])
def test_same_seed_twice_gives_identical_parameters(model_class, continuous, tiny_learner_kwargs):
    def train() -> dict[str, th.Tensor]:
        env = BitFlippingEnv(n_bits=N_BITS, continuous=continuous)
        model = HER("MlpPolicy", env, model_class, seed=3, **tiny_learner_kwargs())
        model.learn(150)
        return model.get_parameters()["policy"]

    first, second = train(), train()
    assert all(th.equal(first[name], second[name]) for name in first)


# ---------------------------------------------------------------------- image goals
class PixelGoalEnv(gymnasium.Env):
    """Move the lit pixel of a 4x4 ``uint8`` image onto the goal image's: observations and goals are images."""

    def __init__(self) -> None:
        image = spaces.Box(0, 255, (4, 4), np.uint8)
        self.observation_space = spaces.Dict(observation=image, achieved_goal=image, desired_goal=image)
        self.action_space = spaces.Discrete(4)

    def _image(self, cell: tuple[int, int]) -> np.ndarray:
        image = np.zeros((4, 4), np.uint8)
        image[cell] = 255
        return image

    def _observation(self) -> dict[str, np.ndarray]:
        here = self._image(self.cell)
        return {"observation": here, "achieved_goal": here.copy(), "desired_goal": self._image(self.goal)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.cell = tuple(int(v) for v in self.np_random.integers(0, 4, 2))
        self.goal = tuple(int(v) for v in self.np_random.integers(0, 4, 2))
        self.steps = 0
        return self._observation(), {}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        differ = np.any(np.asarray(achieved_goal) != np.asarray(desired_goal), axis=(-2, -1))
        return -differ.astype(np.float32)

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        row, column = [(0, 1), (0, -1), (1, 0), (-1, 0)][int(action)]
        self.cell = (min(max(self.cell[0] + row, 0), 3), min(max(self.cell[1] + column, 0), 3))
        self.steps += 1
        observation = self._observation()
        reward = float(self.compute_reward(observation["achieved_goal"], observation["desired_goal"], None))
        return observation, reward, reward == 0.0, self.steps >= 8, {"is_success": reward == 0.0}


def test_mlp_policy_trains_on_uint8_image_goals_and_relabels_them(tiny_learner_kwargs):
    model = HER("MlpPolicy", PixelGoalEnv(), DQN, seed=0, **tiny_learner_kwargs())
    model.learn(200)
    samples = model.replay_buffer.sample(64)
    layout = HERGoalEnvWrapper(PixelGoalEnv())
    achieved = layout.convert_obs_to_dict(samples.next_observations.numpy())["achieved_goal"]
    desired = layout.convert_obs_to_dict(samples.observations.numpy())["desired_goal"]
    assert achieved.dtype == np.uint8 and achieved.shape == (64, 4, 4)
    expected = PixelGoalEnv().compute_reward(achieved, desired, None)
    np.testing.assert_array_equal(samples.rewards.numpy().ravel(), expected)
    assert (expected == 0.0).any() and (expected == -1.0).any()  # relabeled goals met, and goals missed


@pytest.mark.parametrize("log_interval", [None, 1, 2, -1])
def test_log_interval_none_writes_no_log_tables(log_interval, monkeypatch, tiny_learner_kwargs):
    """``log_interval`` counts episodes between log tables, as in SB3; ``None`` writes none (the workers
    other than rank 0 of a multi-worker run train so). SB3 reads -1 as every episode."""
    env = BitFlippingEnv(N_BITS, max_steps=N_BITS)
    model = HER("MultiInputPolicy", env, DQN, seed=0, **tiny_learner_kwargs())
    written: list[int] = []
    monkeypatch.setattr(model.model, "dump_logs", lambda: written.append(model.model._episode_num))
    model.learn(30 * N_BITS, log_interval=log_interval)
    episodes = model.model._episode_num
    assert episodes >= 30
    expected = {None: [], 1: list(range(1, episodes + 1)), 2: list(range(2, episodes + 1, 2))}
    assert written == expected.get(log_interval, expected[1])


def test_hindsight_settings_left_out_are_hindsight_settings_defaults():
    model = HER("MultiInputPolicy", BitFlippingEnv(n_bits=3), DQN, buffer_size=100)
    assert model.settings == model.replay_buffer.settings == HindsightSettings()


@pytest.mark.parametrize(("policy", "flat"), [("MlpPolicy", True), ("MultiInputPolicy", False)])
def test_the_policy_decides_whether_learner_and_buffer_see_flat_vectors(policy: str, flat: bool):
    model = HER(policy, BitFlippingEnv(n_bits=3), DQN, buffer_size=100)
    observation_is_box = isinstance(model.model.observation_space, spaces.Box)
    assert (model.flat, model.replay_buffer.flat, observation_is_box) == (flat, flat, flat)
