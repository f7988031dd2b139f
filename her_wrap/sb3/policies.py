"""DDPG's and TD3's policy with LayerNorm in the actor and the critics (mrl's manipulation networks), and
a running average of the actor for greedy actions.

Every hidden ``Linear`` layer of the actor and of each critic is followed by an ``nn.LayerNorm`` over its
units, then the activation: ``Linear -> LayerNorm -> ReLU`` per hidden layer, the output layer as SB3 makes
it (the actor's ``Linear -> Tanh``, each critic's ``Linear``). Nothing else differs from SB3's
``TD3Policy``: the same extractors, optimizers, target networks and saved form.

Two ways to ask for it:

- ``HER("MultiInputPolicy", env, "ddpg", policy_kwargs=dict(layer_norm=True))`` (or ``"MlpPolicy"``; in a
  config, ``policy_kwargs: {layer_norm: true}``): :func:`resolve_layer_norm_policy` swaps in the matching
  class below. SBX's learners take ``layer_norm`` in their own ``policy_kwargs``, unchanged;
- the classes themselves, for any SB3 DDPG or TD3: ``DDPG(LayerNormMultiInputPolicy, env)``.

``policy_kwargs=dict(actor_average=RATE)`` (with or without LayerNorm) keeps a running average of the
actor's weights, moved by ``RATE`` after every step of the actor's optimizer (a Polyak average, as the
target networks are, but slower and separate from them): ``average = (1 - RATE) * average + RATE * actor``.
Greedy actions (``predict(..., deterministic=True)``: evaluations, ``her-wrap enjoy``) come from the
average; exploration and the learner's updates use the actor itself. A DDPG actor's greedy success
swings from one evaluation to the next as its weights move; the average smooths those swings out. The
average is saved and loaded with the policy, and every worker of a multi-worker run keeps the same one.
At ``RATE`` equal to the learner's ``tau`` it is the target actor, weight for weight (the target moves by
``tau`` after each step of the actor too), so greedy actions then come from the target actor.

``policy_kwargs=dict(hidden_dtype="bfloat16")`` (with or without LayerNorm) runs the hidden layers of the
actor and the critics under ``torch.autocast`` in bfloat16: their matrix products (forward and backward)
take bfloat16 inputs and their activations are stored in bfloat16, while the output layer, the weights,
the gradients and Adam stay in float32. On a CPU with bfloat16 dot products (``avx512_bf16`` or AMX in
``/proc/cpuinfo``) a 256-wide matrix product runs about twice as fast, and an update less so, since its
other parts stay in float32 (the manipulation entries' updates in each dtype: ``docs/bench_updates.md``);
on a CPU without them bfloat16 is emulated and many times slower (about 19x on a 256-wide product of an
AVX2 CPU). ``hidden_dtype="auto"`` takes bfloat16 where the CPU has those products and float32 where it
has not, so one setting runs fast on either; the weights are float32 either way, so an agent saved on
one host loads and plays on the other. The rounding (8 bits of mantissa) changes every
run's numbers, so a recipe measured in float32 is a new recipe in bfloat16, to be measured again.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch as th
from stable_baselines3.common.preprocessing import get_action_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, CombinedExtractor, create_mlp
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from stable_baselines3.common.utils import polyak_update
from stable_baselines3.td3.policies import Actor, ContinuousCritic, TD3Policy
from torch import nn

from her_wrap.core.settings import is_real

#: The key of ``policy_kwargs`` that asks for LayerNorm.
LAYER_NORM_KEY = "layer_norm"

#: The key of ``policy_kwargs`` that asks for a running average of the actor for greedy actions.
ACTOR_AVERAGE_KEY = "actor_average"

#: The key of ``policy_kwargs`` that sets the dtype of the hidden layers' matrix products.
HIDDEN_DTYPE_KEY = "hidden_dtype"

#: The ``hidden_dtype`` that takes bfloat16 on a CPU with bfloat16 dot products and float32 elsewhere.
AUTO_DTYPE = "auto"

#: ``hidden_dtype`` values -> the autocast dtype (``None``: no autocast); ``auto`` is resolved by the CPU
#: (:func:`resolved_autocast_dtype`).
HIDDEN_DTYPES: dict[str, th.dtype | None] = {"float32": None, "bfloat16": th.bfloat16, AUTO_DTYPE: None}

#: The keys of ``policy_kwargs`` that make a DDPG / TD3 learner take :class:`LayerNormPolicy`.
POLICY_KEYS = (LAYER_NORM_KEY, ACTOR_AVERAGE_KEY, HIDDEN_DTYPE_KEY)

#: The keys that, without ``layer_norm``, keep SB3's networks (:func:`with_policy_defaults`).
_NETWORK_KEEPING_KEYS = (ACTOR_AVERAGE_KEY, HIDDEN_DTYPE_KEY)


def checked_actor_average(rate: Any) -> float:
    """``rate`` as a float, when it is a valid ``actor_average`` (0 turns the average off).

    :raises ValueError: for anything but a number in [0, 1)
    """
    if not is_real(rate) or not 0 <= rate < 1:
        raise ValueError(
            f"policy_kwargs {ACTOR_AVERAGE_KEY}= must be a number in [0, 1): the weight of the actor in "
            f"the average after each of its steps (e.g. 0.0002), or 0 for none; got {rate!r}."
        )
    return float(rate)


def checked_hidden_dtype(name: Any) -> str:
    """``name`` when it is a valid ``hidden_dtype``.

    :raises ValueError: for anything but one of :data:`HIDDEN_DTYPES`
    """
    if not isinstance(name, str) or name not in HIDDEN_DTYPES:
        raise ValueError(
            f"policy_kwargs {HIDDEN_DTYPE_KEY}= must be one of {', '.join(map(repr, HIDDEN_DTYPES))} (the "
            f"dtype of the hidden layers' matrix products); got {name!r}."
        )
    return name


def cpu_has_bfloat16_products() -> bool:
    """Whether this CPU has bfloat16 dot products that torch uses (``avx512_bf16`` or AMX); True when torch
    cannot tell, so that no warning is given on a guess."""
    try:
        return bool(th.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return True


def resolved_autocast_dtype(name: str) -> th.dtype | None:
    """The autocast dtype of a checked ``hidden_dtype``: ``auto`` is bfloat16 on a CPU with bfloat16 dot
    products (:func:`cpu_has_bfloat16_products`) and no autocast (float32) elsewhere."""
    if name == AUTO_DTYPE:
        return th.bfloat16 if cpu_has_bfloat16_products() else None
    return HIDDEN_DTYPES[name]


def warn_if_bfloat16_is_emulated(dtype: th.dtype | None, device: th.device) -> None:
    """Warn when bfloat16 hidden layers would run on a CPU that emulates bfloat16 (slower than float32)."""
    if dtype is th.bfloat16 and device.type == "cpu" and not cpu_has_bfloat16_products():
        warnings.warn(
            f"policy_kwargs {HIDDEN_DTYPE_KEY}='bfloat16' on a CPU without bfloat16 dot products (no "
            "avx512_bf16 or AMX in /proc/cpuinfo): torch emulates them, so updates run slower than in "
            f"float32. Set {HIDDEN_DTYPE_KEY} to 'auto' (bfloat16 only where the CPU has those products) or "
            f"'float32' (her-wrap: -params policy_kwargs.{HIDDEN_DTYPE_KEY}:auto); the run's numbers then "
            "change, as any change of dtype changes them.",
            UserWarning,
            stacklevel=3,
        )


#: Batches of fewer rows run a :class:`AutocastHiddenNetwork` in float32: for an env's action or two, the
#: casts to bfloat16 cost more than its products save (0.4 against 0.3 ms per action on FetchPush's actor).
AUTOCAST_MIN_ROWS = 64


class AutocastHiddenNetwork(nn.Sequential):
    """A ``Sequential`` whose layers before the last ``Linear`` run under ``torch.autocast(dtype)``; the
    output layer (and a ``Tanh`` after it) runs in float32 on the hidden features cast back to float32.
    Batches of fewer than :data:`AUTOCAST_MIN_ROWS` rows (exploration and greedy actions) run every layer
    in float32.

    The layers, and so the parameter names of a state dict, are those of the ``Sequential`` it replaces.
    """

    def __init__(self, network: nn.Module, dtype: th.dtype) -> None:
        if not isinstance(network, nn.Sequential):
            raise TypeError(f"AutocastHiddenNetwork wraps an nn.Sequential, got {type(network).__name__}")
        super().__init__(*network)
        linear = [index for index, layer in enumerate(self) if isinstance(layer, nn.Linear)]
        if not linear:
            raise ValueError("a network with a lower-precision hidden part needs a Linear output layer")
        self.output_start = linear[-1]
        self.autocast_dtype = dtype
        #: Batches of fewer rows run in float32 (read by the lean exploration forward too).
        self.float32_below = AUTOCAST_MIN_ROWS

    def forward(self, features: th.Tensor) -> th.Tensor:
        if features.shape[0] < self.float32_below:
            return super().forward(features)
        layers = list(self)
        with th.autocast(features.device.type, dtype=self.autocast_dtype):
            for layer in layers[: self.output_start]:
                features = layer(features)
        features = features.float()
        for layer in layers[self.output_start :]:
            features = layer(features)
        return features


def layer_norm_network(
    input_dim: int, output_dim: int, net_arch: list[int], activation_fn: type[nn.Module], squash: bool = False
) -> nn.Sequential:
    """``Linear -> LayerNorm -> activation`` per hidden layer, then the output ``Linear`` (and ``Tanh``)."""
    layers = create_mlp(
        input_dim,
        output_dim,
        net_arch,
        activation_fn,
        squash_output=squash,
        post_linear_modules=[nn.LayerNorm],
    )
    return nn.Sequential(*layers)


class LayerNormActor(Actor):
    """SB3's deterministic actor with LayerNorm after every hidden ``Linear`` layer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mu = layer_norm_network(
            self.features_dim,
            get_action_dim(self.action_space),
            self.net_arch,
            self.activation_fn,
            squash=True,
        )


