"""Per-sample critic losses and |TD| reducers behind :mod:`her_wrap.sb3.train_steps`.

Stock stable-baselines3 losses reduce over the batch inside the loss call (``F.mse_loss(...)``,
``quantile_huber_loss(...)``), which leaves no place for a per-sample weight. The functions here keep one
loss value per sample, so that ``(weights * loss).mean()`` applies importance weights (LaBER, PER), and
reduce to the stock value when there are no weights.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch as th
import torch.nn.functional as F


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
