"""Faster observations of gymnasium-robotics' MuJoCo robot envs (Fetch, Hand), the same values bit for bit.

Every step of a Fetch env reads the robot's joint positions and velocities through gymnasium-robotics'
``mujoco_utils.robot_get_obs``, which looks each joint up by name, twice, in Python: 30 lookups per step on
Fetch. Reading them by address made a FetchPush step 1.17x faster (``scripts/bench_env_phase.py``).
:class:`RobotJointReader` reads the same entries of ``data.qpos`` and ``data.qvel`` by addresses found once,
and :func:`speed_up_robot_observations` gives it to one env in place of the module (the env reaches every
MuJoCo helper through its ``_utils`` attribute; the reader hands every other helper on to the module).

:func:`~her_wrap.envs.make_goal_env` calls it on every env it makes; ``gymnasium.make`` does not, so call it
on an env made that way to get the same speed. An env it does not cover is left as it is: one whose
``_utils`` is not gymnasium-robotics' ``mujoco_utils`` module (panda-gym, the ``mujoco_py`` envs, any other
package), or whose robot joints are not all hinges and slides.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, cast

import numpy as np

#: The module the reader stands in for.
MUJOCO_UTILS = "gymnasium_robotics.utils.mujoco_utils"


class RobotJointReader:
    """Stands in for gymnasium-robotics' ``mujoco_utils`` module inside one env.

    ``robot_get_obs`` returns what the module's does, from addresses of the robot's joints (those whose
    name starts with ``robot``) found once for the env's model. Called with another model or other joint
    names it calls the module's. Every other attribute is the module's.

    :param module: gymnasium-robotics' ``mujoco_utils`` module
    :param model: the env's ``MjModel``
    :param joint_names: the env's joint names (``env.unwrapped._model_names.joint_names``)
    :raises ValueError: when a robot joint is missing or is not a hinge or slide (one value each): then
        the module's function is the one to use
    """

    def __init__(self, module: ModuleType, model: Any, joint_names: Sequence[str]) -> None:
        import mujoco

        self._module = module
        self._model = model
        self._joint_names = joint_names
        self._joint_tuple = tuple(joint_names)
        one_value = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
        positions, velocities = [], []
        for name in self._joint_tuple:
            if not name.startswith("robot"):
                continue
            joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if joint == -1 or model.jnt_type[joint] not in one_value:
                raise ValueError(f"robot joint {name!r} is not a hinge or slide of the model")
            positions.append(int(model.jnt_qposadr[joint]))
            velocities.append(int(model.jnt_dofadr[joint]))
        if not positions:
            raise ValueError("the model has no robot joints")
        self._positions = np.array(positions, dtype=np.intp)
        self._velocities = np.array(velocities, dtype=np.intp)

    def robot_get_obs(
        self, model: Any, data: Any, joint_names: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The robot's joint positions and velocities, as ``mujoco_utils.robot_get_obs`` returns them."""
        if model is not self._model or data.qpos is None or not self._same_names(joint_names):
            return self._module.robot_get_obs(model, data, joint_names)
        # The module stacks one (1,)-array per joint, then squeezes: the same shapes here.
        return (
            np.squeeze(data.qpos[self._positions].reshape(-1, 1)),
            np.squeeze(data.qvel[self._velocities].reshape(-1, 1)),
        )

    def _same_names(self, joint_names: Sequence[str]) -> bool:
        return joint_names is self._joint_names or tuple(joint_names) == self._joint_tuple

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy and pickle ask before __init__ has run: never recurse
            raise AttributeError(name)
        return getattr(self._module, name)


def speed_up_robot_observations(env: Any) -> bool:
    """Give a gymnasium-robotics MuJoCo robot env a :class:`RobotJointReader`, if it is one it covers.

    The reader is checked against the module's function on the env's current state before it is given.

    :param env: an env, wrapped or not
    :return: whether the env now reads its joints through the reader
    """
    unwrapped = getattr(env, "unwrapped", env)
    utils: Any = getattr(unwrapped, "_utils", None)
    if isinstance(utils, RobotJointReader):
        return True
    # Never imported here: an env of gymnasium-robotics has imported it, or the env is none of its.
    module = sys.modules.get(MUJOCO_UTILS)
    if module is None or utils is not module:
        return False
    utils = cast(ModuleType, module)
    model, data = getattr(unwrapped, "model", None), getattr(unwrapped, "data", None)
    joint_names = getattr(getattr(unwrapped, "_model_names", None), "joint_names", None)
    if model is None or data is None or not joint_names:
        return False
    try:
        reader = RobotJointReader(utils, model, joint_names)
    except ValueError:
        return False
    expected = utils.robot_get_obs(model, data, joint_names)
    got = reader.robot_get_obs(model, data, joint_names)
    if not all(_identical(a, b) for a, b in zip(expected, got, strict=True)):
        return False
    unwrapped._utils = reader
    return True


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
