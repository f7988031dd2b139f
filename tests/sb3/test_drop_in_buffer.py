"""her_wrap.sb3.HerReplayBuffer as the replay_buffer_class of stable-baselines3's own learners.

The flows of SB3's own HER tests (every learner, two envs, saving and loading the buffer with and without
truncating the last trajectory, VecNormalize, SubprocVecEnv), then what differs from SB3's buffer.
"""

from __future__ import annotations

import contextlib
import copy
import pickle
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import yaml
from gymnasium import spaces
from sb3_contrib import QRDQN, TQC
from stable_baselines3 import DDPG, DQN, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import BitFlippingEnv
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize
from stable_baselines3.her.goal_selection_strategy import GoalSelectionStrategy as StableBaselinesStrategy

from her_wrap.core.goal_selection import GoalSelectionStrategy
from her_wrap.core.settings import HindsightSettings
from her_wrap.sb3 import HerReplayBuffer

TINY = {"learning_starts": 100, "batch_size": 32, "policy_kwargs": {"net_arch": [16]}}
DISCRETE = {DQN, QRDQN}


class CountingGoalEnv(gym.Env):
    """Episodes of exactly ``length`` steps whose observation is the step count ``t``.

    The achieved goal is ``t`` too and the desired goal ``length + 10`` is never reached, so every episode
    ends by truncation after ``length`` steps and each stored step tells where it sits in its episode.
    """

    def __init__(self, length: int = 5, discrete: bool = False) -> None:
        box = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.observation_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = spaces.Discrete(2) if discrete else spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.length = length
        self.t = 0

    def _observation(self) -> dict[str, np.ndarray]:
        count = np.array([self.t], dtype=np.float32)
        goal = np.array([self.length + 10], dtype=np.float32)
        return {"observation": count, "achieved_goal": count.copy(), "desired_goal": goal}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.t += 1
        return self._observation(), -1.0, False, self.t >= self.length, {"count": self.t}

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        return -(np.abs(achieved_goal - desired_goal).sum(axis=-1) > 0.5).astype(np.float32)


class BonusGoalEnv(CountingGoalEnv):
    """A counting env whose ``compute_reward`` reads ``info["count"]``: the reward is the step count."""

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        observation, _, terminated, truncated, info = super().step(action)
        return observation, float(info["count"]), terminated, truncated, info

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        if isinstance(info, dict):
            return np.float32(info["count"])
        return np.array([row["count"] for row in info], dtype=np.float32)


class ReachingGoalEnv(CountingGoalEnv):
    """A counting env whose episodes terminate when the goal is reached (it never is, unless relabeled)."""

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any
    ) -> np.ndarray:
        return self.compute_reward(achieved_goal, desired_goal, info) == 0


class UnpicklableGoalEnv(CountingGoalEnv):
    """No gymnasium spec and an attribute pickle refuses: no copy of it can reach another process."""

    def __init__(self) -> None:
        super().__init__()
        self.hook = lambda: None


def bit_flipping(model_class: type, **kwargs: Any) -> BitFlippingEnv:
    return BitFlippingEnv(n_bits=4, continuous=model_class not in DISCRETE, max_steps=4, **kwargs)


