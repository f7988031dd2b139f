"""The critic / Q loss of one batch for each supported learner, and the |TD error| it implies.

Each ``*_critic`` function computes the TD target exactly as the learner's own ``train()`` of
stable-baselines3 / sb3-contrib 2.9 does (n-step ``discounts``, target clipping of
:class:`~her_wrap.sb3.update_options.UpdateOptions` aside), keeps one loss value per sample so that
importance weights can scale it (see :mod:`her_wrap.sb3._weighted_losses`), and returns the detached |TD|
of each sample. :mod:`her_wrap.sb3.train_steps` trains on them; :func:`td_abs` scores a batch with them
(LaBER's surrogate priorities).
"""

from __future__ import annotations

from typing import TypeAlias, TypeGuard

import numpy as np
import torch as th
import torch.nn.functional as F
from stable_baselines3 import DQN, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

from her_wrap.sb3._weighted_losses import (
    mean_abs_td,
    quantile_huber_loss_per_sample,
    quantile_mean_abs_td,
    twin_critic_loss,
    weighted_mean,
)
from her_wrap.sb3.samples import Samples
from her_wrap.sb3.update_options import UpdateOptions

# sb3-contrib is a declared dependency; the guard keeps DQN/SAC/TD3/DDPG working in a slim install.
try:
    import sb3_contrib
except ImportError:  # pragma: no cover
    sb3_contrib = None  # type: ignore[assignment]

CriticEvaluation: TypeAlias = tuple[th.Tensor, th.Tensor]
"""What a critic function returns: (weighted scalar loss, detached |TD| of each sample, shape ``(B,)``)."""

_NO_OPTIONS = UpdateOptions()

_SUPPORTED = "DQN, QRDQN (sb3-contrib), SAC, TQC (sb3-contrib), TD3 and DDPG, or subclasses of them"


def unsupported_learner(model: BaseAlgorithm) -> TypeError:
    """The error for a learner class weighted training does not cover, naming the ones it does."""
    return TypeError(
        f"Weighted training does not support {type(model).__name__}; it supports {_SUPPORTED}. "
        "Fix: build the model with one of these off-policy classes. On-policy learners such as PPO or A2C "
        "have no replay buffer whose samples could be weighted: train them with model.learn()."
    )


def is_qrdqn(model: BaseAlgorithm) -> TypeGuard[sb3_contrib.QRDQN]:
    """Whether ``model`` is sb3-contrib's QRDQN (False when sb3-contrib is not installed)."""
    return sb3_contrib is not None and isinstance(model, sb3_contrib.QRDQN)


def is_tqc(model: BaseAlgorithm) -> TypeGuard[sb3_contrib.TQC]:
    """Whether ``model`` is sb3-contrib's TQC (False when sb3-contrib is not installed)."""
    return sb3_contrib is not None and isinstance(model, sb3_contrib.TQC)


def _discounts(model: OffPolicyAlgorithm, samples: Samples) -> th.Tensor | float:
    # n-step buffers return gamma**n per sample (less where the episode ended early); 1-step buffers None.
    return samples.discounts if samples.discounts is not None else model.gamma


def update_options_of(model: BaseAlgorithm) -> UpdateOptions:
    """The :class:`UpdateOptions` the learner trains with (the defaults for a stock SB3 model)."""
    # HER's learners carry their options; a stock SB3 model given to weighted_train has none.
    options = getattr(model, "update_options", None)
    return options if isinstance(options, UpdateOptions) else _NO_OPTIONS


def _clipped(model: BaseAlgorithm, target: th.Tensor) -> th.Tensor:
    """The TD target, clipped to the range of returns when :attr:`UpdateOptions.clip_target` is set."""
    bounds = update_options_of(model).clip_target
    return target if bounds is None else target.clamp(bounds[0], bounds[1])


def entropy_coefficient(model: SAC | sb3_contrib.TQC) -> th.Tensor:
    """The current entropy coefficient (alpha) of SAC or TQC, detached, as their ``train()`` reads it."""
    if model.ent_coef_optimizer is not None and model.log_ent_coef is not None:
        return th.exp(model.log_ent_coef.detach())
    return model.ent_coef_tensor


