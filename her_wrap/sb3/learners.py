"""The learners HER wraps: one table of names, classes and action kinds for every layer.

Importing this module imports neither torch nor stable-baselines3: the classes are imported when asked
for, so the ``her-wrap`` command validates configs without paying for torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm


@dataclass(frozen=True)
class Learner:
    """An off-policy learner HER can wrap.

    :param name: its lower-case name, as configs write it (``model_class: sac``)
    :param module: the module that defines it
    :param class_name: its class name there
    :param discrete_actions: it acts in ``Discrete`` action spaces (else in ``Box`` ones)
    :param extra: the her_wrap extra that installs its package (``jax``), or None for a required one
    """

    name: str
    module: str
    class_name: str
    discrete_actions: bool
    extra: str | None = None

    @property
    def label(self) -> str:
        """How messages name it: the class name, prefixed by its package for an optional framework."""
        return self.class_name if self.extra is None else f"{self.module}.{self.class_name}"

    def load(self) -> type[OffPolicyAlgorithm]:
        """The learner class.

        :raises ValueError: when its package is not installed, naming the install command
        """
        try:
            module = importlib.import_module(self.module)
        except ImportError as error:
            install = self.module.replace("_", "-") if self.extra is None else f"'her_wrap[{self.extra}]'"
            raise ValueError(
                f"model_class {self.label} needs {self.module}: pip install {install}."
            ) from error
        return getattr(module, self.class_name)


#: name -> learner; the order is the one error messages list.
LEARNERS: dict[str, Learner] = {
    learner.name: learner
    for learner in (
        Learner("dqn", "stable_baselines3", "DQN", discrete_actions=True),
        Learner("qrdqn", "sb3_contrib", "QRDQN", discrete_actions=True),
        Learner("sac", "stable_baselines3", "SAC", discrete_actions=False),
        Learner("td3", "stable_baselines3", "TD3", discrete_actions=False),
        Learner("ddpg", "stable_baselines3", "DDPG", discrete_actions=False),
        Learner("tqc", "sb3_contrib", "TQC", discrete_actions=False),
        # SBX: the JAX learners with stable-baselines3's API (the jax extra); DroQ is its SAC with dropout.
        Learner("sbx.dqn", "sbx", "DQN", discrete_actions=True, extra="jax"),
        Learner("sbx.sac", "sbx", "SAC", discrete_actions=False, extra="jax"),
        Learner("sbx.td3", "sbx", "TD3", discrete_actions=False, extra="jax"),
        Learner("sbx.ddpg", "sbx", "DDPG", discrete_actions=False, extra="jax"),
        Learner("sbx.tqc", "sbx", "TQC", discrete_actions=False, extra="jax"),
        Learner("sbx.crossq", "sbx", "CrossQ", discrete_actions=False, extra="jax"),
    )
}

#: Learners that SBX names but builds as a configuration of another one: name -> how HER builds it.
#: (``sbx.DroQ`` is a function that raises, since SBX 0.16, not a learner class.)
LEARNER_CONFIGURATIONS: dict[str, str] = {
    "sbx.droq": (
        "sbx.SAC with policy_kwargs=dict(dropout_rate=0.01, layer_norm=True) (DroQ's dropout and "
        "layer-normalized critics; its paper's 20 critic updates per env step are gradient_steps=20, "
        "policy_delay=20)"
    ),
}

#: Names of the learners for discrete actions; the others act in continuous action spaces.
DISCRETE_ACTION_LEARNERS = frozenset(name for name, learner in LEARNERS.items() if learner.discrete_actions)


def canonical_learner_name(name: object) -> str:
    """Validate a learner name and return it in lower case.

    :param name: ``"sac"``, ``"SAC"``, ...
    :raises ValueError: for a learner built as another one's configuration (``"sbx.droq"``), naming that
        one; for any other name, listing the valid ones
    """
    key = str(name).strip().lower()
    if key in LEARNER_CONFIGURATIONS:
        raise ValueError(
            f"model_class {name!r} is no learner class of its own: use {LEARNER_CONFIGURATIONS[key]}."
        )
    if key not in LEARNERS:
        raise ValueError(f"unknown model_class {name!r}; use one of {', '.join(LEARNERS)}")
    return key


def learner_class(name: str) -> type[OffPolicyAlgorithm]:
    """The learner class for a name of :data:`LEARNERS` (any case)."""
    return LEARNERS[canonical_learner_name(name)].load()


def resolve_model_class(model_class: type | str) -> type[OffPolicyAlgorithm]:
    """The learner class for a class or a name (``"sac"``, ``"DQN"``...).

    :raises ValueError: for an unknown name, listing the known ones
    :raises TypeError: for an on-policy or non-SB3 class
    """
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

    if isinstance(model_class, str):
        if model_class.strip().lower() in LEARNER_CONFIGURATIONS:
            canonical_learner_name(model_class)  # raises, naming the learner to use
        try:
            name = canonical_learner_name(model_class)
        except ValueError as error:
            raise ValueError(f"{error} or a class.") from None
        model_class = LEARNERS[name].load()
    if not isinstance(model_class, type) or not issubclass(model_class, OffPolicyAlgorithm):
        name = getattr(model_class, "__name__", repr(model_class))
        package = str(getattr(model_class, "__module__", "")).partition(".")[0]
        configuration = LEARNER_CONFIGURATIONS.get(f"{package}.{name}".lower())
        if configuration is not None:
            raise TypeError(f"{package}.{name} is no learner class of its own: use {configuration}.")
        supported = ", ".join(learner.label for learner in LEARNERS.values())
        raise TypeError(
            f"HER needs an off-policy learner with a replay buffer ({supported}); "
            f"{name} is not one (on-policy learners such as PPO and A2C train on fresh rollouts only)."
        )
    return model_class


def check_keeps_replay_buffer(learner: OffPolicyAlgorithm, buffer: object) -> None:
    """Raise when a learner replaced the replay buffer HER gave it while setting itself up.

    A learner class that builds a buffer of its own in ``_setup_model`` would train without hindsight
    goals; this names it at construction rather than failing in ``learn``.

    :raises TypeError: naming the class and the supported learners
    """
    if learner.replay_buffer is not buffer:
        supported = ", ".join(entry.label for entry in LEARNERS.values())
        raise TypeError(
            f"{type(learner).__name__} builds a replay buffer of its own in _setup_model, so HER cannot give "
            f"it hindsight goals; HER supports {supported} (or subclasses of them)."
        )
