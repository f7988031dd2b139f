"""Joint reads of gymnasium-robotics' MuJoCo envs by addresses found once: the same observations as the env's own."""

from __future__ import annotations

import copy

import gymnasium
import numpy as np
import pytest
from robotics_extra import ROBOTICS

from her_wrap import BitFlippingEnv
from her_wrap.envs import RobotJointReader, make_goal_env, speed_up_robot_observations

pytestmark = ROBOTICS

FETCH = ["FetchReach-v4", "FetchPush-v4", "FetchSlide-v4", "FetchPickAndPlace-v4"]


def mujoco_utils():
    from gymnasium_robotics.utils import mujoco_utils

    return mujoco_utils


@pytest.mark.parametrize("env_id", FETCH)
def test_made_envs_read_joints_by_address_with_the_same_observations(env_id):
    fast = make_goal_env(env_id)
    stock = gymnasium.make(env_id)
    assert isinstance(fast.unwrapped._utils, RobotJointReader)
    assert stock.unwrapped._utils is mujoco_utils()
    rng = np.random.default_rng(0)
    observations = [env.reset(seed=3)[0] for env in (fast, stock)]
    for step in range(120):
        for key in observations[1]:
            assert observations[0][key].dtype == observations[1][key].dtype
            np.testing.assert_array_equal(observations[0][key], observations[1][key])
        action = rng.uniform(-1.0, 1.0, fast.action_space.shape).astype(np.float32)
        results = [env.step(action) for env in (fast, stock)]
        assert results[0][1:4] == results[1][1:4]
        observations = [result[0] for result in results]
        if results[1][2] or results[1][3] or step == 60:
            observations = [env.reset(seed=step)[0] for env in (fast, stock)]


def test_the_reader_returns_the_modules_joint_values_and_hands_on_the_rest():
    env = gymnasium.make("FetchPush-v4")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    unwrapped = env.unwrapped
    names = unwrapped._model_names.joint_names
    reader = RobotJointReader(mujoco_utils(), unwrapped.model, names)
    for got, expected in zip(
        reader.robot_get_obs(unwrapped.model, unwrapped.data, names),
        mujoco_utils().robot_get_obs(unwrapped.model, unwrapped.data, names),
        strict=True,
    ):
        assert got.shape == expected.shape == (15,) and got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    # Other joint names (a copy with the same names too) go through the module's function or its addresses.
    some = [name for name in names if "finger" in name]
    for got, expected in zip(
        reader.robot_get_obs(unwrapped.model, unwrapped.data, some),
        mujoco_utils().robot_get_obs(unwrapped.model, unwrapped.data, some),
        strict=True,
    ):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(
        reader.robot_get_obs(unwrapped.model, unwrapped.data, list(names))[0],
        mujoco_utils().robot_get_obs(unwrapped.model, unwrapped.data, names)[0],
    )
    assert reader.get_site_xpos is mujoco_utils().get_site_xpos
    with pytest.raises(AttributeError):
        reader._no_such_attribute  # noqa: B018
    assert copy.copy(reader).get_site_xpos is mujoco_utils().get_site_xpos


def test_joints_the_reader_cannot_read_are_refused():
    unwrapped = gymnasium.make("FetchPush-v4").unwrapped
    names = unwrapped._model_names.joint_names
    with pytest.raises(ValueError, match="'robot0:no_such_joint' is not a hinge or slide"):
        RobotJointReader(mujoco_utils(), unwrapped.model, ["robot0:slide0", "robot0:no_such_joint"])
    # object0:joint, the block's free joint, is no robot joint: the module's function skips it too.
    with pytest.raises(ValueError, match="no robot joints"):
        RobotJointReader(
            mujoco_utils(), unwrapped.model, [name for name in names if not name.startswith("robot")]
        )


def test_envs_it_does_not_cover_are_left_as_they_are():
    bits = BitFlippingEnv(n_bits=4)
    assert speed_up_robot_observations(bits) is False
    assert not hasattr(bits, "_utils")
    env = gymnasium.make("FetchPush-v4")
    assert speed_up_robot_observations(env) is True
    assert speed_up_robot_observations(env) is True  # once is enough; twice changes nothing
    assert isinstance(env.unwrapped._utils, RobotJointReader)
