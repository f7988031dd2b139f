"""A :class:`RunConfig` and an env to a :class:`her_wrap.HER` agent.

Config values are plain data; this module turns the few that stand for Python objects into them:

- ``policy_kwargs.activation_fn``: ``relu``, ``ReLU``, ``nn.ReLU``, ``th.nn.ReLU`` ... (ReLU, Tanh, ELU,
  LeakyReLU, GELU, SiLU, Sigmoid), and ``policy_kwargs.optimizer_class``: ``Adam``, ``th.optim.AdamW``, ...
  (Adam, AdamW, SGD, RMSprop), each from that fixed list: torch classes for the PyTorch learners, and
  for SBX's JAX learners the same functions of ``flax.linen`` (``nn.relu``, ...) and ``optax``
  (``optax.adam``, ...);
- ``learning_rate: lin_7.3e-4`` (the zoo's form): a rate decayed linearly from 7.3e-4 to 0 over training;
- ``train_freq: [1, episode]``: the tuple stable-baselines3 expects;
- ``noise_type``/``noise_std``: the learner's ``action_noise``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from her_wrap.runs.errors import UsageError
from her_wrap.runs.run_config import RunConfig
from her_wrap.sb3.learners import DISCRETE_ACTION_LEARNERS, LEARNERS

if TYPE_CHECKING:
    from her_wrap.sb3.her import HER

#: Activation names a config may give: torch's class name -> the ``flax.linen`` function of SBX's learners.
_ACTIVATIONS = {
    "ReLU": "relu",
    "Tanh": "tanh",
    "ELU": "elu",
    "LeakyReLU": "leaky_relu",
    "GELU": "gelu",
    "SiLU": "silu",
    "Sigmoid": "sigmoid",
}
#: Optimizer names a config may give: torch's class name -> the ``optax`` function of SBX's learners.
_OPTIMIZERS = {"Adam": "adam", "AdamW": "adamw", "SGD": "sgd", "RMSprop": "rmsprop"}
_LINEAR_PREFIX = "lin_"


def _named_object(value: Any, module: Any, allowed: dict[str, str], key: str, jax: bool) -> Any:
    """The torch class (``jax=False``) or JAX function (``jax=True``) of ``module`` a config's name means."""
    if not isinstance(value, str):
        return value
    name = value.rsplit(".", 1)[-1]
    by_lower_name = {choice.lower(): choice for choice in allowed}
    canonical = by_lower_name.get(name.lower().replace("_", ""))
    if canonical is None:
        raise UsageError(f"policy_kwargs.{key} {value!r} is not one of {', '.join(allowed)}")
    return getattr(module, allowed[canonical] if jax else canonical)


def resolve_policy_kwargs(policy_kwargs: dict[str, Any], *, jax: bool = False) -> dict[str, Any]:
    """``policy_kwargs`` with activation and optimizer names replaced by the objects they stand for.

    :param policy_kwargs: a config's ``policy_kwargs``; not changed
    :param jax: make ``flax.linen`` activations and ``optax`` optimizers (SBX's learners) instead of torch
        classes
    :return: a new dict
    """
    activations: Any
    optimizers: Any
    if jax:
        import flax.linen
        import optax

        activations, optimizers = flax.linen, optax
    else:
        import torch

        activations, optimizers = torch.nn, torch.optim
    resolved = copy.deepcopy(policy_kwargs)
    if "activation_fn" in resolved:
        resolved["activation_fn"] = _named_object(
            resolved["activation_fn"], activations, _ACTIVATIONS, "activation_fn", jax
        )
    if "optimizer_class" in resolved:
        resolved["optimizer_class"] = _named_object(
            resolved["optimizer_class"], optimizers, _OPTIMIZERS, "optimizer_class", jax
        )
    return resolved