def learner(model_class: type, env: Any, **kwargs: Any) -> Any:
    settings = copy.deepcopy({**TINY, **kwargs})  # SB3 writes into the policy_kwargs it is given
    settings.setdefault("replay_buffer_kwargs", {"n_sampled_goal": 4, "goal_selection_strategy": "future"})
    return model_class("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer, seed=0, **settings)


# ---------------------------------------------------------------------------- SB3's own flows
@pytest.mark.parametrize("model_class", [DQN, SAC, TD3, DDPG, TQC, QRDQN])
@pytest.mark.parametrize("n_envs", [1, 2])
def test_every_learner_trains_on_the_drop_in_buffer(model_class, n_envs):
    env = make_vec_env(lambda: bit_flipping(model_class), n_envs=n_envs)
    model = learner(model_class, env, train_freq=4 if model_class in DISCRETE else 1)
    model.learn(200)
    assert isinstance(model.replay_buffer, HerReplayBuffer) and model._n_updates > 0


def test_goal_selection_strategy_accepts_stable_baselines_own_enum():
    model = learner(
        SAC,
        bit_flipping(SAC),
        replay_buffer_kwargs={"goal_selection_strategy": StableBaselinesStrategy.FINAL},
    )
    assert model.replay_buffer.goal_selection_strategy is GoalSelectionStrategy.FINAL


def test_random_strategy_and_offline_relabeling_are_her_wrap_keywords():
    model = learner(
        SAC, bit_flipping(SAC), replay_buffer_kwargs={"goal_selection_strategy": "random", "online": False}
    )
    model.learn(150)
    settings = model.replay_buffer.settings
    assert (settings.goal_selection_strategy, settings.online) == (GoalSelectionStrategy.RANDOM, False)


def test_a_seeded_learner_samples_the_same_batches_run_to_run():
    """SB3 gives replay buffers no seed: the drop-in draws its own from numpy's generator, which seed= seeds."""
    batches = []
    for _ in range(2):
        model = learner(SAC, DummyVecEnv([CountingGoalEnv]), learning_starts=10_000)
        model.learn(30)
        batches.append(model.replay_buffer.sample(64).observations["desired_goal"].numpy())
    assert np.array_equal(*batches)


def test_multiple_learn_calls_keep_one_buffer():
    model = learner(SAC, bit_flipping(SAC))
    model.learn(120)
    buffer = model.replay_buffer
    model.learn(60, reset_num_timesteps=False)
    assert model.replay_buffer is buffer and buffer.size() == 180


def counting_learner(**kwargs: Any) -> Any:
    """A learner that only collects (no training), on 5-step episodes, so each run ends mid-episode."""
    return learner(SAC, DummyVecEnv([CountingGoalEnv]), learning_starts=10_000, **kwargs)


def finished_lengths(buffer: HerReplayBuffer) -> list[int]:
    """Lengths of the finished episodes, read at their first rows."""
    buffer.flush()
    storage = buffer.replay.storage
    starts = (storage.step_index[:, 0] == 0) & (storage.episode_length[:, 0] > 0)
    return sorted(storage.episode_length[starts, 0].tolist())


def test_loaded_buffer_without_truncation_continues_the_open_episode(tmp_path):
    model = counting_learner()
    model.learn(7)  # one episode of 5 steps, then 2 steps of the next
    model.save_replay_buffer(tmp_path / "buffer.pkl")
    model.load_replay_buffer(tmp_path / "buffer.pkl", truncate_last_traj=False)
    model.learn(8, reset_num_timesteps=False)  # the open episode's last 3 steps, then a full one
    assert finished_lengths(model.replay_buffer) == [5, 5, 5]


def test_a_learn_call_that_resets_the_env_ends_the_episode_in_progress():
    """SB3's learn(reset_num_timesteps=True) resets the env without telling the buffer; written in one chunk."""
    model = counting_learner()
    model.learn(7)  # one episode of 5 steps, then 2 steps of the next
    model.learn(7)  # the reset ends those 2 steps; one episode of 5, then 2 steps of the next
    assert finished_lengths(model.replay_buffer) == [2, 5, 5]


def test_a_reset_between_single_writes_ends_the_episode_in_progress():
    model = counting_learner()
    model.learn(7)
    model.replay_buffer.flush()
    model.learn(3)  # fewer steps than a chunk: written one by one
    assert finished_lengths(model.replay_buffer) == [2, 5]


def test_loaded_buffer_with_truncation_closes_the_open_episode_with_a_warning(tmp_path):
    model = counting_learner()
    model.learn(7)
    model.save_replay_buffer(tmp_path / "buffer.pkl")
    with pytest.warns(UserWarning, match="last trajectory in the replay buffer will be truncated"):
        model.load_replay_buffer(tmp_path / "buffer.pkl", truncate_last_traj=True)
    assert finished_lengths(model.replay_buffer) == [2, 5]


def test_loaded_buffer_samples_with_the_env_restored(tmp_path):
    model = learner(SAC, bit_flipping(SAC))
    model.learn(150)
    model.save_replay_buffer(tmp_path / "buffer.pkl")
    with pytest.warns(UserWarning, match="will be truncated"):
        model.load_replay_buffer(tmp_path / "buffer.pkl")
    model.learn(50, reset_num_timesteps=False)
    assert model.replay_buffer.size() == 200 and model.replay_buffer.goal_functions is not None


def test_a_loaded_model_goes_on_training_with_its_loaded_buffer(tmp_path):
    env = DummyVecEnv([lambda: bit_flipping(SAC)])
    model = learner(SAC, env)
    model.learn(150)
    model.save(tmp_path / "model.zip")
    model.save_replay_buffer(tmp_path / "buffer.pkl")
    loaded = SAC.load(tmp_path / "model.zip", env=env)
    with pytest.warns(UserWarning, match="will be truncated"):
        loaded.load_replay_buffer(tmp_path / "buffer.pkl")
    updates = loaded._n_updates
    loaded.learn(50, reset_num_timesteps=False)
    assert type(loaded.replay_buffer) is HerReplayBuffer and loaded._n_updates > updates


def test_steps_added_after_unpickling_reach_the_samples():
    buffer = counting_learner().replay_buffer
    restored = pickle.loads(pickle.dumps(buffer))
    restored.set_env(DummyVecEnv([CountingGoalEnv]))
    add_counting_episode(restored, length=3)
    counts = restored.sample(64).observations["observation"].numpy().ravel()
    assert set(counts.tolist()) == {0.0, 1.0, 2.0}


def test_an_unpickled_buffer_without_env_names_set_env():
    restored = pickle.loads(pickle.dumps(counting_learner().replay_buffer))
    add_counting_episode(restored, length=3)
    with pytest.raises(ValueError, match=r"call set_env\(env\)"):
        restored.sample(8)


def test_vec_normalize_normalizes_samples_of_raw_stored_observations():
    env = VecNormalize(make_vec_env(CountingGoalEnv, n_envs=2), norm_reward=False)
    model = learner(SAC, env)
    model.learn(150)
    raw = model.replay_buffer.sample(64).observations["observation"].numpy()
    normalized = model.replay_buffer.sample(64, env=env).observations["observation"].numpy()
    integers = {float(count) for count in range(6)}
    assert set(raw.ravel().tolist()) <= integers and not set(normalized.ravel().tolist()) <= integers


# ---------------------------------------------------------------------------- SubprocVecEnv
def subproc(env_fn: Any, n_envs: int = 2) -> SubprocVecEnv:
    # fork: the children see this test module's env classes without importing it
    return make_vec_env(
        env_fn, n_envs=n_envs, vec_env_cls=SubprocVecEnv, vec_env_kwargs={"start_method": "fork"}
    )


@pytest.mark.parametrize(
    "env_fn",
    [lambda: CountingGoalEnv(), lambda: BitFlippingEnv(n_bits=4, continuous=True, max_steps=4)],
    ids=["env class of this module", "SB3 BitFlippingEnv (placeholder spec)"],
)
def test_subproc_vec_env_built_from_a_callable_relabels_with_a_local_copy(env_fn):
    env = subproc(env_fn)
    try:
        model = learner(SAC, env)
        model.learn(150)
        samples = model.replay_buffer.sample(128)
    finally:
        env.close()
    local = env_fn()
    expected = local.compute_reward(
        samples.next_observations["achieved_goal"].numpy(), samples.observations["desired_goal"].numpy(), None
    )
    assert model.replay_buffer.goal_functions.from_copy and np.array_equal(
        samples.rewards.numpy().ravel(), expected
    )


def test_subproc_env_that_can_be_neither_made_nor_copied_names_the_fix():
    env = subproc(UnpicklableGoalEnv, n_envs=1)
    with pytest.raises(TypeError, match=r"register the env with gymnasium\.register"):
        HerReplayBuffer(100, env.observation_space, env.action_space, env)
    with contextlib.suppress(BrokenPipeError, EOFError):  # the worker died failing to pickle its env
        env.close()


# ---------------------------------------------------------------------------- compute_reward
def test_image_bit_flipping_reward_is_vectorized_once_the_env_was_reset():
    """SB3's image env computes rewards only after a reset: the choice waits for real data, without warning."""
    env = DummyVecEnv([lambda: BitFlippingEnv(n_bits=4, max_steps=4, image_obs_space=True)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = learner(
            DQN, env, buffer_size=2000, policy_kwargs={"net_arch": [16], "normalize_images": False}
        )
        model.learn(150)
    assert model.replay_buffer.replay.reward_fn.vectorized is True


def test_rewards_of_relabeled_goals_are_recomputed_and_reached_goals_terminate_under_the_drop_in():
    model = learner(
        SAC,
        DummyVecEnv([ReachingGoalEnv]),
        learning_starts=10_000,
        replay_buffer_kwargs={"goal_selection_strategy": "final"},
    )
    model.learn(10)
    samples = model.replay_buffer.sample(200)
    reached = samples.rewards.numpy().ravel() == 0
    assert reached.any() and np.array_equal(samples.dones.numpy().ravel(), reached.astype(np.float32))


def test_sampling_starts_before_the_first_episode_ends():
    model = learner(SAC, DummyVecEnv([lambda: CountingGoalEnv(length=1000)]), learning_starts=20)
    model.learn(40)
    model.replay_buffer.flush()
    assert model._n_updates > 0 and model.replay_buffer.replay.storage.n_finished_transitions == 0


# ---------------------------------------------------------------------------- infos
def add_counting_episode(buffer: HerReplayBuffer, length: int, env_cls: type = CountingGoalEnv) -> list:
    """Add one episode of ``env_cls`` as SB3's ``_store_transition`` does; return the info dicts given."""
    env = env_cls(length=length)
    observation, _ = env.reset()
    given = []
    for _ in range(length):
        next_observation, reward, terminated, truncated, info = env.step(env.action_space.sample())
        info = {**info, "TimeLimit.truncated": truncated}
        given.append(info)
        buffer.add(
            {key: value[None] for key, value in observation.items()},
            {key: value[None] for key, value in next_observation.items()},
            np.zeros((1, 1), np.float32),
            np.array([reward], np.float32),
            np.array([terminated or truncated]),
            [info],
        )
        observation = next_observation
    return given


def drop_in(env_cls: type = CountingGoalEnv, **kwargs: Any) -> HerReplayBuffer:
    env = DummyVecEnv([env_cls])
    return HerReplayBuffer(100, env.observation_space, env.action_space, env, device="cpu", seed=0, **kwargs)


def test_infos_that_compute_reward_never_reads_are_not_kept():
    buffer = drop_in()
    add_counting_episode(buffer, length=3)
    assert not buffer.stores_infos


def test_infos_that_compute_reward_reads_are_kept_and_reach_it():
    buffer = drop_in(BonusGoalEnv, goal_selection_strategy="final")
    add_counting_episode(buffer, length=3, env_cls=BonusGoalEnv)
    samples = buffer.sample(64)
    counts = samples.next_observations["achieved_goal"].numpy().ravel()
    assert buffer.stores_infos and np.array_equal(samples.rewards.numpy().ravel(), counts)


def test_store_infos_false_with_a_compute_reward_that_reads_them_is_refused():
    buffer = drop_in(BonusGoalEnv, store_infos=False)
    with pytest.raises(ValueError, match=r"compute_reward reads the info dicts.*store_infos=True"):
        add_counting_episode(buffer, length=3, env_cls=BonusGoalEnv)


def test_infos_are_kept_by_reference_unless_copy_info_dict():
    by_reference, copied = drop_in(store_infos=True), drop_in(copy_info_dict=True)
    given = add_counting_episode(by_reference, length=2), add_counting_episode(copied, length=2)
    by_reference.flush(), copied.flush()
    stored = [buffer.replay.storage.infos[0, 0] for buffer in (by_reference, copied)]
    assert stored[0] is given[0][0] and stored[1] is not given[1][0] and stored[1] == given[1][0]


# ---------------------------------------------------------------------------- options
def truncated_step_dones(handle_timeout_termination: bool) -> np.ndarray:
    buffer = drop_in(n_sampled_goal=0, handle_timeout_termination=handle_timeout_termination)
    add_counting_episode(buffer, length=2)
    samples = buffer.sample(64)
    last = samples.observations["observation"].numpy().ravel() == 1
    return samples.dones.numpy().ravel()[last]


def test_a_truncated_step_keeps_its_bootstrap_by_default():
    assert not truncated_step_dones(True).any()


def test_without_timeout_handling_a_truncated_step_is_terminal_as_in_sb3():
    dones = truncated_step_dones(False)
    assert dones.size > 0 and dones.all()


@pytest.mark.parametrize(
    "kwargs",
    [{"prioritized": True}, {"laber": "mean"}, {"alpha": 0.6}],
    ids=["prioritized", "laber", "alpha"],
)
def test_weighted_replay_is_refused_naming_her(kwargs):
    with pytest.raises(ValueError, match=r"her_wrap\.HER\(policy, env, SAC, prioritized=True\)"):
        drop_in(**kwargs)


def test_optimize_memory_usage_is_refused():
    with pytest.raises(ValueError, match="optimize_memory_usage is not supported"):
        drop_in(optimize_memory_usage=True)


@pytest.mark.parametrize("n_envs", [1, 2, 4])
def test_buffer_size_counts_transitions_over_all_envs_as_sb3(n_envs):
    env = make_vec_env(CountingGoalEnv, n_envs=n_envs)
    model = SAC("MultiInputPolicy", env, buffer_size=1000, replay_buffer_class=HerReplayBuffer)
    storage = model.replay_buffer.replay.storage
    assert (storage.n_rows, storage.n_envs) == (1000 // n_envs, n_envs)


# ---------------------------------------------------------------------------- the docs' examples
DOCS = Path(__file__).resolve().parents[2] / "docs"


def page_block(page: str, language: str) -> str:
    """The first block of ``language`` on a docs page, its docs-test markers applied (tiny budgets)."""
    from doc_blocks import fenced_blocks

    return next(block.code for block in fenced_blocks(DOCS / page) if block.language == language)


def test_drop_in_page_example_builds_a_learner_on_the_drop_in():
    namespace: dict[str, Any] = {}
    exec(compile(page_block("sb3-buffer.md", "python"), "docs/sb3-buffer.md", "exec"), namespace)
    assert type(namespace["model"].replay_buffer) is HerReplayBuffer


def test_zoo_page_example_names_the_buffer_as_the_tested_zoo_file_does():
    (example,) = yaml.safe_load(page_block("zoo.md", "yaml")).values()
    tested = yaml.safe_load((Path(__file__).parents[1] / "data" / "zoo_her.yml").read_text())["FetchReach-v4"]
    assert example["replay_buffer_class"] == tested["replay_buffer_class"]


def test_the_drop_in_buffer_hands_its_raw_strategy_to_the_settings_once(strategy_parses):
    parsed = strategy_parses
    model = learner(SAC, bit_flipping(SAC), replay_buffer_kwargs={"goal_selection_strategy": "EPISODE"})
    assert parsed == ["EPISODE"]
    assert model.replay_buffer.goal_selection_strategy is GoalSelectionStrategy.EPISODE


def test_settings_left_out_are_hindsight_settings_defaults():
    assert drop_in().settings == HindsightSettings()


def test_settings_given_as_keywords_reach_the_buffer():
    buffer = drop_in(n_sampled_goal=2, goal_selection_strategy="episode", online=False)
    assert buffer.settings == HindsightSettings(2, "episode", online=False)


def test_a_settings_object_and_setting_keywords_together_are_refused():
    with pytest.raises(TypeError, match=r"settings= and \['n_sampled_goal'\]"):
        drop_in(settings=HindsightSettings(), n_sampled_goal=2)


def test_an_unknown_setting_keyword_names_the_closest_one():
    with pytest.raises(ValueError, match="did you mean 'n_steps'"):
        drop_in(n_step=2)


def test_n_step_returns_without_the_learners_gamma_are_refused_naming_it():
    with pytest.raises(ValueError, match="add gamma="):
        drop_in(n_steps=3)


def test_sample_batch_uses_the_settings_beta_unless_given(monkeypatch):
    buffer = drop_in(settings=HindsightSettings(prioritized=True, beta=0.7))
    add_counting_episode(buffer, length=3)
    betas: list[float] = []
    draw = buffer.replay.sample

    def recording(batch_size: int, beta: float) -> dict[str, np.ndarray]:
        betas.append(beta)
        return draw(batch_size, beta=beta)

    monkeypatch.setattr(buffer.replay, "sample", recording)
    buffer.sample_batch(8)
    buffer.sample_batch(8, beta=1.0)
    assert betas == [0.7, 1.0]


def test_shuffled_rows_mix_relabeled_rows_into_every_slice():
    """Relabeled rows come first in a core batch: shuffle_rows spreads them over the sample (SBX cuts it)."""
    buffer = drop_in(goal_selection_strategy="final", shuffle_rows=True)
    add_counting_episode(buffer, length=6)
    samples = buffer.sample(400)
    relabeled = samples.observations["desired_goal"].numpy().ravel() != 6 + 10  # the episode's own goal
    assert 0.5 < relabeled[:200].mean() < 1.0 and 0.5 < relabeled[200:].mean() < 1.0
