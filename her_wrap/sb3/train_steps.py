"""HER's train step for stable-baselines3 off-policy learners, and the learner subclass that runs it.

:func:`train_from_source` replaces ``model.train()`` for DQN, QRDQN, SAC, TQC, TD3 and DDPG. It mirrors
each algorithm's ``train()`` of stable-baselines3 / sb3-contrib 2.9 (optimizer steps, target updates,
policy delay, entropy-coefficient update, ``_n_updates``, logger records, learning-rate schedule,
gradient clipping, n-step ``discounts``) with these differences:

- the batch and its weights come from a :class:`~her_wrap.sb3.batch_sources.BatchSource` (``draw``), and
  the source is told the |TD error| of the batch after each gradient step (``report``), which prioritized
  replay needs. LaBER (Lahire et al. 2021, arXiv:2110.01528) and prioritized replay only correct their
  sampling bias when each sample's importance weight reaches the loss; stock ``train()`` draws its own
  batch and averages the loss unweighted;
- the critic / Q loss is computed per sample, multiplied by the weights and then averaged
  (``(w * loss).mean()``). A uniform source gives no weights, and the loss equals the stock loss;
- the options of :class:`~her_wrap.sb3.update_options.UpdateOptions` apply (target clipping, action L2,
  target networks moved once per call);
- the actor's backward pass skips the critic's own weight gradients (:func:`_frozen`): the same actor
  step for about a tenth less work.

:class:`TrainFromSourceMixin` makes a learner's ``train()`` call :func:`train_from_source` and its
exploration follow :class:`~her_wrap.sb3.exploration.RandomActionExploration`;
:func:`train_from_source_class` builds that subclass once per learner class.

.. note::
    Only the critic / Q loss is weighted: LaBER's paper derives its weights for the gradient of the TD
    loss and leaves the actor alone. The actor (SAC, TQC, TD3, DDPG) and SAC/TQC's entropy coefficient
    train on the same batch (the sub-sampled one, for LaBER) with an unweighted mean, so their update
    follows the distribution the source sampled from rather than the uniform replay distribution.

Example::

    model = SAC("MlpPolicy", env, learning_starts=100)
    model.learn(1_000)                  # fill the buffer
    train_from_source(model, gradient_steps=64, batch_size=256, source=UniformSource(model.replay_buffer))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch as th
from stable_baselines3 import DQN, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.utils import polyak_update

from her_wrap.sb3.critic_losses import (
    CriticEvaluation,
    dqn_critic,
    entropy_coefficient,
    is_qrdqn,
    is_tqc,
    qrdqn_critic,
    sac_critic,
    sb3_contrib,
    td3_critic,
    td3_targets,
    tqc_critic,
    unsupported_learner,
    update_options_of,
)
from her_wrap.sb3.distributed import joint_averager
from her_wrap.sb3.exploration import RandomActionExploration
from her_wrap.sb3.samples import Samples
from her_wrap.sb3.update_options import UpdateOptions

if TYPE_CHECKING:
    from her_wrap.sb3.batch_sources import BatchSource


def draws_ahead(source: BatchSource) -> bool:
    """Whether ``source`` may draw a step's batch before the previous step's optimizer steps and report.

    True for a source that says so (``draws_ahead = True``: its draws read neither the learner's networks
    nor what ``report`` was told, as uniform replay's); False for LaBER (it scores candidates with the
    critic), prioritized replay (its priorities follow each report) and any source that does not say.
    """
    return bool(getattr(source, "draws_ahead", False))


# Learners that share a train() layout; constrained so that mypy checks each loop against each class.
_ValueModel = TypeVar("_ValueModel", DQN, "sb3_contrib.QRDQN")
_SoftModel = TypeVar("_SoftModel", SAC, "sb3_contrib.TQC")


def _action_penalty(model: BaseAlgorithm, actions_pi: th.Tensor) -> th.Tensor | float:
    """The L2 penalty on the actor's actions (:attr:`UpdateOptions.action_l2`), 0 when off."""
    weight = update_options_of(model).action_l2
    return weight * actions_pi.pow(2).mean() if weight > 0 else 0.0


def _critic_own_parameters(model: SAC | TD3 | sb3_contrib.TQC) -> list[th.nn.Parameter]:
    """The critic's trainable parameters that the actor does not share (a shared features extractor is
    the actor's too), read once per ``train`` call for :func:`_frozen`."""
    actor_parameters = {id(parameter) for parameter in model.actor.parameters()}
    return [
        parameter
        for parameter in model.critic.parameters()
        if parameter.requires_grad and id(parameter) not in actor_parameters
    ]


