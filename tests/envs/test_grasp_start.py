"""GraspStartWrapper: pick-and-place episodes that start with the object in the gripper (Fetch and Panda)."""

from __future__ import annotations

from pathlib import Path

import gymnasium
import numpy as np
import pytest
from robotics_extra import ROBOTICS, needs_panda_gym

from her_wrap import BitFlippingEnv
from her_wrap.envs import GraspStartWrapper, make_goal_env

pytestmark = ROBOTICS

#: The gripper's position in the observation of both families.
GRIPPER = slice(0, 3)
#: Height of the object's centre on the table, by env id.
TABLE_HEIGHT = {"FetchPickAndPlace-v4": 0.425, "PandaPickAndPlace-v3": 0.02}
ENV_IDS = [
    "FetchPickAndPlace-v4",
    pytest.param("PandaPickAndPlace-v3", marks=needs_panda_gym),
]
#: Gripper closed (-1), moving up (+1 on z), still in x and y.
LIFT = np.array([0.0, 0.0, 1.0, -1.0])


def _object_height_after_lifting(env: gymnasium.Env, steps: int = 10) -> float:
    observation = None
    for _ in range(steps):
        observation, *_ = env.step(LIFT)
    assert observation is not None
    return float(observation["achieved_goal"][2])


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_grasped_start_holds_the_object_so_closing_and_lifting_raises_it(env_id: str) -> None:
    table = TABLE_HEIGHT[env_id]
    env = GraspStartWrapper(make_goal_env(env_id), share=1.0)
    observation, info = env.reset(seed=3)
    assert info["grasp_start"] is True and env.grasped
    np.testing.assert_allclose(observation["achieved_goal"], observation["observation"][GRIPPER], atol=0.04)
    assert observation["achieved_goal"][2] > table + 0.05  # lifted off the table, into the gripper
    start = float(observation["achieved_goal"][2])
    assert _object_height_after_lifting(env) > start + 0.1
    env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_lifting_without_a_grasped_start_leaves_the_object_on_the_table(env_id: str) -> None:
    """The same lift from the task's own start moves no object: what the grasped start changes."""
    table = TABLE_HEIGHT[env_id]
    env = GraspStartWrapper(make_goal_env(env_id), share=0.0)
    observation, info = env.reset(seed=3)
    assert info["grasp_start"] is False
    assert observation["achieved_goal"][2] == pytest.approx(table, abs=0.01)
    assert _object_height_after_lifting(env) == pytest.approx(table, abs=0.01)
    env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_grasped_start_keeps_the_goal_the_reset_drew(env_id: str) -> None:
    plain = make_goal_env(env_id)
    wrapped = GraspStartWrapper(make_goal_env(env_id), share=1.0)
    for seed in (0, 1, 2):
        expected, _ = plain.reset(seed=seed)
        observation, _ = wrapped.reset(seed=seed)
        np.testing.assert_array_equal(observation["desired_goal"], expected["desired_goal"])
        assert not np.allclose(observation["achieved_goal"], expected["achieved_goal"], atol=0.01)
    plain.close()
    wrapped.close()


def test_share_0_gives_the_task_own_observations() -> None:
    plain = make_goal_env("FetchPickAndPlace-v4")
    wrapped = GraspStartWrapper(make_goal_env("FetchPickAndPlace-v4"), share=0.0)
    expected, _ = plain.reset(seed=5)
    observation, _ = wrapped.reset(seed=5)
    for key in expected:
        np.testing.assert_array_equal(observation[key], expected[key])


def test_share_of_grasped_starts_follows_the_probability_and_the_seed() -> None:
    def draws(seed: int) -> list[bool]:
        env = GraspStartWrapper(make_goal_env("FetchPickAndPlace-v4"), share=0.3)
        env.reset(seed=seed)
        started = [env.grasped]
        for _ in range(199):
            started.append(env.reset()[1]["grasp_start"])
        env.close()
        return started

    first = draws(11)
    assert 0.2 < np.mean(first) < 0.4
    assert draws(11) == first
    assert draws(12) != first


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: make_goal_env("FetchPush-v4"), "a blocked gripper"),
        (lambda: make_goal_env("FetchReach-v4"), "no object"),
        pytest.param(lambda: make_goal_env("PandaPush-v3"), "a blocked gripper", marks=needs_panda_gym),
        pytest.param(
            lambda: make_goal_env("PandaReach-v3"), "PandaReachEnv has a blocked", marks=needs_panda_gym
        ),
        (lambda: BitFlippingEnv(n_bits=4), "supports gymnasium-robotics' Fetch envs"),
        (
            lambda: gymnasium.wrappers.TransformObservation(
                make_goal_env("FetchPickAndPlace-v4"), lambda obs: obs, None
            ),
            "changes observations",
        ),
    ],
)
def test_envs_it_cannot_grasp_in_are_refused_with_the_reason(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GraspStartWrapper(make(), share=0.5)


@pytest.mark.parametrize("share", [-0.1, 1.5, True, "half"])
def test_share_must_be_a_probability(share) -> None:
    with pytest.raises(ValueError, match=r"probability in \[0, 1\]"):
        GraspStartWrapper(make_goal_env("FetchPickAndPlace-v4"), share=share)


def test_config_entry_wraps_the_training_envs_only(tmp_path: Path) -> None:
    from her_wrap.runs.config import load_run_config
    from her_wrap.runs.env_factory import make_training_envs
    from her_wrap.runs.yaml_io import write_yaml_file

    path = tmp_path / "her.yml"
    path.write_text(
        "FetchPickAndPlace-v4:\n  model_class: ddpg\n  n_timesteps: 1000\n  n_envs: 2\n  grasp_start: 0.5\n"
    )
    config = load_run_config(path, "FetchPickAndPlace-v4")
    assert config.grasp_start == 0.5
    # A run folder's config.yml (written from to_entry) loads into the same share.
    write_yaml_file(tmp_path / "config.yml", {"FetchPickAndPlace-v4": config.to_entry()})
    assert load_run_config(tmp_path / "config.yml", "FetchPickAndPlace-v4").grasp_start == 0.5
    envs = make_training_envs(config, seed=0)
    try:
        assert envs.train.env_is_wrapped(GraspStartWrapper) == [True, True]
        assert envs.evaluate.env_is_wrapped(GraspStartWrapper) == [False]
        assert envs.train.get_attr("share") == [0.5, 0.5]
    finally:
        envs.close()


def test_config_grasp_start_from_the_command_line_and_its_errors(tmp_path: Path) -> None:
    from her_wrap.runs.config import load_run_config
    from her_wrap.runs.env_factory import make_training_envs
    from her_wrap.runs.errors import UsageError

    path = tmp_path / "her.yml"
    path.write_text("FetchPickAndPlace-v4:\n  model_class: ddpg\n  n_timesteps: 1000\n")
    assert load_run_config(path, "FetchPickAndPlace-v4").grasp_start is None
    config = load_run_config(path, "FetchPickAndPlace-v4", overrides=["grasp_start:0.25"])
    assert config.grasp_start == 0.25
    with pytest.raises(UsageError, match=r"grasp_start must be a probability in \[0, 1\], got 2"):
        load_run_config(path, "FetchPickAndPlace-v4", overrides=["grasp_start:2"])
    path.write_text("FetchPush-v4:\n  model_class: ddpg\n  n_timesteps: 1000\n  grasp_start: 0.5\n")
    with pytest.raises(UsageError, match="FetchPush-v4: grasp_start needs an object and a gripper"):
        make_training_envs(load_run_config(path, "FetchPush-v4"), seed=0)
