"""Training one learner with several worker processes over ``torch.distributed``.

The multi-worker regime of the HER paper: every worker steps its own envs into its own replay buffer,
relabels and explores with its own random streams, and at every gradient step the workers' gradients are
averaged, so that every worker applies the same update to the same parameters and the networks stay
identical on all of them. What is shared and how:

- initial parameters, target networks and optimizer states: broadcast from rank 0 when training starts
  (so a run resumed from rank 0's checkpoint starts identical everywhere too);
- gradients: averaged (one all-reduce of all of an optimizer's gradients) just before each optimizer step,
  through an optimizer step pre-hook: the learner's own ``train`` (stable-baselines3's, or HER's weighted
  one) runs unchanged, for the actor, the critics and SAC/TQC's entropy coefficient alike. The average is
  taken after anything the learner does between ``backward`` and ``step``: DQN's gradient-norm clipping
  clips each worker's gradient before the average. HER's DDPG/TD3 step with the targets moved once per
  cycle sends each actor gradient in the next critic gradient's all-reduce (:func:`joint_averager`), and
  with uniform draws it starts that all-reduce, draws the next batch and computes its targets, then waits
  (:meth:`GradientAverager.start_average_together`);
- target networks: moved by the learner from identical parameters, hence identical;
- observation-normalizer statistics: the running mean/variance/count that each worker gathered since the
  last combination are merged into the shared statistics at the end of every rollout (before the
  gradient steps), as if one process had seen every worker's observations.

Collectives must be called in the same order on every worker, so the workers must train at the same
env steps: ``train_freq`` counted in steps (not episodes), and the same ``n_envs``, ``train_freq``,
``gradient_steps``, ``batch_size`` and ``learning_starts`` on every worker (checked when training
starts). ``batch_size`` is per worker: a gradient step averages ``workers x batch_size`` samples.

:func:`with_distributed_training` is what :meth:`her_wrap.HER.learn` calls: when a process group of more
than one worker is initialized it adds :class:`DistributedTrainingCallback` to the callbacks, so a script
that builds ``HER(...)`` and calls ``learn`` runs unchanged under ``torchrun`` once it calls
``torch.distributed.init_process_group``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np
import torch as th
import torch.distributed as dist
from stable_baselines3.common.callbacks import BaseCallback, ConvertCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.type_aliases import MaybeCallback, TrainFrequencyUnit
from stable_baselines3.common.vec_env import VecNormalize

T = TypeVar("T")

#: Learner settings that must agree on every worker for their collectives to line up.
SHARED_LEARNER_SETTINGS: tuple[str, ...] = (
    "n_envs",
    "train_freq",
    "gradient_steps",
    "batch_size",
    "learning_starts",
)


class WorkerLostError(RuntimeError):
    """A collective operation failed: another worker died, was killed, or stopped answering."""


class UnshareableSettingError(ValueError):
    """A learner setting that several workers cannot share, or that differs between them."""


def world_size() -> int:
    """Workers in the default process group; 1 when none is initialized."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def rank() -> int:
    """This worker's rank in the default process group; 0 when none is initialized."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return 0


def collective(operation: Callable[..., T], *args: Any, what: str, **kwargs: Any) -> T:
    """Run one collective, turning a failure into a :class:`WorkerLostError` that says what it was doing."""
    try:
        return operation(*args, **kwargs)
    except RuntimeError as error:
        raise WorkerLostError(
            f"worker {rank()} of {world_size()} lost the other workers during {what}: one of them died, was "
            f"killed or stopped answering (see its output); this worker stops too. Cause: {error}"
        ) from error


def learner_optimizers(model: OffPolicyAlgorithm) -> list[th.optim.Optimizer]:
    """Every optimizer of an SB3 learner: the policy's or the actor's and critics', and SAC's entropy one."""
    found: list[th.optim.Optimizer] = []
    candidates = [getattr(module, "optimizer", None) for module in model.policy.modules()]
    candidates.append(getattr(model, "ent_coef_optimizer", None))
    for optimizer in candidates:
        if isinstance(optimizer, th.optim.Optimizer) and all(optimizer is not seen for seen in found):
            found.append(optimizer)
    return found


class GradientAverager:
    """Average the gradients of some optimizers across workers just before each of their steps.

    One all-reduce per optimizer step carries all of that optimizer's gradients (flattened into one
    buffer). The sum is divided by the number of workers on every worker alike, so every worker ends up
    with bit-identical averaged gradients, and, applying the same optimizer step to the same parameters,
    with bit-identical parameters.

    A train step that holds the gradients of two optimizers at once can average them in one all-reduce
    instead of two (:meth:`average_together`); the hooks of those optimizers' next steps then leave them
    as they are. HER's DDPG/TD3 step does so (see :func:`joint_averager`).

    :param optimizers: the optimizers whose steps to hook
    """

    def __init__(self, optimizers: Iterable[th.optim.Optimizer]) -> None:
        self.optimizers = list(optimizers)
        self._handles: list[Any] = []
        self._averaged: set[th.optim.Optimizer] = set()

    def attach(self) -> None:
        """Hook the optimizers' steps (idempotent)."""
        if not self._handles:
            self._handles = [optimizer.register_step_pre_hook(self._average) for optimizer in self.optimizers]
            for optimizer in self.optimizers:
                _ATTACHED[optimizer] = self

    def detach(self) -> None:
        """Remove the hooks."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._averaged.clear()
        for optimizer in self.optimizers:
            if _ATTACHED.get(optimizer) is self:
                del _ATTACHED[optimizer]

    def average_together(self, optimizers: Iterable[th.optim.Optimizer]) -> None:
        """Average the gradients of all of ``optimizers`` now, in one all-reduce; the next step of each
        then uses them as they are (its hook does not average again)."""
        self.start_average_together(optimizers).finish()

    def start_average_together(self, optimizers: Iterable[th.optim.Optimizer]) -> PendingAverage:
        """Start :meth:`average_together`'s all-reduce and return at once; its ``finish()`` waits for it,
        and must come before any of ``optimizers`` steps (their hooks no longer average).

        Until ``finish()``, the gradients hold this worker's own values, and work that reads neither them
        nor the parameters' next values (drawing the next batch, computing its targets) can fill the time
        the all-reduce spends waiting for the other workers.
        """
        optimizers = list(optimizers)
        self._averaged.update(optimizers)
        return start_average([param for optimizer in optimizers for param in _with_gradients(optimizer)])

    def _average(self, optimizer: th.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if optimizer in self._averaged:
            self._averaged.remove(optimizer)
        else:
            average_gradients(_with_gradients(optimizer))


#: The averager whose hooks each optimizer carries (an optimizer is hooked by one averager at most).
_ATTACHED: weakref.WeakKeyDictionary[th.optim.Optimizer, GradientAverager] = weakref.WeakKeyDictionary()


def _parameters(optimizer: th.optim.Optimizer) -> list[th.Tensor]:
    return [param for group in optimizer.param_groups for param in group["params"]]


def _with_gradients(optimizer: th.optim.Optimizer) -> list[th.Tensor]:
    return [param for param in _parameters(optimizer) if param.grad is not None]


def joint_averager(first: th.optim.Optimizer, second: th.optim.Optimizer) -> GradientAverager | None:
    """The averager that hooks both optimizers, when their gradients can be averaged in one all-reduce.

    None when training in one process, when the two are hooked by different averagers (or none), or when
    they share a parameter (one all-reduce would then average its gradient twice).
    """
    averager = _ATTACHED.get(first)
    if averager is None or _ATTACHED.get(second) is not averager or world_size() <= 1:
        return None
    first_ids = {id(param) for param in _parameters(first)}
    if any(id(param) in first_ids for param in _parameters(second)):
        return None
    return averager


class PendingAverage:
    """The all-reduce of some gradients, started (:func:`start_average`) and not yet waited for.

    :meth:`finish` waits for it and writes the mean over the workers into each gradient; the gradients are
    copied into the all-reduce's buffer when it starts, so changing them in between changes nothing.
    """

    def __init__(self, gradients: list[th.Tensor], packed: th.Tensor | None, work: Any, workers: int) -> None:
        self.gradients = gradients
        self.packed = packed
        self.work = work
        self.workers = workers

    def finish(self) -> None:
        """Wait for the all-reduce and replace each gradient with its mean over the workers."""
        if self.work is not None:
            collective(self.work.wait, what="the gradient all-reduce")
            self.work = None
            assert self.packed is not None
            self.packed /= self.workers
            offset = 0
            for gradient in self.gradients:
                count = gradient.numel()
                gradient.copy_(self.packed[offset : offset + count].view_as(gradient))
                offset += count


def start_average(parameters: list[th.Tensor]) -> PendingAverage:
    """Start the all-reduce that :func:`average_gradients` waits for; nothing to wait for in one process."""
    workers = world_size()
    gradients = [param.grad for param in parameters if param.grad is not None]
    if workers <= 1 or not gradients:
        return PendingAverage([], None, None, workers)
    packed = th.cat([gradient.reshape(-1) for gradient in gradients])
    work = collective(
        dist.all_reduce, packed, op=dist.ReduceOp.SUM, async_op=True, what="the gradient all-reduce"
    )
    return PendingAverage(gradients, packed, work, workers)


def average_gradients(parameters: list[th.Tensor]) -> None:
    """Replace each parameter's gradient with its mean over the workers (one all-reduce)."""
    start_average(parameters).finish()