class LayerNormContinuousCritic(ContinuousCritic):
    """SB3's Q-networks (``n_critics`` of them) with LayerNorm after every hidden ``Linear`` layer."""

    def __init__(
        self,
        *,
        net_arch: list[int],
        features_dim: int,
        activation_fn: type[nn.Module] = nn.ReLU,
        **kwargs: Any,
    ) -> None:
        super().__init__(net_arch=net_arch, features_dim=features_dim, activation_fn=activation_fn, **kwargs)
        input_dim = features_dim + get_action_dim(self.action_space)
        self.q_networks = []
        for index in range(self.n_critics):
            q_net = layer_norm_network(input_dim, 1, net_arch, activation_fn)
            self.add_module(f"qf{index}", q_net)  # replaces SB3's network of the same name
            self.q_networks.append(q_net)


class LayerNormPolicy(TD3Policy):
    """``TD3Policy`` (DDPG's and TD3's ``MlpPolicy``) with LayerNorm in the actor and the critics, and
    optionally a running average of the actor for greedy actions (see the module's note).

    :param layer_norm: put LayerNorm after every hidden layer (``False``: exactly SB3's networks)
    :param actor_average: weight of the actor in :attr:`actor_average` after each step of the actor's
        optimizer; 0 (the default) keeps no average, and greedy actions come from the actor
    :param hidden_dtype: ``"float32"`` (the default), ``"bfloat16"`` or ``"auto"`` (bfloat16 on a CPU
        with bfloat16 dot products, float32 elsewhere): the dtype of the hidden layers' matrix products in
        the actor and the critics (see the module's note)
    :param args: and ``kwargs``: those of SB3's ``TD3Policy``
    :raises ValueError: for an ``actor_average`` outside [0, 1) or an unknown ``hidden_dtype``
    """

    def __init__(
        self,
        *args: Any,
        layer_norm: bool = True,
        actor_average: float = 0.0,
        hidden_dtype: str = "float32",
        **kwargs: Any,
    ) -> None:
        # Read by make_actor / make_critic and _build, which TD3Policy.__init__ calls.
        self.layer_norm = bool(layer_norm)
        self.actor_average_rate = checked_actor_average(actor_average)
        self.hidden_dtype = checked_hidden_dtype(hidden_dtype)
        self._autocast_dtype = resolved_autocast_dtype(self.hidden_dtype)
        self.actor_average: Actor | None = None
        super().__init__(*args, **kwargs)
        warn_if_bfloat16_is_emulated(self._autocast_dtype, self.device)  # never under auto

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)
        if self.actor_average_rate > 0:
            # Its own features extractor, as the target actor has: the average reads none of the actor's.
            self.actor_average = self.make_actor(features_extractor=None)
            self.actor_average.load_state_dict(self.actor.state_dict())
            self.actor_average.set_training_mode(False)
            self.actor_average.requires_grad_(False)
            self.actor.optimizer.register_step_post_hook(self._move_actor_average)

    def _move_actor_average(self, *_: Any) -> None:
        """After each step of the actor's optimizer: move the average toward the actor."""
        assert self.actor_average is not None
        polyak_update(self.actor.parameters(), self.actor_average.parameters(), self.actor_average_rate)
        polyak_update(self.actor.buffers(), self.actor_average.buffers(), 1.0)  # running statistics, if any

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> th.Tensor:
        if deterministic and self.actor_average is not None:
            return self.actor_average(observation)
        return self.actor(observation)

    def make_actor(self, features_extractor: BaseFeaturesExtractor | None = None) -> Actor:
        if not self.layer_norm:
            actor = super().make_actor(features_extractor)
        else:
            actor_kwargs = self._update_features_extractor(self.actor_kwargs, features_extractor)
            actor = LayerNormActor(**actor_kwargs).to(self.device)
        if self._autocast_dtype is not None:
            actor.mu = AutocastHiddenNetwork(actor.mu, self._autocast_dtype)
        return actor

    def make_critic(self, features_extractor: BaseFeaturesExtractor | None = None) -> ContinuousCritic:
        if not self.layer_norm:
            critic = super().make_critic(features_extractor)
        else:
            critic_kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
            critic = LayerNormContinuousCritic(**critic_kwargs).to(self.device)
        if self._autocast_dtype is not None:
            critic.q_networks = [
                AutocastHiddenNetwork(q_net, self._autocast_dtype) for q_net in critic.q_networks
            ]
            for index, q_net in enumerate(critic.q_networks):
                critic.add_module(f"qf{index}", q_net)  # replaces the float32 network of the same name
        return critic

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data[LAYER_NORM_KEY] = self.layer_norm
        data[ACTOR_AVERAGE_KEY] = self.actor_average_rate
        data[HIDDEN_DTYPE_KEY] = self.hidden_dtype
        return data