def dqn_critic(model: DQN, samples: Samples, weights: th.Tensor | None) -> CriticEvaluation:
    """DQN's Huber loss on ``Q(s, a)`` against the target network's greedy value."""
    with th.no_grad():
        next_q_values, _ = model.q_net_target(samples.next_observations).max(dim=1)
        next_q_values = next_q_values.reshape(-1, 1)
        target_q_values = samples.rewards + (1 - samples.dones) * _discounts(model, samples) * next_q_values
        target_q_values = _clipped(model, target_q_values)
    current_q_values = th.gather(model.q_net(samples.observations), dim=1, index=samples.actions.long())
    per_sample = F.smooth_l1_loss(current_q_values, target_q_values, reduction="none").reshape(-1)
    return weighted_mean(per_sample, weights), mean_abs_td([current_q_values], target_q_values)


def qrdqn_critic(model: sb3_contrib.QRDQN, samples: Samples, weights: th.Tensor | None) -> CriticEvaluation:
    """QRDQN's quantile Huber loss against the target quantiles of the greedy next action."""
    batch_size = samples.rewards.shape[0]
    with th.no_grad():
        next_quantiles = model.quantile_net_target(samples.next_observations)
        # Greedy next action by mean over quantiles, copied along the quantile axis: (B, n_quantiles, 1).
        next_greedy_actions = next_quantiles.mean(dim=1, keepdim=True).argmax(dim=2, keepdim=True)
        next_greedy_actions = next_greedy_actions.expand(batch_size, model.n_quantiles, 1)
        next_quantiles = next_quantiles.gather(dim=2, index=next_greedy_actions).squeeze(dim=2)
        target_quantiles = samples.rewards + (1 - samples.dones) * _discounts(model, samples) * next_quantiles
        target_quantiles = _clipped(model, target_quantiles)
    actions = samples.actions[..., None].long().expand(batch_size, model.n_quantiles, 1)
    current_quantiles = th.gather(model.quantile_net(samples.observations), dim=2, index=actions).squeeze(
        dim=2
    )
    per_sample = quantile_huber_loss_per_sample(current_quantiles, target_quantiles, sum_over_quantiles=True)
    return weighted_mean(per_sample, weights), quantile_mean_abs_td(current_quantiles, target_quantiles)


def sac_critic(
    model: SAC, samples: Samples, weights: th.Tensor | None, ent_coef: th.Tensor
) -> CriticEvaluation:
    """SAC's twin-critic MSE against the clipped double Q of a sampled next action, entropy included."""
    with th.no_grad():
        # Draws the next actions from the torch RNG, as SAC.train() does.
        next_actions, next_log_prob = model.actor.action_log_prob(samples.next_observations)
        next_q_values = th.cat(model.critic_target(samples.next_observations, next_actions), dim=1)
        next_q_values, _ = th.min(next_q_values, dim=1, keepdim=True)
        next_q_values = next_q_values - ent_coef * next_log_prob.reshape(-1, 1)
        target_q_values = samples.rewards + (1 - samples.dones) * _discounts(model, samples) * next_q_values
        target_q_values = _clipped(model, target_q_values)
    current_q_values = model.critic(samples.observations, samples.actions)
    loss = 0.5 * twin_critic_loss(current_q_values, target_q_values, weights)
    return loss, mean_abs_td(current_q_values, target_q_values)


def tqc_critic(
    model: sb3_contrib.TQC, samples: Samples, weights: th.Tensor | None, ent_coef: th.Tensor
) -> CriticEvaluation:
    """TQC's quantile Huber loss against the pooled target quantiles, the top ones dropped."""
    batch_size = samples.rewards.shape[0]
    with th.no_grad():
        # Draws the next actions from the torch RNG, as TQC.train() does.
        next_actions, next_log_prob = model.actor.action_log_prob(samples.next_observations)
        next_quantiles = model.critic_target(samples.next_observations, next_actions)
        # Pool every critic's quantiles, sort, and drop the top ones to control overestimation.
        n_target_quantiles = (
            model.critic.quantiles_total - model.top_quantiles_to_drop_per_net * model.critic.n_critics
        )
        next_quantiles, _ = th.sort(next_quantiles.reshape(batch_size, -1))
        next_quantiles = next_quantiles[:, :n_target_quantiles]
        target_quantiles = next_quantiles - ent_coef * next_log_prob.reshape(-1, 1)
        target_quantiles = (
            samples.rewards + (1 - samples.dones) * _discounts(model, samples) * target_quantiles
        )
        target_quantiles = _clipped(model, target_quantiles)
        # (B, 1, n_target_quantiles): broadcast against (B, n_critics, n_quantiles).
        target_quantiles = target_quantiles.unsqueeze(dim=1)
    current_quantiles = model.critic(samples.observations, samples.actions)
    per_sample = quantile_huber_loss_per_sample(current_quantiles, target_quantiles, sum_over_quantiles=False)
    return weighted_mean(per_sample, weights), quantile_mean_abs_td(current_quantiles, target_quantiles)


