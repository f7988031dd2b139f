"""Start a share of pick-and-place episodes with the object held in the gripper.

Lifting is the hard part of exploring pick-and-place: half of FetchPickAndPlace's goals are in the air,
and a policy that has never held the object sees no transition that lifts it. The HER paper (Andrychowicz
et al., 2017, section 4.1) started half of its pick-and-place training episodes from a state with the box
grasped. :class:`GraspStartWrapper` does that for the envs that have a gripper and one object:

- gymnasium-robotics' Fetch envs with an object and a free gripper (``FetchPickAndPlace-v4``);
- panda-gym's envs with an ``object`` body and a free gripper (``PandaPickAndPlace-v3``).

After the wrapped env's own reset (object on the table, goal sampled), a grasped start opens the fingers,
puts the object between them at the gripper's position and closes them for a few simulation steps; the
episode then begins there with the goal the reset drew. Only training envs get the wrapper: evaluations
start as the task does.

In a config entry, ``grasp_start: 0.5`` wraps each training env of the run
(:mod:`her_wrap.runs.config`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

#: Control steps (each the env's own simulation substeps) that close the fingers on the object: Fetch's
#: fingers take about 10 to close on its 5 cm box, Panda's about 5 on its 4 cm one.
FETCH_CLOSE_STEPS = 10
PANDA_CLOSE_STEPS = 5

#: Mixed into the reset seed for this wrapper's draws, so they are not the env's own random stream.
_SEED_STREAM = 0x67A5


class GraspStartWrapper(gymnasium.Wrapper):
    """On each reset, with probability ``share``, start the episode with the object in the gripper.

    :param env: a Fetch or Panda env with an object and a gripper that can close (see the module)
    :param share: probability that an episode starts grasped, in ``[0, 1]``
    :raises ValueError: for a share outside ``[0, 1]``, an env without an object or with a blocked
        gripper, an env of another family, or an observation wrapper inside ``env``
    """

    def __init__(self, env: gymnasium.Env, share: float = 0.5) -> None:
        super().__init__(env)
        self.share = check_share(share)
        _refuse_observation_wrappers(env)
        self._grasp = grasp_function(env.unwrapped)
        self._rng = np.random.default_rng()
        #: whether the episode under way started grasped
        self.grasped = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        observation, info = self.env.reset(seed=seed, options=options)
        if seed is not None:
            self._rng = np.random.default_rng([_SEED_STREAM, seed])
        self.grasped = bool(self._rng.random() < self.share)
        if self.grasped:
            observation = self._grasp()
        return observation, {**info, "grasp_start": self.grasped}


def check_share(share: Any) -> float:
    """``share`` as a float, once it is a probability (a config entry's ``grasp_start`` is checked here too).

    :raises ValueError: for anything but a number in ``[0, 1]`` (a bool included)
    """
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
        raise ValueError(f"grasp_start must be a probability in [0, 1], got {share!r}")
    return float(share)


def grasp_function(env: Any) -> Callable[[], dict[str, np.ndarray]]:
    """A function that puts ``env``'s object in its gripper and returns the observation there.

    :param env: an unwrapped Fetch (gymnasium-robotics, MuJoCo bindings) or Panda (panda-gym) env
    :raises ValueError: for an env that has no object, whose gripper is blocked, or of another family
    """
    name = type(env).__name__
    if hasattr(env, "_utils") and hasattr(env, "has_object") and hasattr(env, "_mujoco_step"):
        if not env.has_object or env.block_gripper:
            raise ValueError(
                f"grasp_start needs an object and a gripper that can close; {name} has "
                f"{'no object' if not env.has_object else 'a blocked gripper'} (use it on FetchPickAndPlace)"
            )
        return lambda: _grasp_fetch(env)
    robot, sim = getattr(env, "robot", None), getattr(env, "sim", None)
    if robot is not None and sim is not None and hasattr(robot, "fingers_indices"):
        if robot.block_gripper or "object" not in getattr(sim, "_bodies_idx", {}):
            raise ValueError(
                f"grasp_start needs an object and a gripper that can close; {name} has "
                f"{'a blocked gripper' if robot.block_gripper else 'no object'} (use it on PandaPickAndPlace)"
            )
        return lambda: _grasp_panda(env)
    raise ValueError(
        f"grasp_start supports gymnasium-robotics' Fetch envs and panda-gym's Panda envs with an object "
        f"and a free gripper, not {name}"
    )


def _refuse_observation_wrappers(env: gymnasium.Env) -> None:
    # The grasped start returns the base env's observation: a wrapper that changes observations would be
    # skipped, so it has to go outside this one.
    while isinstance(env, gymnasium.Wrapper):
        if isinstance(env, gymnasium.ObservationWrapper):
            raise ValueError(
                f"GraspStartWrapper must wrap the env inside {type(env).__name__}, which changes observations"
            )
        env = env.env


_FETCH_FINGERS = ("robot0:l_gripper_finger_joint", "robot0:r_gripper_finger_joint")
_FETCH_FINGER_OPEN = 0.05


def _grasp_fetch(env: Any) -> dict[str, np.ndarray]:
    utils, model, data = env._utils, env.model, env.data
    grip = utils.get_site_xpos(model, data, "robot0:grip").copy()
    for finger in _FETCH_FINGERS:
        utils.set_joint_qpos(model, data, finger, _FETCH_FINGER_OPEN)
    pose = utils.get_joint_qpos(model, data, "object0:joint").copy()
    pose[:3] = grip
    pose[3:] = (1.0, 0.0, 0.0, 0.0)
    utils.set_joint_qpos(model, data, "object0:joint", pose)
    utils.set_joint_qvel(model, data, "object0:joint", np.zeros(6))
    env._mujoco.mj_forward(model, data)
    close = np.array([0.0, 0.0, 0.0, -1.0])
    for _ in range(FETCH_CLOSE_STEPS):
        env._set_action(close)
        env._mujoco_step(close)
        env._step_callback()
    return env._get_obs()


_PANDA_FINGER_OPEN = 0.04


def _grasp_panda(env: Any) -> dict[str, np.ndarray]:
    robot, sim = env.robot, env.sim
    with sim.no_rendering():
        sim.set_joint_angles(
            robot.body_name, joints=robot.fingers_indices, angles=np.full(2, _PANDA_FINGER_OPEN)
        )
        sim.set_base_pose("object", robot.get_ee_position().copy(), np.array([0.0, 0.0, 0.0, 1.0]))
        close = np.zeros(robot.action_space.shape[0])
        close[-1] = -1.0
        for _ in range(PANDA_CLOSE_STEPS):
            robot.set_action(close)
            sim.step()
    return env._get_obs()
