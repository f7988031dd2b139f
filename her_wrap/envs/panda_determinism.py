"""Reproducible runs on panda-gym's envs: the same seed gives the same episodes and the same physics.

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

:func:`~her_wrap.envs.make_goal_env` calls it on every env it makes; call it on a panda-gym env made by
``gymnasium.make`` to get the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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


__all__ = ["is_panda_env", "make_panda_deterministic"]