@contextmanager
def _frozen(parameters: list[th.nn.Parameter]) -> Iterator[None]:
    """Within it, ``parameters`` take no gradient: the actor's backward pass skips the critic's own.

    The actor loss runs through the critic, and a backward pass computes the gradient of every
    parameter the loss depends on; the critic's would be discarded (its optimizer zeroes them before its
    next step), and they cost about a tenth of a DDPG update. Parameters the actor owns too keep theirs
    (:func:`_critic_own_parameters` leaves them out), so the actor's gradients are those of the stock step.
    """
    for parameter in parameters:
        parameter.requires_grad_(False)
    try:
        yield
    finally:
        for parameter in parameters:
            parameter.requires_grad_(True)


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

    per_cycle = update_options_of(model).target_update_per_cycle
    critic_own = _critic_own_parameters(model)
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
        ent_coef = entropy_coefficient(model)
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

        with _frozen(critic_own):
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
    """Mirror of ``TD3.train()`` (and so of DDPG's) with a weighted critic loss.

    With several workers and the target networks moved once per call (``target_update_per_cycle``),
    each actor step waits for the next critic's backward pass, so that one all-reduce averages both
    gradients: the critic's loss reads the target networks, never the actor, so computing it before the
    actor's step changes nothing, and the actor's next loss still sees both steps. Every worker takes
    the same steps as with one all-reduce per optimizer, in about half as many collectives.
    """
    model.policy.set_training_mode(True)
    model._update_learning_rate([model.actor.optimizer, model.critic.optimizer])

    per_cycle = update_options_of(model).target_update_per_cycle
    joint = joint_averager(model.actor.optimizer, model.critic.optimizer) if per_cycle else None
    ahead = joint is not None and draws_ahead(source)
    critic_own = _critic_own_parameters(model)
    actor_losses, critic_losses = [], []
    actor_step_waits = False
    next_batch: tuple[Samples, th.Tensor | None, th.Tensor] | None = None
    for gradient_step in range(gradient_steps):
        # TD3 counts before the step: the policy delay below tests the updated count.
        model._n_updates += 1
        if next_batch is None:
            samples, weights = source.draw(model, batch_size)
            targets = None
        else:
            samples, weights, targets = next_batch
            next_batch = None

        critic_loss, td = td3_critic(model, samples, weights, targets)
        critic_losses.append(critic_loss.item())
        model.critic.optimizer.zero_grad()
        critic_loss.backward()
        draw_next = ahead and gradient_step + 1 < gradient_steps
        if actor_step_waits or draw_next:
            # Else the critic's step hook averages its gradients alone.
            assert joint is not None
            waiting = [model.actor.optimizer] if actor_step_waits else []
            pending = joint.start_average_together([*waiting, model.critic.optimizer])
            if draw_next:
                # While the all-reduce waits for the other workers, draw the next batch and compute its
                # targets: they read neither the gradients nor the parameters these steps change.
                next_samples, next_weights = source.draw(model, batch_size)
                next_batch = (next_samples, next_weights, td3_targets(model, next_samples))
            pending.finish()
        if actor_step_waits:
            model.actor.optimizer.step()
            actor_step_waits = False
        model.critic.optimizer.step()

        if model._n_updates % model.policy_delay == 0:
            # q1_forward is annotated for tensors but, like forward(), takes dict observations too.
            with _frozen(critic_own):
                actions_pi = model.actor(samples.observations)
                actor_loss = -model.critic.q1_forward(samples.observations, actions_pi).mean()  # type: ignore[arg-type]
                actor_loss = actor_loss + _action_penalty(model, actions_pi)
                actor_losses.append(actor_loss.item())
                model.actor.optimizer.zero_grad()
                actor_loss.backward()
            if joint is not None:
                actor_step_waits = True
            else:
                model.actor.optimizer.step()

            if not per_cycle:
                _update_td3_targets(model)
        _report(source, td)
    if actor_step_waits:
        model.actor.optimizer.step()
    if per_cycle and actor_losses:
        _update_td3_targets(model)

    model.logger.record("train/n_updates", model._n_updates, exclude="tensorboard")
    if len(actor_losses) > 0:
        model.logger.record("train/actor_loss", np.mean(actor_losses))
    model.logger.record("train/critic_loss", np.mean(critic_losses))


