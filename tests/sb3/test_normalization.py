"""Observation normalization for goal envs: ``HER(..., normalize=True)``.

The HER paper's DDPG kept running mean/std statistics of observations and goals and clipped normalized
inputs at 5. Here SB3's ``VecNormalize`` over the goal dict does it, under the flattening wrapper, so
stored transitions stay raw and every batch, relabeled goals included, is normalized at sample time.
The runs are tiny (continuous 4-bit flipping, one 32-unit layer).
"""

from __future__ import annotations

import pathlib
import pickle
import zipfile
from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3 import SAC
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from her_wrap import HER, BitFlippingEnv
from her_wrap.sb3.persistence import NORMALIZER_NAME

N_BITS = 4


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Any:
    """Tiny networks on a shared 2-core machine: one torch thread is faster, not slower."""
    threads = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(threads)


def make_env() -> BitFlippingEnv:
    return BitFlippingEnv(N_BITS, continuous=True)


def trained(policy: str = "MlpPolicy", env: Any = None, **her_kwargs: Any) -> HER:
    kwargs: dict[str, Any] = {"normalize": True} if env is None else {}
    kwargs.update(her_kwargs)
    model = HER(
        policy,
        make_env() if env is None else env,
        SAC,
        seed=0,
        learning_starts=50,
        batch_size=32,
        policy_kwargs={"net_arch": [32]},
        **kwargs,
    )
    model.learn(120)
    return model


def fresh_observations(count: int = 16) -> dict[str, np.ndarray]:
    env = make_env()
    observations = [env.reset(seed=100 + i)[0] for i in range(count)]
    return {key: np.stack([obs[key] for obs in observations]) for key in observations[0]}


def statistics(normalizer: VecNormalize) -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
    return {key: (rms.mean, rms.var, rms.count) for key, rms in normalizer.obs_rms.items()}


def set_statistics(normalizer: VecNormalize, mean: dict[str, float], var: dict[str, float]) -> None:
    for key, rms in normalizer.obs_rms.items():
        rms.mean = np.full(N_BITS, mean[key])
        rms.var = np.full(N_BITS, var[key])


def assert_same_statistics(left: VecNormalize, right: VecNormalize) -> None:
    for key, (mean, var, count) in statistics(left).items():
        other_mean, other_var, other_count = statistics(right)[key]
        np.testing.assert_array_equal(mean, other_mean, err_msg=key)
        np.testing.assert_array_equal(var, other_var, err_msg=key)
        assert count == other_count, key


def test_default_settings_normalize_observations_and_goals_clipped_at_5_not_rewards():
    model = trained()
    assert model.normalizer is not None
    settings = (model.normalizer.norm_obs, model.normalizer.norm_reward, model.normalizer.clip_obs)
    assert settings == (True, False, 5.0)


def test_a_normalize_dict_overrides_the_defaults():
    model = HER("MlpPolicy", make_env(), SAC, normalize={"clip_obs": 10.0}, learning_starts=50)
    assert model.normalizer is not None and model.normalizer.clip_obs == 10.0


def test_statistics_are_updated_from_the_env_during_learning():
    model = trained()
    assert model.normalizer is not None
    assert all(count > 100 for _, _, count in statistics(model.normalizer).values())


@pytest.mark.parametrize("policy", ["MlpPolicy", "MultiInputPolicy"])
def test_saved_statistics_are_restored_exactly(tmp_path: pathlib.Path, policy: str):
    model = trained(policy)
    model.save(tmp_path / "model")
    loaded = HER.load(tmp_path / "model")
    assert model.normalizer is not None and loaded.normalizer is not None
    assert_same_statistics(model.normalizer, loaded.normalizer)


@pytest.mark.parametrize("policy", ["MlpPolicy", "MultiInputPolicy"])
def test_predict_after_load_without_env_equals_predict_before_save(tmp_path: pathlib.Path, policy: str):
    model = trained(policy)
    observations = fresh_observations()
    before, _ = model.predict(observations, deterministic=True)
    model.save(tmp_path / "model")
    after, _ = HER.load(tmp_path / "model").predict(observations, deterministic=True)
    np.testing.assert_array_equal(before, after)


def test_predict_normalizes_raw_dict_observations():
    """Raw observations far from the statistics' mean give the action of their normalized (clipped) form."""
    model = trained()
    assert model.normalizer is not None
    set_statistics(model.normalizer, {"observation": 0.5, "achieved_goal": 0.5, "desired_goal": 0.5}, {
        "observation": 1e-4, "achieved_goal": 1e-4, "desired_goal": 1e-4})  # fmt: skip
    observations = fresh_observations()
    expected, _ = model.model.predict(
        model.layout.flatten(model.normalizer.normalize_obs(observations)), deterministic=True
    )
    actual, _ = model.predict(observations, deterministic=True)
    np.testing.assert_array_equal(actual, expected)


