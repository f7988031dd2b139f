"""DDPG's and TD3's policy with LayerNorm in the actor and the critics (mrl's manipulation networks).

Every hidden ``Linear`` layer of the actor and of each critic is followed by an ``nn.LayerNorm`` over its
units, then the activation: ``Linear -> LayerNorm -> ReLU`` per hidden layer, the output layer as SB3 makes
it (the actor's ``Linear -> Tanh``, each critic's ``Linear``). Nothing else differs from SB3's
``TD3Policy``: the same extractors, optimizers, target networks and saved form.

Two ways to ask for it:

- ``HER("MultiInputPolicy", env, "ddpg", policy_kwargs=dict(layer_norm=True))`` (or ``"MlpPolicy"``; in a
  config, ``policy_kwargs: {layer_norm: true}``): :func:`resolve_layer_norm_policy` swaps in the matching
  class below. SBX's learners take ``layer_norm`` in their own ``policy_kwargs``, unchanged;
- the classes themselves, for any SB3 DDPG or TD3: ``DDPG(LayerNormMultiInputPolicy, env)``.
"""

from __future__ import annotations

from typing import Any

from stable_baselines3.common.preprocessing import get_action_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, CombinedExtractor, create_mlp
from stable_baselines3.td3.policies import Actor, ContinuousCritic, TD3Policy
from torch import nn

#: The key of ``policy_kwargs`` that asks for LayerNorm.
LAYER_NORM_KEY = "layer_norm"


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
    """``TD3Policy`` (DDPG's and TD3's ``MlpPolicy``) with LayerNorm in the actor and the critics.

    :param layer_norm: put LayerNorm after every hidden layer (``False``: exactly SB3's networks)
    :param args: and ``kwargs``: those of SB3's ``TD3Policy``
    """

    def __init__(self, *args: Any, layer_norm: bool = True, **kwargs: Any) -> None:
        # Read by make_actor / make_critic, which TD3Policy.__init__ calls.
        self.layer_norm = bool(layer_norm)
        super().__init__(*args, **kwargs)

    def make_actor(self, features_extractor: BaseFeaturesExtractor | None = None) -> Actor:
        if not self.layer_norm:
            return super().make_actor(features_extractor)
        actor_kwargs = self._update_features_extractor(self.actor_kwargs, features_extractor)
        return LayerNormActor(**actor_kwargs).to(self.device)

    def make_critic(self, features_extractor: BaseFeaturesExtractor | None = None) -> ContinuousCritic:
        if not self.layer_norm:
            return super().make_critic(features_extractor)
        critic_kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
        return LayerNormContinuousCritic(**critic_kwargs).to(self.device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data[LAYER_NORM_KEY] = self.layer_norm
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
    """The policy a learner is built with when its ``policy_kwargs`` ask for ``layer_norm``.

    :param policy: HER's ``policy`` argument (an SB3 policy name or class)
    :param learner: the learner class HER builds (SB3's, or her_wrap's subclass of it)
    :param policy_kwargs: the learner's ``policy_kwargs`` (None, or a dict, read only)
    :return: ``policy`` itself when there is no ``layer_norm`` key, or the learner takes it natively (SBX);
        for SB3's DDPG and TD3 with a policy name, the matching LayerNorm class
    :raises ValueError: ``layer_norm`` on an SB3 learner other than DDPG and TD3, or with a policy class
        that does not take it
    """
    if not isinstance(policy_kwargs, dict) or LAYER_NORM_KEY not in policy_kwargs:
        return policy
    from stable_baselines3 import TD3

    from her_wrap.sb3.jax_learners import is_jax_learner

    if is_jax_learner(learner):
        return policy  # SBX's policies take layer_norm themselves

    if not issubclass(learner, TD3):  # DDPG is a TD3
        raise ValueError(
            f"policy_kwargs {LAYER_NORM_KEY}= applies to DDPG and TD3 (and to SBX's learners); "
            f"{learner.__name__} takes no {LAYER_NORM_KEY}: remove it, or use sbx.SAC / sbx.TQC, whose "
            f"policies take {LAYER_NORM_KEY}."
        )
    if isinstance(policy, type):
        if issubclass(policy, LayerNormPolicy):
            return policy
        raise ValueError(
            f"policy_kwargs {LAYER_NORM_KEY}= needs her_wrap's LayerNorm policy; {policy.__name__} does not "
            "take it: pass the policy as 'MlpPolicy' or 'MultiInputPolicy', or the class "
            "her_wrap.sb3.policies.LayerNormPolicy / LayerNormMultiInputPolicy."
        )
    if policy not in _LAYER_NORM_CLASSES:
        raise ValueError(
            f"policy_kwargs {LAYER_NORM_KEY}= applies to {' and '.join(_LAYER_NORM_CLASSES)}; "
            f"{policy!r} has no LayerNorm form."
        )
    return _LAYER_NORM_CLASSES[policy]


__all__ = [
    "LayerNormActor",
    "LayerNormContinuousCritic",
    "LayerNormMultiInputPolicy",
    "LayerNormPolicy",
    "layer_norm_network",
    "resolve_layer_norm_policy",
]
