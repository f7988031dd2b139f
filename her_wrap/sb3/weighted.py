"""Weighted gradient steps for stable-baselines3 off-policy learners.

LaBER (Lahire et al. 2021, arXiv:2110.01528) and prioritized replay only correct their sampling bias
when each sample's importance weight reaches the loss, and stock ``model.train()`` draws its own batch
and averages the loss unweighted. :func:`weighted_train` replaces ``model.train()`` for DQN, QRDQN,
SAC, TQC, TD3 and DDPG: it mirrors each algorithm's ``train()`` of stable-baselines3 / sb3-contrib 2.9
(optimizer steps, target updates, policy delay, entropy-coefficient update, ``_n_updates``, logger
records, learning-rate schedule, gradient clipping, n-step ``discounts``) with two differences:

- the batch and its weights come from a :class:`BatchSource` (``draw``), and the source is told the
  |TD error| of the batch after each gradient step (``report``), which prioritized replay needs;
- the critic / Q loss is computed per sample, multiplied by the weights and then averaged
  (``(w * loss).mean()``). Without weights it equals the stock loss.

.. note::
    Only the critic / Q loss is weighted: LaBER's paper derives its weights for the gradient of the TD
    loss and leaves the actor alone. The actor (SAC, TQC, TD3, DDPG) and SAC/TQC's entropy coefficient
    train on the same batch (the sub-sampled one, for LaBER) with an unweighted mean, so their update
    follows the distribution the source sampled from rather than the uniform replay distribution.

Example::

    model = SAC("MlpPolicy", env, learning_starts=100)
    model.learn(1_000)                  # fill the buffer
    weighted_train(model, gradient_steps=64, batch_size=256, source=UniformSource(model.replay_buffer))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, TypeGuard, TypeVar

import numpy as np
import torch as th
import torch.nn.functional as F
from stable_baselines3 import DQN, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.type_aliases import DictReplayBufferSamples, ReplayBufferSamples
from stable_baselines3.common.utils import polyak_update

from her_wrap.sb3._weighted_losses import (
    mean_abs_td,
    quantile_huber_loss_per_sample,
    quantile_mean_abs_td,
    twin_critic_loss,
    weighted_mean,
)
from her_wrap.sb3.update_options import UpdateOptions

# sb3-contrib is a declared dependency; the guard keeps DQN/SAC/TD3/DDPG working in a slim install.
try:
    import sb3_contrib
except ImportError:  # pragma: no cover
    sb3_contrib = None  # type: ignore[assignment]

Samples: TypeAlias = ReplayBufferSamples | DictReplayBufferSamples
"""A batch as stable-baselines3 buffers return it (``discounts`` is set by n-step buffers)."""

# Evaluates the critic on a batch: (weighted scalar loss, detached |TD| of each sample, shape (B,)).
CriticEvaluation: TypeAlias = tuple[th.Tensor, th.Tensor]

_NO_OPTIONS = UpdateOptions()

_SUPPORTED = "DQN, QRDQN (sb3-contrib), SAC, TQC (sb3-contrib), TD3 and DDPG, or subclasses of them"

# Learners that share a train() layout; constrained so that mypy checks each loop against each class.
_ValueModel = TypeVar("_ValueModel", DQN, "sb3_contrib.QRDQN")
_SoftModel = TypeVar("_SoftModel", SAC, "sb3_contrib.TQC")


class BatchSource(Protocol):
    """Where :func:`weighted_train` gets its batches from (uniform replay, LaBER, PER, ...)."""

    def draw(self, model: OffPolicyAlgorithm, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        """Draw the batch of one gradient step.

        :param model: the learner being trained (for its device, ``_vec_normalize_env`` and, for LaBER,
            its critic: see :func:`td_abs`)
        :param batch_size: number of samples to return
        :return: ``ReplayBufferSamples`` / ``DictReplayBufferSamples`` and the per-sample weights,
            shape ``(B,)`` or ``(B, 1)``, float32 on ``model.device``, or ``None`` for unweighted
        """
        ...

    def report(self, td_abs: np.ndarray) -> None:
        """Receive the |TD error| of the batch just trained on; prioritized replay updates priorities.

        :param td_abs: |TD| of each sample of the last ``draw``, shape ``(B,)``, computed with the
            networks *before* that gradient step (the values the step's loss used), no gradient
        """
        ...


class UniformSource:
    """Uniform batches from a stable-baselines3 replay buffer, unweighted: what stock ``train()`` does.

    :param replay_buffer: the buffer to sample, usually ``model.replay_buffer``
    """

    def __init__(self, replay_buffer: ReplayBuffer) -> None:
        self.replay_buffer = replay_buffer

    def draw(self, model: OffPolicyAlgorithm, batch_size: int) -> tuple[Samples, th.Tensor | None]:
        """Sample ``batch_size`` transitions as ``model.train()`` would, with no weights.

        :param model: the learner (its ``_vec_normalize_env`` normalizes the batch, as in ``train()``)
        :param batch_size: number of samples
        :return: the samples and ``None``
        """
        return self.replay_buffer.sample(batch_size, env=model._vec_normalize_env), None

    def report(self, td_abs: np.ndarray) -> None:
        """Ignore the |TD|: uniform sampling has no priorities.

        :param td_abs: |TD| of each sample of the last batch
        """


def _unsupported(model: BaseAlgorithm) -> TypeError:
    return TypeError(
        f"Weighted training does not support {type(model).__name__}; it supports {_SUPPORTED}. "
        "Fix: build the model with one of these off-policy classes. On-policy learners such as PPO or A2C "
        "have no replay buffer whose samples could be weighted: train them with model.learn()."
    )


def _is_qrdqn(model: BaseAlgorithm) -> TypeGuard[sb3_contrib.QRDQN]:
    return sb3_contrib is not None and isinstance(model, sb3_contrib.QRDQN)


def _is_tqc(model: BaseAlgorithm) -> TypeGuard[sb3_contrib.TQC]:
    return sb3_contrib is not None and isinstance(model, sb3_contrib.TQC)


def _discounts(model: OffPolicyAlgorithm, samples: Samples) -> th.Tensor | float:
    # n-step buffers return gamma**n per sample (less where the episode ended early); 1-step buffers None.
    return samples.discounts if samples.discounts is not None else model.gamma


def _options(model: BaseAlgorithm) -> UpdateOptions:
    # HER's learners carry their options; a stock SB3 model given to weighted_train has none.
    options = getattr(model, "update_options", None)
    return options if isinstance(options, UpdateOptions) else _NO_OPTIONS


def _clipped(model: BaseAlgorithm, target: th.Tensor) -> th.Tensor:
    """The TD target, clipped to the range of returns when :attr:`UpdateOptions.clip_target` is set."""
    bounds = _options(model).clip_target
    return target if bounds is None else target.clamp(bounds[0], bounds[1])


def _action_penalty(model: BaseAlgorithm, actions_pi: th.Tensor) -> th.Tensor | float:
    """The L2 penalty on the actor's actions (:attr:`UpdateOptions.action_l2`), 0 when off."""
    weight = _options(model).action_l2
    return weight * actions_pi.pow(2).mean() if weight > 0 else 0.0


def _entropy_coefficient(model: SAC | sb3_contrib.TQC) -> th.Tensor:
    """The current entropy coefficient (alpha) of SAC or TQC, detached, as their ``train()`` reads it."""
    if model.ent_coef_optimizer is not None and model.log_ent_coef is not None:
        return th.exp(model.log_ent_coef.detach())
    return model.ent_coef_tensor


def _dqn_critic(model: DQN, samples: Samples, weights: th.Tensor | None) -> CriticEvaluation:
    with th.no_grad():
        next_q_values, _ = model.q_net_target(samples.next_observations).max(dim=1)
        next_q_values = next_q_values.reshape(-1, 1)
        target_q_values = samples.rewards + (1 - samples.dones) * _discounts(model, samples) * next_q_values
        target_q_values = _clipped(model, target_q_values)
    current_q_values = th.gather(model.q_net(samples.observations), dim=1, index=samples.actions.long())
    per_sample = F.smooth_l1_loss(current_q_values, target_q_values, reduction="none").reshape(-1)
    return weighted_mean(per_sample, weights), mean_abs_td([current_q_values], target_q_values)


def _qrdqn_critic(model: sb3_contrib.QRDQN, samples: Samples, weights: th.Tensor | None) -> CriticEvaluation:
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


def _sac_critic(
    model: SAC, samples: Samples, weights: th.Tensor | None, ent_coef: th.Tensor
) -> CriticEvaluation:
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


def _tqc_critic(
    model: sb3_contrib.TQC, samples: Samples, weights: th.Tensor | None, ent_coef: th.Tensor
) -> CriticEvaluation:
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


def _td3_critic(model: TD3, samples: Samples, weights: th.Tensor | None) -> CriticEvaluation:
    with th.no_grad():
        # Target policy smoothing: clipped Gaussian noise drawn from the torch RNG, as TD3.train() does.
        # DDPG is TD3 with target_policy_noise=0, where the noise is zero but still drawn.
        noise = samples.actions.clone().data.normal_(0, model.target_policy_noise)
        noise = noise.clamp(-model.target_noise_clip, model.target_noise_clip)
        next_actions = (model.actor_target(samples.next_observations) + noise).clamp(-1, 1)
        next_q_values = th.cat(model.critic_target(samples.next_observations, next_actions), dim=1)
        next_q_values, _ = th.min(next_q_values, dim=1, keepdim=True)
        target_q_values = samples.rewards + (1 - samples.dones) * _discounts(model, samples) * next_q_values
        target_q_values = _clipped(model, target_q_values)
    current_q_values = model.critic(samples.observations, samples.actions)
    loss = twin_critic_loss(current_q_values, target_q_values, weights)
    return loss, mean_abs_td(current_q_values, target_q_values)


def _report(source: BatchSource, td: th.Tensor) -> None:
    source.report(td.cpu().numpy())


def _train_value_based(
    model: _ValueModel,
    gradient_steps: int,
    batch_size: int,
    source: BatchSource,
    critic: Callable[[_ValueModel, Samples, th.Tensor | None], CriticEvaluation],
) -> None:
    """Mirror of ``DQN.train()`` / ``QRDQN.train()`` with a weighted Q loss."""
    model.policy.set_training_mode(True)
    model._update_learning_rate(model.policy.optimizer)

    losses = []
    for _ in range(gradient_steps):
        samples, weights = source.draw(model, batch_size)
        loss, td = critic(model, samples, weights)
        losses.append(loss.item())

        model.policy.optimizer.zero_grad()
        loss.backward()
        # DQN always clips; QRDQN clips unless max_grad_norm is None.
        if model.max_grad_norm is not None:
            th.nn.utils.clip_grad_norm_(model.policy.parameters(), model.max_grad_norm)
        model.policy.optimizer.step()
        _report(source, td)

    # The target network is copied in _on_step(), outside train(), as in stable-baselines3.
    model._n_updates += gradient_steps

    model.logger.record("train/n_updates", model._n_updates, exclude="tensorboard")
    model.logger.record("train/loss", np.mean(losses))


def _train_soft_actor_critic(
    model: _SoftModel,
    gradient_steps: int,
    batch_size: int,
    source: BatchSource,
    critic: Callable[[_SoftModel, Samples, th.Tensor | None, th.Tensor], CriticEvaluation],
    actor_q_values: Callable[[_SoftModel, Samples, th.Tensor], th.Tensor],
) -> None:
    """Mirror of ``SAC.train()`` / ``TQC.train()`` with a weighted critic loss."""
    model.policy.set_training_mode(True)
    optimizers = [model.actor.optimizer, model.critic.optimizer]
    if model.ent_coef_optimizer is not None:
        optimizers += [model.ent_coef_optimizer]
    model._update_learning_rate(optimizers)

    per_cycle = _options(model).target_update_per_cycle
    ent_coef_losses, ent_coefs = [], []
    actor_losses, critic_losses = [], []
    for gradient_step in range(gradient_steps):
        samples, weights = source.draw(model, batch_size)

        # log_std may have changed since the last step, so gSDE noise is resampled.
        if model.use_sde:
            model.actor.reset_noise()

        actions_pi, log_prob = model.actor.action_log_prob(samples.observations)
        log_prob = log_prob.reshape(-1, 1)

        # Read before the coefficient's own update: the critic target and actor loss use this value.
        ent_coef = _entropy_coefficient(model)
        ent_coefs.append(ent_coef.item())
        if model.ent_coef_optimizer is not None and model.log_ent_coef is not None:
            # Unweighted, like the actor: it tracks the policy's entropy, not a TD target.
            ent_coef_loss = -(model.log_ent_coef * (log_prob + float(model.target_entropy)).detach()).mean()
            ent_coef_losses.append(ent_coef_loss.item())
            model.ent_coef_optimizer.zero_grad()
            ent_coef_loss.backward()
            model.ent_coef_optimizer.step()

        critic_loss, td = critic(model, samples, weights, ent_coef)
        critic_losses.append(critic_loss.item())
        model.critic.optimizer.zero_grad()
        critic_loss.backward()
        model.critic.optimizer.step()

        actor_loss = (ent_coef * log_prob - actor_q_values(model, samples, actions_pi)).mean()
        actor_loss = actor_loss + _action_penalty(model, actions_pi)
        actor_losses.append(actor_loss.item())
        model.actor.optimizer.zero_grad()
        actor_loss.backward()
        model.actor.optimizer.step()

        if not per_cycle and gradient_step % model.target_update_interval == 0:
            _update_soft_targets(model)
        _report(source, td)
    if per_cycle and gradient_steps > 0:
        _update_soft_targets(model)

    model._n_updates += gradient_steps

    model.logger.record("train/n_updates", model._n_updates, exclude="tensorboard")
    model.logger.record("train/ent_coef", np.mean(ent_coefs))
    model.logger.record("train/actor_loss", np.mean(actor_losses))
    model.logger.record("train/critic_loss", np.mean(critic_losses))
    if len(ent_coef_losses) > 0:
        model.logger.record("train/ent_coef_loss", np.mean(ent_coef_losses))


def _update_soft_targets(model: _SoftModel) -> None:
    polyak_update(model.critic.parameters(), model.critic_target.parameters(), model.tau)
    # Copy running stats, see stable-baselines3 issue #996.
    polyak_update(model.batch_norm_stats, model.batch_norm_stats_target, 1.0)


def _update_td3_targets(model: TD3) -> None:
    polyak_update(model.critic.parameters(), model.critic_target.parameters(), model.tau)
    polyak_update(model.actor.parameters(), model.actor_target.parameters(), model.tau)
    # Copy running stats, see stable-baselines3 issue #996.
    polyak_update(model.critic_batch_norm_stats, model.critic_batch_norm_stats_target, 1.0)
    polyak_update(model.actor_batch_norm_stats, model.actor_batch_norm_stats_target, 1.0)


def _sac_actor_q_values(model: SAC, samples: Samples, actions_pi: th.Tensor) -> th.Tensor:
    # Min over critics, shape (B, 1).
    q_values_pi = th.cat(model.critic(samples.observations, actions_pi), dim=1)
    min_qf_pi, _ = th.min(q_values_pi, dim=1, keepdim=True)
    return min_qf_pi


def _tqc_actor_q_values(model: sb3_contrib.TQC, samples: Samples, actions_pi: th.Tensor) -> th.Tensor:
    # Mean over every critic's quantiles, shape (B, 1).
    return model.critic(samples.observations, actions_pi).mean(dim=2).mean(dim=1, keepdim=True)


def _train_td3(model: TD3, gradient_steps: int, batch_size: int, source: BatchSource) -> None:
    """Mirror of ``TD3.train()`` (and so of DDPG's) with a weighted critic loss."""
    model.policy.set_training_mode(True)
    model._update_learning_rate([model.actor.optimizer, model.critic.optimizer])

    per_cycle = _options(model).target_update_per_cycle
    actor_losses, critic_losses = [], []
    for _ in range(gradient_steps):
        # TD3 counts before the step: the policy delay below tests the updated count.
        model._n_updates += 1
        samples, weights = source.draw(model, batch_size)

        critic_loss, td = _td3_critic(model, samples, weights)
        critic_losses.append(critic_loss.item())
        model.critic.optimizer.zero_grad()
        critic_loss.backward()
        model.critic.optimizer.step()

        if model._n_updates % model.policy_delay == 0:
            # q1_forward is annotated for tensors but, like forward(), takes dict observations too.
            actions_pi = model.actor(samples.observations)
            actor_loss = -model.critic.q1_forward(samples.observations, actions_pi).mean()  # type: ignore[arg-type]
            actor_loss = actor_loss + _action_penalty(model, actions_pi)
            actor_losses.append(actor_loss.item())
            model.actor.optimizer.zero_grad()
            actor_loss.backward()
            model.actor.optimizer.step()

            if not per_cycle:
                _update_td3_targets(model)
        _report(source, td)
    if per_cycle and actor_losses:
        _update_td3_targets(model)

    model.logger.record("train/n_updates", model._n_updates, exclude="tensorboard")
    if len(actor_losses) > 0:
        model.logger.record("train/actor_loss", np.mean(actor_losses))
    model.logger.record("train/critic_loss", np.mean(critic_losses))


def weighted_train(model: BaseAlgorithm, gradient_steps: int, batch_size: int, source: BatchSource) -> None:
    """Do ``gradient_steps`` gradient steps of ``model``'s algorithm with batches and weights from ``source``.

    A drop-in for ``model.train(gradient_steps, batch_size)``: same updates, counters and logger
    records, except that each step's batch comes from ``source.draw`` and the critic / Q loss is
    ``mean(weights * per-sample loss)``. With ``weights=None`` from every draw (:class:`UniformSource`)
    the result equals stock ``train()`` under the same seeds. The actor and SAC/TQC's entropy
    coefficient train on the same batch, unweighted (see the module note). After each step,
    ``source.report`` gets that batch's |TD| as the step's loss saw it (see :func:`td_abs` for the
    definition per algorithm).

    :param model: a DQN, QRDQN, SAC, TQC, TD3 or DDPG learner (or a subclass)
    :param gradient_steps: number of gradient steps, each on a fresh ``draw``
    :param batch_size: batch size passed to ``source.draw``
    :param source: where batches and weights come from, and where |TD| goes
    :raises TypeError: for any other learner class, naming the supported ones
    """
    # QRDQN and TQC first: sb3-contrib classes that do not subclass DQN / SAC, checked explicitly.
    if _is_qrdqn(model):
        _train_value_based(model, gradient_steps, batch_size, source, _qrdqn_critic)
    elif isinstance(model, DQN):
        _train_value_based(model, gradient_steps, batch_size, source, _dqn_critic)
    elif _is_tqc(model):
        _train_soft_actor_critic(model, gradient_steps, batch_size, source, _tqc_critic, _tqc_actor_q_values)
    elif isinstance(model, SAC):
        _train_soft_actor_critic(model, gradient_steps, batch_size, source, _sac_critic, _sac_actor_q_values)
    elif isinstance(model, TD3):  # DDPG subclasses TD3 in stable-baselines3
        _train_td3(model, gradient_steps, batch_size, source)
    else:
        raise _unsupported(model)


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
    # Same dispatch order as weighted_train; the weights do not matter for |TD|.
    if _is_qrdqn(model):
        return _qrdqn_critic(model, samples, None)[1]
    if isinstance(model, DQN):
        return _dqn_critic(model, samples, None)[1]
    if _is_tqc(model):
        return _tqc_critic(model, samples, None, _entropy_coefficient(model))[1]
    if isinstance(model, SAC):
        return _sac_critic(model, samples, None, _entropy_coefficient(model))[1]
    if isinstance(model, TD3):
        return _td3_critic(model, samples, None)[1]
    raise _unsupported(model)


class WeightedTrainMixin:
    """Makes ``train()`` draw batches from :attr:`batch_source`, weight the critic loss per sample and apply
    :attr:`update_options`, and makes exploration take random actions when those options ask for it.

    With no source set, ``train()`` is the learner's own.
    """

    batch_source: BatchSource | None = None
    update_options: UpdateOptions = _NO_OPTIONS
    _random_action_rng: np.random.Generator | None = None

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        if self.batch_source is None:
            super().train(gradient_steps, batch_size)  # type: ignore[misc]
            return
        weighted_train(self, gradient_steps, batch_size, self.batch_source)  # type: ignore[arg-type]

    def _sample_action(
        self, learning_starts: int, action_noise: Any = None, n_envs: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        actions, buffer_actions = super()._sample_action(learning_starts, action_noise, n_envs)  # type: ignore[misc]
        probability = self.update_options.random_action_prob
        if probability > 0:
            if self._random_action_rng is None:
                self._random_action_rng = np.random.default_rng(self.seed)  # type: ignore[attr-defined]
            rng = self._random_action_rng
            replaced = rng.random(n_envs) < probability
            if replaced.any():
                # Uniform in the policy's [-1, 1] scale (what the buffer stores), then in the env's bounds.
                random_scaled = rng.uniform(-1.0, 1.0, size=(int(replaced.sum()), *buffer_actions.shape[1:]))
                buffer_actions = buffer_actions.copy()
                buffer_actions[replaced] = random_scaled.astype(buffer_actions.dtype)
                actions = self.policy.unscale_action(buffer_actions)  # type: ignore[attr-defined]
        return actions, buffer_actions

    def _excluded_save_params(self) -> list[str]:
        # The source holds the replay buffer: never pickle it into the model zip. The options are saved
        # by HER beside the model, and the random-action generator is seeded again.
        return [  # type: ignore[misc]
            *super()._excluded_save_params(),  # type: ignore[misc]
            "batch_source",
            "update_options",
            "_random_action_rng",
        ]


_WEIGHTED_CLASSES: dict[type, type] = {}


def weighted_learner_class(model_class: type[OffPolicyAlgorithm]) -> Any:
    """The subclass of ``model_class`` with :class:`WeightedTrainMixin` (one per learner class)."""
    if model_class not in _WEIGHTED_CLASSES:
        name = f"Weighted{model_class.__name__}"
        _WEIGHTED_CLASSES[model_class] = type(
            name, (WeightedTrainMixin, model_class), {"__module__": __name__}
        )
    return _WEIGHTED_CLASSES[model_class]