def test_load_with_an_env_wraps_it_with_frozen_statistics(tmp_path: pathlib.Path):
    model = trained()
    model.save(tmp_path / "model")
    loaded = HER.load(tmp_path / "model", env=make_env())
    assert loaded.normalizer is not None and loaded.model._vec_normalize_env is loaded.normalizer
    assert (loaded.normalizer.training, statistics(loaded.normalizer).keys()) == (
        False,
        statistics(model.normalizer).keys(),
    )


def test_load_keeps_updating_statistics_when_asked(tmp_path: pathlib.Path):
    model = trained()
    model.save(tmp_path / "model")
    loaded = HER.load(tmp_path / "model", env=make_env(), normalize_training=True)
    counts = [count for _, _, count in statistics(loaded.normalizer).values()]
    loaded.learn(60, reset_num_timesteps=False)
    assert all(
        count > before
        for (_, _, count), before in zip(statistics(loaded.normalizer).values(), counts, strict=True)
    )


def test_the_saved_statistics_are_a_vec_normalize_pickle_that_sb3_can_load(tmp_path: pathlib.Path):
    model = trained()
    model.save(tmp_path / "model")
    with zipfile.ZipFile(tmp_path / "model.zip") as archive:
        (tmp_path / "stats.pkl").write_bytes(archive.read(NORMALIZER_NAME))
    restored = VecNormalize.load(str(tmp_path / "stats.pkl"), DummyVecEnv([make_env]))
    assert_same_statistics(model.normalizer, restored)


def test_relabeled_goals_are_normalized_with_the_statistics_of_desired_goal():
    """A relabeled goal (an achieved goal) goes where desired_goal goes and gets desired_goal's statistics."""
    model = trained(n_sampled_goal=4)
    normalizer = model.normalizer
    assert normalizer is not None
    set_statistics(normalizer, {"observation": 0.0, "achieved_goal": 0.9, "desired_goal": 0.2}, {
        "observation": 1.0, "achieved_goal": 0.01, "desired_goal": 0.25})  # fmt: skip
    batch = model.replay_buffer.replay.sample(256)
    samples = model.replay_buffer.to_samples(batch, env=normalizer)
    desired = model.layout.unflatten(samples.observations.numpy())["desired_goal"]
    relabeled = batch["relabeled"]
    expected = np.clip((batch["desired_goal"] - 0.2) / np.sqrt(0.25 + normalizer.epsilon), -5, 5)
    assert relabeled.any()
    np.testing.assert_allclose(desired[relabeled], expected[relabeled], rtol=1e-6)


def test_normalized_batches_are_clipped_at_5():
    model = trained()
    normalizer = model.normalizer
    assert normalizer is not None
    tiny = {"observation": 1e-6, "achieved_goal": 1e-6, "desired_goal": 1e-6}
    set_statistics(normalizer, {"observation": 0.5, "achieved_goal": 0.5, "desired_goal": 0.5}, tiny)
    samples = model.replay_buffer.sample(64, env=normalizer)
    values = np.abs(np.concatenate([samples.observations.numpy(), samples.next_observations.numpy()]))
    np.testing.assert_array_equal(np.unique(values), [5.0])


def test_stored_transitions_stay_raw():
    model = trained()
    raw = model.replay_buffer.sample(64).observations.numpy()  # no env: no normalization
    # bits, up to the float error of VecNormalize's unnormalize_obs on final observations
    np.testing.assert_allclose(raw, raw.round().clip(0, 1), atol=1e-6)


def test_own_vec_normalize_is_saved_and_restored_around_a_plain_env(tmp_path: pathlib.Path):
    venv = VecNormalize(DummyVecEnv([make_env]), norm_reward=False)
    model = trained(env=venv)
    observations = fresh_observations()
    before, _ = model.predict(venv.normalize_obs(observations), deterministic=True)  # SB3's convention
    model.save(tmp_path / "model")
    loaded = HER.load(tmp_path / "model", env=make_env())
    after, _ = loaded.predict(observations, deterministic=True)  # the plain env's raw observations
    np.testing.assert_array_equal(before, after)


def test_load_keeps_a_given_vec_normalize_as_it_is(tmp_path: pathlib.Path):
    model = trained()
    model.save(tmp_path / "model")
    venv = VecNormalize(DummyVecEnv([make_env]), norm_reward=False)
    loaded = HER.load(tmp_path / "model", env=venv)
    assert (loaded.normalizer is venv, loaded.normalizes_observations) == (True, False)


def test_set_env_carries_the_statistics_to_the_new_env():
    model = trained()
    model.set_env(make_env())
    assert model.normalizer is not None and model.normalizer is model.model._vec_normalize_env
    assert model.normalizer.venv is not None and model.normalizer.training


def test_normalize_with_an_env_that_already_normalizes_is_an_error():
    venv = VecNormalize(DummyVecEnv([make_env]))
    with pytest.raises(ValueError, match="already a VecNormalize"):
        HER("MlpPolicy", venv, SAC, normalize=True)


def test_the_statistics_pickle_holds_no_env(tmp_path: pathlib.Path):
    model = trained()
    model.save(tmp_path / "model")
    with zipfile.ZipFile(tmp_path / "model.zip") as archive:
        restored = pickle.loads(archive.read(NORMALIZER_NAME))
    assert restored.venv is None
