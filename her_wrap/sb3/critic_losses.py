"""The critic / Q loss of one batch for each supported learner, and the |TD error| it implies.

Each ``*_critic`` function computes the TD target exactly as the learner's own ``train()`` of
stable-baselines3 / sb3-contrib 2.9 does (n-step ``discounts``, target clipping of
:class:`~her_wrap.sb3.update_options.UpdateOptions` aside), keeps one loss value per sample and returns
the detached |TD| of each sample. :mod:`her_wrap.sb3.train_steps` trains on them; :func:`td_abs` scores a
batch with them (LaBER's and prioritized replay's priorities).

Stock stable-baselines3 losses reduce over the batch inside the loss call (``F.mse_loss(...)``,
``quantile_huber_loss(...)``), which leaves no place for a per-sample weight. The per-sample losses here
(:func:`twin_critic_loss`, :func:`quantile_huber_loss_per_sample`) are reduced by :func:`weighted_mean`,
so that ``(weights * loss).mean()`` applies importance weights (LaBER, PER), and equal the stock value
when there are no weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias, TypeGuard

import numpy as np
import torch as th
import torch.nn.functional as F
from stable_baselines3 import DQN, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

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
    """The error for a learner class HER's train step does not cover, naming the ones it does."""
    return TypeError(
        f"HER's train step does not support {type(model).__name__}; it supports {_SUPPORTED}. "
        "Fix: build the model with one of these off-policy classes. On-policy learners such as PPO or A2C "
        "have no replay buffer whose samples could be weighted: train them with model.learn()."
    )


def is_qrdqn(model: BaseAlgorithm) -> TypeGuard[sb3_contrib.QRDQN]:
    """Whether ``model`` is sb3-contrib's QRDQN (False when sb3-contrib is not installed)."""
    return sb3_contrib is not None and isinstance(model, sb3_contrib.QRDQN)


def is_tqc(model: BaseAlgorithm) -> TypeGuard[sb3_contrib.TQC]:
    """Whether ``model`` is sb3-contrib's TQC (False when sb3-contrib is not installed)."""
    return sb3_contrib is not None and isinstance(model, sb3_contrib.TQC)


def weighted_mean(per_sample_loss: th.Tensor, weights: th.Tensor | None) -> th.Tensor:
    """Batch mean of a per-sample loss, each sample scaled by its weight.

    ``weights=None`` is the plain mean, the reduction stable-baselines3 applies, so an unweighted run
    matches stock ``train()``. Weights are detached: they are importance corrections, not something
    to learn.

    :param per_sample_loss: loss of each sample, shape ``(B,)``
    :param weights: weight of each sample, shape ``(B,)`` or ``(B, 1)``, or ``None`` for all ones
    :return: scalar ``mean(weights * per_sample_loss)``
    :raises ValueError: when there is not exactly one weight per sample
    """
    if weights is None:
        return per_sample_loss.mean()
    flat_weights = weights.detach().reshape(-1)
    if flat_weights.shape != per_sample_loss.shape:
        raise ValueError(
            f"Got weights of shape {tuple(weights.shape)} for a batch of {per_sample_loss.shape[0]} samples; "
            "a BatchSource must return one weight per sample, shape (B,) or (B, 1)."
        )
    return (flat_weights.to(per_sample_loss) * per_sample_loss).mean()


def twin_critic_loss(
    current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor | None
) -> th.Tensor:
    """Sum over critics of the weighted mean squared TD error (SAC, TD3, DDPG).

    Summing one weighted mean per critic, rather than weighting a per-sample sum over critics, keeps the
    order of operations of stock ``sum(F.mse_loss(q, target) for q in current_q_values)``, so the
    unweighted loss reproduces stock training exactly (the tests find identical parameters), not only to
    rounding.

    :param current_q_values: ``Q_i(s, a)`` of each critic, each of shape ``(B, 1)``
    :param target_q_values: TD target, shape ``(B, 1)``, no gradient
    :param weights: per-sample weights, shape ``(B,)`` or ``(B, 1)``, or ``None``
    :return: scalar loss
    """
    losses = [
        weighted_mean(F.mse_loss(current_q, target_q_values, reduction="none").reshape(-1), weights)
        for current_q in current_q_values
    ]
    total = sum(losses)
    assert isinstance(total, th.Tensor)  # sum() of tensors; narrows the int start value for mypy
    return total