def resolve_learning_rate(value: Any) -> Any:
    """A number, or the zoo's ``"lin_<rate>"``: a rate decayed linearly from ``<rate>`` to 0."""
    if isinstance(value, str) and value.startswith(_LINEAR_PREFIX):
        from stable_baselines3.common.utils import LinearSchedule

        try:
            initial = float(value[len(_LINEAR_PREFIX) :])
        except ValueError:
            raise UsageError(f"learning_rate {value!r}: expected lin_<number>, e.g. lin_7.3e-4") from None
        return LinearSchedule(initial, 0.0, 1.0)
    return value


def make_action_noise(noise_type: str, noise_std: float, action_space: Any) -> Any:
    """Gaussian or Ornstein-Uhlenbeck exploration noise of std ``noise_std`` on every action dimension."""
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    n_actions = int(np.prod(action_space.shape))
    mean, sigma = np.zeros(n_actions), noise_std * np.ones(n_actions)
    if noise_type == "normal":
        return NormalActionNoise(mean=mean, sigma=sigma)
    return OrnsteinUhlenbeckActionNoise(mean=mean, sigma=sigma)


def learner_kwargs(config: RunConfig, action_space: Any) -> dict[str, Any]:
    """The learner's constructor arguments from a config, with the objects of the module docstring made."""
    kwargs = copy.deepcopy(config.learner_kwargs)
    if "policy_kwargs" in kwargs:
        jax = LEARNERS[config.model_class].module == "sbx"
        kwargs["policy_kwargs"] = resolve_policy_kwargs(kwargs["policy_kwargs"] or {}, jax=jax)
    if "learning_rate" in kwargs:
        kwargs["learning_rate"] = resolve_learning_rate(kwargs["learning_rate"])
    if isinstance(kwargs.get("train_freq"), list):
        kwargs["train_freq"] = tuple(kwargs["train_freq"])
    if config.noise_type is not None and config.noise_std is not None:
        kwargs["action_noise"] = make_action_noise(config.noise_type, config.noise_std, action_space)
    return kwargs


def check_learner_fits_env(config: RunConfig, action_space: Any) -> None:
    """Raise a one-line error when the learner cannot act in the env's action space (DQN on a Box, ...)."""
    from gymnasium import spaces

    discrete = isinstance(action_space, spaces.Discrete)
    if config.model_class in DISCRETE_ACTION_LEARNERS and not discrete:
        raise UsageError(
            f"{config.env_id} has {type(action_space).__name__} actions; {config.model_class} needs Discrete "
            "actions: use sac, td3, ddpg or tqc"
        )
    if config.model_class not in DISCRETE_ACTION_LEARNERS and not isinstance(action_space, spaces.Box):
        raise UsageError(
            f"{config.env_id} has {type(action_space).__name__} actions; {config.model_class} needs Box "
            "actions: use dqn or qrdqn"
        )


def build_agent(
    config: RunConfig,
    env: Any,
    *,
    seed: int | None,
    verbose: int = 1,
    device: str = "auto",
    tensorboard_log: str | None = None,
) -> HER:
    """Create a fresh HER agent for a config.

    :param config: the validated config entry
    :param env: the vectorized goal env to learn on (raw observations: HER normalizes when configured)
    :param seed: seed of the learner (and of HER's sampler)
    :param verbose: learner verbosity (0 quiet, 1 training logs)
    :param device: torch device (``auto``, ``cpu``, ``cuda``)
    :param tensorboard_log: folder for TensorBoard logs, or ``None``
    :raises UsageError: when HER or the learner rejects a setting (its message, on one line)
    """
    from her_wrap import HER

    check_learner_fits_env(config, env.action_space)
    kwargs = learner_kwargs(config, env.action_space)
    try:
        return HER(
            config.policy,
            env,
            config.model_class,
            **config.hindsight.as_kwargs(),
            # store_infos and the update options: HER's own keyword arguments, as the config gives them.
            **config.her_options,
            normalize=config.normalize,
            seed=seed,
            verbose=verbose,
            device=device,
            tensorboard_log=tensorboard_log,
            **kwargs,
        )
    except (TypeError, ValueError) as error:
        message = " ".join(str(error).split())
        raise UsageError(f"{config.env_id}: cannot create HER({config.model_class}): {message}") from None