def broadcast_learner_state(model: OffPolicyAlgorithm, source: int = 0) -> None:
    """Give every worker rank ``source``'s parameters, target networks, entropy coefficient and optimizer states."""
    if world_size() <= 1:
        return
    with th.no_grad():
        tensors = list(model.policy.state_dict().values())
        log_ent_coef = getattr(model, "log_ent_coef", None)
        if isinstance(log_ent_coef, th.Tensor):
            tensors.append(log_ent_coef.data)
        for tensor in tensors:
            collective(dist.broadcast, tensor, src=source, what="the broadcast of rank 0's parameters")
    optimizers = learner_optimizers(model)
    states: list[Any] = [optimizer.state_dict() for optimizer in optimizers]
    collective(
        dist.broadcast_object_list, states, src=source, what="the broadcast of rank 0's optimizer states"
    )
    if rank() != source:
        for optimizer, state in zip(optimizers, states, strict=True):
            optimizer.load_state_dict(state)


def normalizer_statistics(normalizer: VecNormalize) -> list[RunningMeanStd]:
    """The running statistics a ``VecNormalize`` updates, in a fixed order (observation keys sorted)."""
    statistics: list[RunningMeanStd] = []
    if normalizer.norm_obs:
        if isinstance(normalizer.obs_rms, dict):
            statistics += [normalizer.obs_rms[key] for key in sorted(normalizer.obs_rms)]
        else:
            statistics.append(normalizer.obs_rms)
    if normalizer.norm_reward:
        statistics.append(normalizer.ret_rms)
    return statistics