class LayerNormMultiInputPolicy(LayerNormPolicy):
    """:class:`LayerNormPolicy` for ``Dict`` observations (DDPG's and TD3's ``MultiInputPolicy``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("features_extractor_class", CombinedExtractor)
        super().__init__(*args, **kwargs)


#: SB3's policy names -> the LayerNorm class of the same observations.
_LAYER_NORM_CLASSES: dict[str, type[LayerNormPolicy]] = {
    "MlpPolicy": LayerNormPolicy,
    "MultiInputPolicy": LayerNormMultiInputPolicy,
}


def resolve_layer_norm_policy(policy: str | type, learner: type, policy_kwargs: Any) -> str | type:
    """The policy a learner is built with when its ``policy_kwargs`` ask for ``layer_norm`` or
    ``actor_average``.

    :param policy: HER's ``policy`` argument (an SB3 policy name or class)
    :param learner: the learner class HER builds (SB3's, or her_wrap's subclass of it)
    :param policy_kwargs: the learner's ``policy_kwargs`` (None, or a dict, read only). With
        ``actor_average`` and no ``layer_norm``, pass ``layer_norm=False`` too for SB3's networks
        (:func:`with_policy_defaults`)
    :return: ``policy`` itself when there is neither key, or the learner takes ``layer_norm`` natively
        (SBX); for SB3's DDPG and TD3 with a policy name, the matching :class:`LayerNormPolicy` class
    :raises ValueError: either key on an SB3 learner other than DDPG and TD3, ``actor_average`` on an SBX
        learner, or either key with a policy class that does not take it
    """
    if not isinstance(policy_kwargs, dict):
        return policy
    keys = [key for key in POLICY_KEYS if key in policy_kwargs]
    if not keys:
        return policy
    from stable_baselines3 import TD3

    from her_wrap.sb3.jax_learners import is_jax_learner

    if is_jax_learner(learner):
        for torch_only in _NETWORK_KEEPING_KEYS:
            if torch_only in keys:
                raise ValueError(
                    f"policy_kwargs {torch_only}= applies to SB3's DDPG and TD3; {learner.__name__} (SBX) "
                    f"takes no {torch_only}: remove it, or train torch's ddpg / td3."
                )
        return policy  # SBX's policies take layer_norm themselves

    # The other keys first: with them alone, HER adds layer_norm=False (with_policy_defaults).
    key = next((key for key in _NETWORK_KEEPING_KEYS if key in keys), LAYER_NORM_KEY)
    if not issubclass(learner, TD3):  # DDPG is a TD3
        if key == LAYER_NORM_KEY:
            applies, fix = (
                "DDPG and TD3 (and to SBX's learners)",
                "or use sbx.SAC / sbx.TQC, whose policies take it",
            )
        else:
            applies, fix = "DDPG and TD3", "or train ddpg / td3"
        raise ValueError(
            f"policy_kwargs {key}= applies to {applies}; {learner.__name__} takes no {key}: remove it, {fix}."
        )
    if isinstance(policy, type):
        if issubclass(policy, LayerNormPolicy):
            return policy
        raise ValueError(
            f"policy_kwargs {key}= needs her_wrap's LayerNorm policy; {policy.__name__} does not "
            "take it: pass the policy as 'MlpPolicy' or 'MultiInputPolicy', or the class "
            "her_wrap.sb3.policies.LayerNormPolicy / LayerNormMultiInputPolicy."
        )
    if policy not in _LAYER_NORM_CLASSES:
        raise ValueError(
            f"policy_kwargs {key}= applies to {' and '.join(_LAYER_NORM_CLASSES)}; "
            f"{policy!r} has no LayerNorm form."
        )
    return _LAYER_NORM_CLASSES[policy]


def with_policy_defaults(policy_kwargs: Any) -> Any:
    """``policy_kwargs`` with ``layer_norm=False`` added when it asks for ``actor_average`` or
    ``hidden_dtype`` without ``layer_norm``.

    :class:`LayerNormPolicy` puts LayerNorm in by default (its name says so); a learner that asks only for
    the average or a hidden dtype keeps SB3's networks. Anything else comes back as it is; a dict is
    copied, not changed.
    """
    if isinstance(policy_kwargs, dict) and any(key in policy_kwargs for key in _NETWORK_KEEPING_KEYS):
        return {LAYER_NORM_KEY: False, **policy_kwargs}
    return policy_kwargs


def greedy_actor(policy: TD3Policy) -> Actor:
    """The actor a DDPG / TD3 policy's greedy actions come from: its :attr:`~LayerNormPolicy.actor_average`
    when it keeps one, else its actor (SB3's policies, and ours without an average).

    Loading other weights into it (e.g. the target actor's) changes what ``predict(...,
    deterministic=True)`` plays and nothing of exploration or the learner's updates, unless it is the actor.
    """
    average = getattr(policy, "actor_average", None)
    return policy.actor if average is None else average


__all__ = [
    "ACTOR_AVERAGE_KEY",
    "HIDDEN_DTYPE_KEY",
    "AutocastHiddenNetwork",
    "LayerNormActor",
    "LayerNormContinuousCritic",
    "LayerNormMultiInputPolicy",
    "LayerNormPolicy",
    "greedy_actor",
    "layer_norm_network",
    "resolve_layer_norm_policy",
    "with_policy_defaults",
]