def td3_targets(model: TD3, samples: Samples) -> th.Tensor:
    """TD3's (and DDPG's) TD targets of a batch, shape ``(B, 1)``, without gradient: the smoothed target
    policy's clipped double Q under the target networks.

    They read the target networks only, so a train step whose target networks stay put for the whole call
    can compute the next batch's targets before the current step's optimizer steps (see
    :func:`~her_wrap.sb3.train_steps.weighted_train` with several workers).
    """
    with th.no_grad():
        # Target policy smoothing: clipped Gaussian noise drawn from the torch RNG, as TD3.train() does.
        # DDPG is TD3 with target_policy_noise=0, where the noise is zero but still drawn.
        noise = samples.actions.clone().data.normal_(0, model.target_policy_noise)
        noise = noise.clamp(-model.target_noise_clip, model.target_noise_clip)
        next_actions = (model.actor_target(samples.next_observations) + noise).clamp(-1, 1)
        next_q_values = th.cat(model.critic_target(samples.next_observations, next_actions), dim=1)
        next_q_values, _ = th.min(next_q_values, dim=1, keepdim=True)
        target_q_values = samples.rewards + (1 - samples.dones) * _discounts(model, samples) * next_q_values
        return _clipped(model, target_q_values)


def td3_critic(
    model: TD3, samples: Samples, weights: th.Tensor | None, targets: th.Tensor | None = None
) -> CriticEvaluation:
    """TD3's (and DDPG's) twin-critic MSE against the smoothed target policy's clipped double Q.

    :param targets: the batch's :func:`td3_targets`, when they were computed ahead; None computes them
    """
    target_q_values = td3_targets(model, samples) if targets is None else targets
    current_q_values = model.critic(samples.observations, samples.actions)
    loss = twin_critic_loss(current_q_values, target_q_values, weights)
    return loss, mean_abs_td(current_q_values, target_q_values)


def td_abs(model: BaseAlgorithm, samples: Samples) -> np.ndarray:
    """|TD error| of each sample under the model's current networks, without gradient.

    The TD target is the one the algorithm trains on, so these are the priorities LaBER and PER want:

    - DQN: ``|target - Q(s, a)|``.
    - QRDQN: ``|mean of target quantiles - mean of current quantiles|``, the TD error of the Q-value
      the quantiles imply (the mean over quantiles of the per-quantile TD ``target_i - current_i``).
    - SAC: mean over critics of ``|target - Q_i(s, a)|``; the target includes the entropy term with the
      current entropy coefficient and a next action *sampled* from the actor.
    - TD3, DDPG: mean over critics of ``|target - Q_i(s, a)|``; the target includes TD3's target policy
      smoothing noise (DDPG's is zero), drawn fresh as in ``train()``.
    - TQC: ``|mean of the kept (truncated) target quantiles - mean of every critic's current quantiles|``.

    .. note::
        SAC and TQC (next action) and TD3/DDPG (smoothing noise) draw from the global torch RNG, exactly
        as their own target computation in ``train()`` does; DQN and QRDQN draw nothing. The networks are
        evaluated in evaluation mode (batch-norm running statistics are used and not updated, dropout is
        off) and the previous training mode is restored, so no network state changes.

    :param model: a DQN, QRDQN, SAC, TQC, TD3 or DDPG learner (or a subclass)
    :param samples: the batch, any batch size (LaBER scores ``m * B`` samples)
    :return: |TD| of each sample, shape ``(B,)``, float32
    :raises TypeError: for any other learner class, naming the supported ones
    """
    was_training = model.policy.training
    model.policy.set_training_mode(False)
    try:
        with th.no_grad():
            td = _evaluate_critic(model, samples)
    finally:
        model.policy.set_training_mode(was_training)
    return td.cpu().numpy()


def _evaluate_critic(model: BaseAlgorithm, samples: Samples) -> th.Tensor:
    # Same dispatch order as train_steps.weighted_train; the weights do not matter for |TD|.
    if is_qrdqn(model):
        return qrdqn_critic(model, samples, None)[1]
    if isinstance(model, DQN):
        return dqn_critic(model, samples, None)[1]
    if is_tqc(model):
        return tqc_critic(model, samples, None, entropy_coefficient(model))[1]
    if isinstance(model, SAC):
        return sac_critic(model, samples, None, entropy_coefficient(model))[1]
    if isinstance(model, TD3):
        return td3_critic(model, samples, None)[1]
    raise unsupported_learner(model)