def _moments(statistics: RunningMeanStd) -> tuple[np.ndarray, np.ndarray, float]:
    return (
        np.array(statistics.mean, dtype=np.float64),
        np.array(statistics.var, dtype=np.float64),
        statistics.count,
    )


def _set_moments(statistics: RunningMeanStd, moments: tuple[np.ndarray, np.ndarray, float]) -> None:
    mean, var, count = moments
    statistics.mean, statistics.var, statistics.count = mean.copy(), var.copy(), float(count)


def moments_since(
    base: tuple[np.ndarray, np.ndarray, float], now: tuple[np.ndarray, np.ndarray, float]
) -> tuple[np.ndarray, np.ndarray, float]:
    """The (mean, var, count) of the data added to statistics ``base`` to make ``now``.

    The inverse of the parallel-variance merge that ``RunningMeanStd.update_from_moments`` performs.
    """
    base_mean, base_var, base_count = base
    mean, var, count = now
    added = count - base_count
    if added <= 0:
        return np.zeros_like(mean), np.ones_like(var), 0.0
    added_mean = (count * mean - base_count * base_mean) / added
    added_m2 = (
        var * count - base_var * base_count - np.square(added_mean - base_mean) * base_count * added / count
    )
    return added_mean, np.maximum(added_m2, 0.0) / added, added


class NormalizerSync:
    """Combine the running statistics of each worker's ``VecNormalize`` into one shared set.

    Each worker keeps updating its own statistics with its own observations; :meth:`combine` takes what
    each worker added since the last combination (count, mean, variance), gathers these from every worker
    and merges them, in rank order, into the shared statistics, the same on every worker. The result is
    the statistics of the union of all workers' data.

    :param normalizer: this worker's ``VecNormalize``
    """

    def __init__(self, normalizer: VecNormalize) -> None:
        self.statistics = normalizer_statistics(normalizer)
        self._base = [_moments(statistics) for statistics in self.statistics]

    def broadcast(self, source: int = 0) -> None:
        """Give every worker rank ``source``'s statistics (at the start of training)."""
        if world_size() > 1 and self.statistics:
            packed = [_moments(statistics) for statistics in self.statistics]
            collective(
                dist.broadcast_object_list, packed, src=source, what="the broadcast of normalizer statistics"
            )
            for statistics, moments in zip(self.statistics, packed, strict=True):
                _set_moments(statistics, moments)
        self._base = [_moments(statistics) for statistics in self.statistics]

    def combine(self) -> None:
        """Merge every worker's statistics gathered since the last call into the shared ones."""
        if world_size() <= 1 or not self.statistics:
            return
        added = [
            moments_since(base, _moments(now)) for base, now in zip(self._base, self.statistics, strict=True)
        ]
        local = th.from_numpy(
            np.concatenate([np.concatenate([m.ravel(), v.ravel(), [c]]) for m, v, c in added])
        )
        gathered = [th.empty_like(local) for _ in range(world_size())]
        collective(dist.all_gather, gathered, local, what="the combination of normalizer statistics")
        for index, (statistics, base) in enumerate(zip(self.statistics, self._base, strict=True)):
            _set_moments(statistics, base)
            for worker in gathered:
                mean, var, count = _unpack(worker.numpy(), self._base, index)
                if count > 0:
                    statistics.update_from_moments(mean, var, count)
        self._base = [_moments(statistics) for statistics in self.statistics]


