"""The env registry: which gymnasium ids her_wrap can make, and goal envs made from them.

Three kinds of ids reach :func:`make_goal_env`:

- her_wrap's own (:data:`HER_WRAP_ENV_IDS`), registered when :mod:`her_wrap.envs` is imported;
- the ids of the optional packages of the ``robotics`` extra (:data:`OPTIONAL_ENV_PACKAGES`:
  gymnasium-robotics' ``Fetch...``, ``HandManipulate...`` and friends, panda-gym's ``Panda...``), whose
  package is imported only when an id with its prefix is asked for;
- any id gymnasium knows already, or ``"module:EnvName-v0"``, whose module is imported first (as
  ``gymnasium.make`` does).

Errors are :class:`ValueError` subclasses that name the fix: :class:`UnknownEnvError` (with the closest
registered ids) and :class:`MissingExtraError` (with the install command).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import io
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import gymnasium

from her_wrap.envs.checks import check_goal_space  # re-exported: its home is envs.checks
from her_wrap.envs.robot_envs import make_panda_deterministic, speed_up_robot_observations

#: her_wrap's own ids and the keyword arguments they fix. Neither sets ``max_episode_steps``: the env
#: truncates itself after ``max_steps`` steps, so ``gymnasium.make`` adds no second ``TimeLimit``.
HER_WRAP_ENV_IDS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "BitFlipping-v0": MappingProxyType({"continuous": False}),
        "BitFlippingContinuous-v0": MappingProxyType({"continuous": True}),
    }
)

_BIT_FLIPPING_ENTRY_POINT = "her_wrap.envs.bit_flipping:BitFlippingEnv"

#: The command that installs the optional env packages.
ROBOTICS_EXTRA_INSTALL = "pip install 'her_wrap[robotics]'"


@dataclass(frozen=True)
class OptionalEnvPackage:
    """A package of the ``robotics`` extra that registers gymnasium ids when imported.

    :param module: the name to import
    :param prefixes: an id starting with one of these needs the package
    """

    module: str
    prefixes: tuple[str, ...]

    def provides(self, env_id: str) -> bool:
        """Whether ``env_id`` (without a ``module:`` part) is one of this package's ids by its prefix."""
        return env_id.startswith(self.prefixes)


#: The optional packages, by the id prefixes they register.
OPTIONAL_ENV_PACKAGES: tuple[OptionalEnvPackage, ...] = (
    OptionalEnvPackage(
        "gymnasium_robotics",
        ("Fetch", "HandManipulate", "HandReach", "Adroit", "AntMaze", "PointMaze", "FrankaKitchen"),
    ),
    OptionalEnvPackage("panda_gym", ("Panda",)),
)


class EnvRegistryError(ValueError):
    """An env id that cannot be made; the message names the fix."""


class UnknownEnvError(EnvRegistryError):
    """No package knows the id.

    :param env_id: the id asked for
    :param close_matches: the registered ids closest to it, best first (possibly none)
    :param reason: what went wrong instead, when it is not a missing id (a module that cannot be imported)
    """

    def __init__(self, env_id: str, close_matches: list[str], reason: str | None = None) -> None:
        self.env_id = env_id
        self.close_matches = close_matches
        if reason is None:
            reason = (
                f"did you mean {', '.join(close_matches)}?" if close_matches else "no registered id is close"
            )
        super().__init__(f"unknown env id {env_id!r}; {reason}")


class MissingExtraError(EnvRegistryError):
    """The id belongs to an optional package that is not installed.

    :param env_id: the id asked for
    :param module: the missing package's import name
    """

    def __init__(self, env_id: str, module: str) -> None:
        self.env_id = env_id
        self.module = module
        super().__init__(
            f"{env_id} needs the robotics extra ({module} is not installed): {ROBOTICS_EXTRA_INSTALL}"
        )


def register_envs() -> None:
    """Register her_wrap's ids with gymnasium, skipping ids already registered (no override warning)."""
    for env_id, kwargs in HER_WRAP_ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=_BIT_FLIPPING_ENTRY_POINT, kwargs=dict(kwargs))


def ensure_registered(env_id: str) -> None:
    """Make ``env_id`` known to gymnasium, importing the package that registers it.

    :param env_id: a registered id, an id of an optional package, or ``"module:EnvName-v0"``
    :raises MissingExtraError: the id needs an optional package that is not installed
    :raises UnknownEnvError: no package knows the id (the message lists the closest registered ids)
    """
    register_envs()
    module_name, _, name = env_id.rpartition(":")
    if module_name:
        try:
            importlib.import_module(module_name)
        except ImportError as error:
            raise UnknownEnvError(
                env_id, [], f"its module {module_name!r} cannot be imported ({error})"
            ) from None
    if name in gymnasium.registry:
        return
    for package in OPTIONAL_ENV_PACKAGES:
        if package.provides(name):
            try:
                _import_quietly(package.module)
            except ImportError:
                raise MissingExtraError(env_id, package.module) from None
            if name in gymnasium.registry:
                return
    # Unknown: suggest among every id that could have been meant, the optional packages' included.
    for package in OPTIONAL_ENV_PACKAGES:
        with contextlib.suppress(ImportError):
            _import_quietly(package.module)
    raise UnknownEnvError(env_id, difflib.get_close_matches(name, list(gymnasium.registry), n=3, cutoff=0.6))


def make_goal_env(env_id: str, **env_kwargs: Any) -> gymnasium.Env:
    """``gymnasium.make(env_id, **env_kwargs)`` after :func:`ensure_registered`.

    It works in a fresh process, so ``functools.partial(make_goal_env, env_id, **env_kwargs)`` is an env
    factory for ``SubprocVecEnv`` (module level: it pickles). The env is not checked here; HER checks the
    env it is given (:func:`~her_wrap.envs.check_goal_env`).

    A gymnasium-robotics MuJoCo robot env (Fetch, Hand) reads its robot joints by addresses found once
    (:func:`~her_wrap.envs.robot_envs.speed_up_robot_observations`: the same observations, in
    less time). A panda-gym env's resets without a seed follow its last seeded reset, and its contacts are
    ordered (:func:`~her_wrap.envs.robot_envs.make_panda_deterministic`), so a seeded run repeats
    itself.

    :param env_id: see :func:`ensure_registered`
    :param env_kwargs: keyword arguments of the env (``n_bits=15``, ``render_mode=...``)
    :raises MissingExtraError: the id needs an optional package that is not installed
    :raises UnknownEnvError: no package knows the id
    """
    ensure_registered(env_id)
    env = gymnasium.make(env_id, **env_kwargs)
    speed_up_robot_observations(env)
    make_panda_deterministic(env)
    return env


def _import_quietly(module_name: str) -> None:
    # gymnasium_robotics prints a notice about unrelated (Adroit) envs on import: keep the console for
    # the caller's own output. Import errors still propagate.
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        module = importlib.import_module(module_name)
    gymnasium.register_envs(module)


__all__ = [
    "HER_WRAP_ENV_IDS",
    "OPTIONAL_ENV_PACKAGES",
    "ROBOTICS_EXTRA_INSTALL",
    "EnvRegistryError",
    "MissingExtraError",
    "OptionalEnvPackage",
    "UnknownEnvError",
    "check_goal_space",
    "ensure_registered",
    "make_goal_env",
    "register_envs",
]