def quantile_huber_loss_per_sample(
    current_quantiles: th.Tensor, target_quantiles: th.Tensor, sum_over_quantiles: bool
) -> th.Tensor:
    """Quantile-regression Huber loss of each sample (QR-DQN, TQC).

    Same formula as ``sb3_contrib.common.utils.quantile_huber_loss`` with unit quantile midpoints
    ``(i + 0.5) / n_quantiles``, but reduced over everything except the batch axis. The mean of the
    result over the batch is the sb3-contrib loss: every sample has the same number of terms.

    :param current_quantiles: ``(B, n_quantiles)`` (QR-DQN) or ``(B, n_critics, n_quantiles)`` (TQC)
    :param target_quantiles: ``(B, n_target_quantiles)`` (QR-DQN) or ``(B, 1, n_target_quantiles)`` (TQC),
        no gradient
    :param sum_over_quantiles: sum over the current-quantile axis before averaging, as QR-DQN does;
        TQC averages over it (``False``)
    :return: loss of each sample, shape ``(B,)``
    """
    n_quantiles = current_quantiles.shape[-1]
    cum_prob = (th.arange(n_quantiles, device=current_quantiles.device, dtype=th.float) + 0.5) / n_quantiles
    # Broadcast the midpoints along the current-quantile axis of pairwise_delta below.
    cum_prob = cum_prob.view(*([1] * (current_quantiles.ndim - 1)), -1, 1)
    # (B, [n_critics,] n_quantiles, n_target_quantiles): every target quantile against every current one.
    pairwise_delta = target_quantiles.unsqueeze(-2) - current_quantiles.unsqueeze(-1)
    abs_pairwise_delta = th.abs(pairwise_delta)
    huber_loss = th.where(abs_pairwise_delta > 1, abs_pairwise_delta - 0.5, pairwise_delta**2 * 0.5)
    loss = th.abs(cum_prob - (pairwise_delta.detach() < 0).float()) * huber_loss
    if sum_over_quantiles:
        loss = loss.sum(dim=-2)
    return loss.flatten(start_dim=1).mean(dim=1)


def mean_abs_td(current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor) -> th.Tensor:
    """|TD error| of each sample, averaged over critics (one critic for DQN).

    :param current_q_values: ``Q_i(s, a)`` of each critic, each of shape ``(B, 1)``
    :param target_q_values: TD target, shape ``(B, 1)``
    :return: detached ``mean_i |target - Q_i(s, a)|``, shape ``(B,)``
    """
    stacked = th.cat([current_q.detach() for current_q in current_q_values], dim=1)
    return (target_q_values.detach() - stacked).abs().mean(dim=1)


def quantile_mean_abs_td(current_quantiles: th.Tensor, target_quantiles: th.Tensor) -> th.Tensor:
    """|TD error| of the Q-value implied by quantiles (QR-DQN, TQC).

    ``|mean(target quantiles) - mean(current quantiles)|``: the TD error of the expected return, which
    is what DQN's |TD| would be for these distributions, and which does not depend on how target and
    current quantiles pair up (TQC drops the top target quantiles, so there is no one-to-one pairing).
    For TQC the current mean runs over every critic's quantiles, as TQC's actor does.

    :param current_quantiles: ``(B, n_quantiles)`` or ``(B, n_critics, n_quantiles)``
    :param target_quantiles: ``(B, n_target_quantiles)`` or ``(B, 1, n_target_quantiles)``
    :return: detached |TD| of each sample, shape ``(B,)``
    """
    current_mean = current_quantiles.detach().flatten(start_dim=1).mean(dim=1)
    target_mean = target_quantiles.detach().flatten(start_dim=1).mean(dim=1)
    return (target_mean - current_mean).abs()


def _discounts(model: OffPolicyAlgorithm, samples: Samples) -> th.Tensor | float:
    # n-step buffers return gamma**n per sample (less where the episode ended early); 1-step buffers None.
    return samples.discounts if samples.discounts is not None else model.gamma


def update_options_of(model: BaseAlgorithm) -> UpdateOptions:
    """The :class:`UpdateOptions` the learner trains with (the defaults for a stock SB3 model)."""
    # HER's learners carry their options; a stock SB3 model given to train_from_source has none.
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
    ``_train_td3`` in :mod:`her_wrap.sb3.train_steps` with several workers).
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
    # Same dispatch order as train_steps.train_from_source; the weights do not matter for |TD|.
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
