"""Callbacks given to HER.learn see HER as their model: SB3's EvalCallback and CheckpointCallback work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback, EvalCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from her_wrap import HER, BitFlippingEnv
from her_wrap.sb3.her_callbacks import CallbackModel

N_BITS = 4


def make_her(policy: str, normalize: bool, tiny_learner_kwargs: Any, env: Any = None) -> HER:
    kwargs = {**tiny_learner_kwargs(), "learning_starts": 16}
    env = env if env is not None else BitFlippingEnv(n_bits=N_BITS)
    return HER(policy, env, DQN, seed=0, normalize=normalize, **kwargs)


class Probe(BaseCallback):
    """Records what its model looks like when training starts, and stops training after ``steps`` calls."""

    def __init__(self, steps: int = 10_000) -> None:
        super().__init__()
        self.steps = steps
        self.seen: dict[str, Any] = {}

    def _on_training_start(self) -> None:
        env = self.model.get_env()
        observation = env.reset()
        self.seen = {
            "model": self.model,
            "observation_space": env.observation_space,
            "vec_normalize": self.model.get_vec_normalize_env(),
            "action": self.model.predict(observation, deterministic=True)[0],
            "raw_observation": observation,
        }

    def _on_step(self) -> bool:
        return self.n_calls < self.steps


@pytest.mark.parametrize(
    ("policy", "normalize"), [("MlpPolicy", False), ("MultiInputPolicy", True), ("MlpPolicy", True)]
)
def test_sb3_eval_callback_evaluates_on_the_envs_dict_observations_and_saves_a_her_zip(
    policy: str, normalize: bool, tmp_path: Path, tiny_learner_kwargs: Any
) -> None:
    her = make_her(policy, normalize, tiny_learner_kwargs)
    evaluation = EvalCallback(
        Monitor(BitFlippingEnv(n_bits=N_BITS)),
        eval_freq=50,
        n_eval_episodes=2,
        best_model_save_path=str(tmp_path),
        log_path=str(tmp_path),
        verbose=0,
    )
    her.learn(120, callback=evaluation)
    assert list(evaluation.evaluations_timesteps) == [50, 100]
    best = HER.load(tmp_path / "best_model", env=BitFlippingEnv(n_bits=N_BITS))
    assert best.normalizes_observations == normalize
    observation, _ = BitFlippingEnv(n_bits=N_BITS).reset(seed=1)
    assert best.predict(observation, deterministic=True)[0] in range(N_BITS)


@pytest.mark.parametrize("policy", ["MlpPolicy", "MultiInputPolicy"])
def test_callbacks_see_the_env_as_given_and_act_as_her_predicts(
    policy: str, tiny_learner_kwargs: Any
) -> None:
    her = make_her(policy, True, tiny_learner_kwargs)
    probe = Probe(steps=20)
    her.learn(40, callback=probe)
    assert isinstance(probe.seen["model"], CallbackModel) and probe.seen["model"].her is her
    assert isinstance(probe.seen["observation_space"], spaces.Dict)
    assert probe.seen["vec_normalize"] is None  # HER's own statistics apply in its predict
    learner_input = her.normalizer.normalize_obs(probe.seen["raw_observation"])
    if policy == "MlpPolicy":
        learner_input = her.layout.flatten(learner_input)
    expected = her.model.predict(learner_input, deterministic=True)[0]
    np.testing.assert_array_equal(probe.seen["action"], expected)


def test_a_vec_normalize_env_given_to_her_is_the_one_callbacks_sync(tiny_learner_kwargs: Any) -> None:
    given = VecNormalize(DummyVecEnv([lambda: BitFlippingEnv(n_bits=N_BITS)]), norm_reward=False)
    her = make_her("MultiInputPolicy", False, tiny_learner_kwargs, env=given)
    probe = Probe(steps=20)
    her.learn(40, callback=probe)
    assert probe.seen["vec_normalize"] is given


def test_callbacks_reach_the_learners_own_attributes_and_function_callbacks_still_stop_training(
    tiny_learner_kwargs: Any,
) -> None:
    her = make_her("MultiInputPolicy", False, tiny_learner_kwargs)
    probe = Probe()
    her.learn(30, callback=probe)
    model = probe.seen["model"]
    assert model.q_net is her.model.q_net and model.model is her.model
    model.exploration_rate = 0.5  # a learner attribute HER does not forward: set on the learner
    assert her.model.exploration_rate == 0.5

    calls: list[int] = []

    def stop_after_five(locals_: dict[str, Any], globals_: dict[str, Any]) -> bool:
        calls.append(1)
        return len(calls) < 5

    before = her.num_timesteps
    her.learn(100, callback=stop_after_five, reset_num_timesteps=False)
    assert len(calls) == 5 and her.num_timesteps == before + 5


def test_sb3_checkpoint_callback_writes_her_zips(tmp_path: Path, tiny_learner_kwargs: Any) -> None:
    her = make_her("MlpPolicy", True, tiny_learner_kwargs)
    her.learn(60, callback=[CheckpointCallback(save_freq=30, save_path=str(tmp_path), verbose=0)])
    saved = sorted(path.name for path in tmp_path.glob("*.zip"))
    assert saved == ["rl_model_30_steps.zip", "rl_model_60_steps.zip"]
    loaded = HER.load(tmp_path / "rl_model_60_steps", env=BitFlippingEnv(n_bits=N_BITS))
    assert loaded.normalizes_observations and loaded.policy_argument == "MlpPolicy"