def _unpack(
    packed: np.ndarray, shapes_from: list[tuple[np.ndarray, np.ndarray, float]], index: int
) -> tuple[np.ndarray, np.ndarray, float]:
    offset = 0
    for position, (mean, _, _) in enumerate(shapes_from):
        size = mean.size
        if position == index:
            part = packed[offset : offset + 2 * size + 1]
            return part[:size].reshape(mean.shape), part[size : 2 * size].reshape(mean.shape), float(part[-1])
        offset += 2 * size + 1
    raise IndexError(index)


def check_shared_settings(model: OffPolicyAlgorithm) -> None:
    """Raise an :class:`UnshareableSettingError` when this learner's settings cannot be shared or differ
    between workers."""
    if not learner_optimizers(model):
        raise UnshareableSettingError(
            f"{type(model).__name__} has no PyTorch optimizer (an SBX learner trains with JAX), and "
            "several workers average PyTorch gradients only: train it in one process, or pick a PyTorch "
            "learner (stable-baselines3 or sb3-contrib) for several workers."
        )
    # SB3 turns the train_freq it is given into a TrainFreq in _setup_model.
    if getattr(model.train_freq, "unit", TrainFrequencyUnit.STEP) != TrainFrequencyUnit.STEP:
        raise UnshareableSettingError(
            "train_freq counted in episodes cannot be shared by several workers (their episodes end at "
            "different steps, so they would train at different times): give train_freq in steps."
        )
    mine = {name: repr(getattr(model, name)) for name in SHARED_LEARNER_SETTINGS}
    everyone: list[Any] = [None] * world_size()
    collective(dist.all_gather_object, everyone, mine, what="the check of the workers' settings")
    for name in SHARED_LEARNER_SETTINGS:
        values = [settings[name] for settings in everyone]
        if len(set(values)) > 1:
            raise UnshareableSettingError(
                f"the workers disagree on {name} ({', '.join(values)} by rank): give them all the same"
            )


class DistributedTrainingCallback(BaseCallback):
    """Share one learner's training across the workers of the default process group.

    At the start of training: check the shared settings, broadcast rank 0's learner state and normalizer
    statistics, hook the optimizers. At the end of every rollout: combine the normalizer statistics.

    :param normalizer: HER's ``VecNormalize`` whose statistics to combine, or None
    """

    def __init__(self, normalizer: VecNormalize | None = None) -> None:
        super().__init__()
        self.normalizer_sync = None if normalizer is None else NormalizerSync(normalizer)
        self.averager: GradientAverager | None = None

    def _on_training_start(self) -> None:
        assert isinstance(self.model, OffPolicyAlgorithm)
        check_shared_settings(self.model)
        broadcast_learner_state(self.model)
        if self.normalizer_sync is not None:
            self.normalizer_sync.broadcast()
        self.averager = GradientAverager(learner_optimizers(self.model))
        self.averager.attach()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.normalizer_sync is not None:
            self.normalizer_sync.combine()

    def _on_training_end(self) -> None:
        if self.averager is not None:
            self.averager.detach()


def with_distributed_training(callback: MaybeCallback, normalizer: VecNormalize | None) -> MaybeCallback:
    """``callback`` plus a :class:`DistributedTrainingCallback` (first) when several workers train."""
    if world_size() <= 1:
        return callback
    sync = DistributedTrainingCallback(normalizer)
    if callback is None:
        return sync
    if isinstance(callback, list):
        return [sync, *callback]
    if isinstance(callback, BaseCallback):
        return [sync, callback]
    return [sync, ConvertCallback(callback)]
