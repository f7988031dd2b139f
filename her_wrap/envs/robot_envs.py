"""Robot envs of gymnasium-robotics and panda-gym, mended in place: faster observations, reproducible episodes.

:func:`~her_wrap.envs.make_goal_env` applies both to every env it makes; ``gymnasium.make`` does not, so call
them on an env made that way to get the same. Each leaves any env it does not cover as it is.

**Faster observations of gymnasium-robotics' MuJoCo robot envs (Fetch, Hand), the same values bit for bit.**

Every step of a Fetch env reads the robot's joint positions and velocities through gymnasium-robotics'
``mujoco_utils.robot_get_obs``, which looks each joint up by name, twice, in Python: 30 lookups per step on
Fetch. Reading them by address made a FetchPush step 1.17x faster (``scripts/bench_env_phase.py``).
:class:`RobotJointReader` reads the same entries of ``data.qpos`` and ``data.qvel`` by addresses found once,
and :func:`speed_up_robot_observations` gives it to one env in place of the module (the env reaches every
MuJoCo helper through its ``_utils`` attribute; the reader hands every other helper on to the module).

An env it does not cover is one whose ``_utils`` is not gymnasium-robotics' ``mujoco_utils`` module
(panda-gym, the ``mujoco_py`` envs, any other package), or whose robot joints are not all hinges and slides.

**Reproducible runs on panda-gym's envs: the same seed gives the same episodes and the same physics.**

gymnasium's contract is that ``reset(seed=s)`` seeds an env and the resets that follow without a seed
continue that stream, so a seeded run meets the same goals and object positions every time, and a seeded
run of a deterministic learner repeats itself exactly. panda-gym 3.0.7 breaks it twice:

- **Resets.** ``RobotTaskEnv.reset`` reseeds the task from the operating system's entropy on every reset
  that gets no seed (``seeding.np_random(None)``), so only the first episode of a seeded run is
  reproducible. panda-gym's tracker has it as issue 94 (listed there as fixed for the Reach and Slide
  tasks and open for Push, PickAndPlace, Stack and Flip; the reset above is shared by every task of 3.0.7).
- **Contacts.** PyBullet orders the pairs of touching bodies as they come out of its pair cache unless
  ``deterministicOverlappingPairs`` is on, and that order can differ from one process to the next: an
  object put between the closing fingers (:class:`~her_wrap.envs.GraspStartWrapper`) came out in one of
  two states over eight runs of the same steps, differing by 1e-5 m on the first step and more after.

:func:`make_panda_deterministic` mends one env in place. After a reset with a seed ``s``, each reset
without one is given the next seed of a generator seeded with ``s``: episode ``n`` after ``reset(seed=s)``
is the same in every run, and different seeds give different episodes. An env that was never reset with
a seed stays as random as before; the episodes are drawn as panda-gym draws them. It also turns on
PyBullet's sorting of overlapping pairs (the same contacts, in one order; no measurable cost per step).
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


# --------------------------------------------------------------------------- panda-gym: reproducible episodes

#: Mixed into the seed of the generator of later resets' seeds, so they are not the task's own draws.
_SEED_STREAM = 0x5EED

#: Later resets' seeds are drawn below this bound (panda-gym takes any non-negative integer).
_SEED_BOUND = 2**32

_MENDED = "_her_wrap_deterministic"


def is_panda_env(env: Any) -> bool:
    """Whether ``env`` (or the env it wraps) is one of panda-gym's task envs."""
    unwrapped = getattr(env, "unwrapped", env)
    return type(unwrapped).__module__.startswith("panda_gym.") and hasattr(unwrapped, "task")


def make_panda_deterministic(env: Any) -> bool:
    """Make a panda-gym env's unseeded resets follow its last seeded reset, and its contacts ordered.

    The env's own ``reset`` is replaced on its unwrapped instance, so every wrapper around it (gymnasium's
    ``TimeLimit``, a monitor, :class:`~her_wrap.envs.GraspStartWrapper`) keeps working unchanged. Calling
    it again on the same env changes nothing.

    :param env: any gymnasium env, wrapped or not
    :return: whether the env is panda-gym's and is now deterministic; any other env is left as it is
    """
    if not is_panda_env(env):
        return False
    unwrapped = env.unwrapped
    if getattr(unwrapped, _MENDED, False):
        return True
    unwrapped.sim.physics_client.setPhysicsEngineParameter(deterministicOverlappingPairs=1)
    reset = unwrapped.reset  # the class's method, bound to this env
    seeds: list[np.random.Generator | None] = [None]  # the generator of later seeds, once seeded

    def seeded_reset(*, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed is not None:
            seeds[0] = np.random.default_rng([_SEED_STREAM, int(seed)])
        elif seeds[0] is not None:
            seed = int(seeds[0].integers(_SEED_BOUND))
        return reset(seed=seed, options=options)

    unwrapped.reset = seeded_reset
    setattr(unwrapped, _MENDED, True)
    return True