def train_from_source(
    model: BaseAlgorithm, gradient_steps: int, batch_size: int, source: BatchSource
) -> None:
    """Do ``gradient_steps`` gradient steps of ``model``'s algorithm with batches and weights from ``source``.

    A drop-in for ``model.train(gradient_steps, batch_size)``: same updates, counters and logger
    records, except that each step's batch comes from ``source.draw`` and the critic / Q loss is
    ``mean(weights * per-sample loss)``. With ``weights=None`` from every draw (:class:`~her_wrap.sb3.batch_sources.UniformSource`)
    the result equals stock ``train()`` under the same seeds. The actor and SAC/TQC's entropy
    coefficient train on the same batch, unweighted (see the module note). After each step,
    ``source.report`` gets that batch's |TD| as the step's loss saw it (see :func:`~her_wrap.sb3.critic_losses.td_abs` for the
    definition per algorithm).

    :param model: a DQN, QRDQN, SAC, TQC, TD3 or DDPG learner (or a subclass)
    :param gradient_steps: number of gradient steps, each on a fresh ``draw``
    :param batch_size: batch size passed to ``source.draw``
    :param source: where batches and weights come from, and where |TD| goes
    :raises TypeError: for any other learner class, naming the supported ones
    """
    # QRDQN and TQC first: sb3-contrib classes that do not subclass DQN / SAC, checked explicitly.
    if is_qrdqn(model):
        _train_value_based(model, gradient_steps, batch_size, source, qrdqn_critic)
    elif isinstance(model, DQN):
        _train_value_based(model, gradient_steps, batch_size, source, dqn_critic)
    elif is_tqc(model):
        _train_soft_actor_critic(model, gradient_steps, batch_size, source, tqc_critic, _tqc_actor_q_values)
    elif isinstance(model, SAC):
        _train_soft_actor_critic(model, gradient_steps, batch_size, source, sac_critic, _sac_actor_q_values)
    elif isinstance(model, TD3):  # DDPG subclasses TD3 in stable-baselines3
        _train_td3(model, gradient_steps, batch_size, source)
    else:
        raise unsupported_learner(model)


class TrainFromSourceMixin(RandomActionExploration):
    """Makes ``train()`` run :func:`train_from_source` on :attr:`batch_source` with :attr:`update_options`,
    and makes exploration take random actions when those options ask for it.

    With no source set, ``train()`` is the learner's own.
    """

    batch_source: BatchSource | None = None
    update_options: UpdateOptions = UpdateOptions()

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        if self.batch_source is None:
            super().train(gradient_steps, batch_size)  # type: ignore[misc]
            return
        train_from_source(self, gradient_steps, batch_size, self.batch_source)  # type: ignore[arg-type]

    def _excluded_save_params(self) -> list[str]:
        # The source holds the replay buffer: never pickle it into the model zip. The options are saved
        # by HER beside the model.
        return [*super()._excluded_save_params(), "batch_source", "update_options"]


_SOURCE_CLASSES: dict[type, type] = {}


def has_stock_actor_critic_train(model_class: type) -> bool:
    """Whether ``model_class`` trains with the unchanged ``train()`` of SAC, TQC, TD3 or DDPG.

    :func:`train_from_source` with uniform batches takes the same steps as that ``train()`` for about a
    tenth less work (the actor's backward pass skips the critic's weight gradients), so ``HER`` trains
    such learners with it even when no option asks for it. A subclass with a ``train()`` of its own keeps
    it (False), and so does DQN / QRDQN, whose step has no actor to spare work on.
    """
    stock = [SAC.train, TD3.train]  # DDPG inherits TD3's
    if sb3_contrib is not None:
        stock.append(sb3_contrib.TQC.train)
    return getattr(model_class, "train", None) in stock


def train_from_source_class(model_class: type[OffPolicyAlgorithm]) -> Any:
    """The subclass of ``model_class`` with :class:`TrainFromSourceMixin` (one per learner class)."""
    if model_class not in _SOURCE_CLASSES:
        name = f"{model_class.__name__}FromSource"
        _SOURCE_CLASSES[model_class] = type(
            name, (TrainFromSourceMixin, model_class), {"__module__": __name__}
        )
    return _SOURCE_CLASSES[model_class]
