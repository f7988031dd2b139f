"""Training callbacks of a run: periodic greedy evaluation, atomic checkpoints, stopping on a signal, on a
training-time budget and on non-finite parameters.

Both are stable-baselines3 callbacks (the learner calls them after every env step) that also hold the
:class:`her_wrap.HER` agent, because saving must go through HER (the learner's own ``save`` would write a
file ``HER.load`` cannot read). Both count in env steps (``num_timesteps``, all envs together), so their
frequencies mean the same with any ``n_envs`` and continue correctly in a resumed run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from her_wrap.runs.atomic import atomic_write
from her_wrap.runs.checkpoints import checkpoint_paths, save_agent, save_checkpoint
from her_wrap.runs.errors import STOP_SIGNALS, RunError, signal_status
from her_wrap.sb3.evaluation import EvaluationResult, evaluate_agent

if TYPE_CHECKING:
    from her_wrap.sb3.her import HER


def _next_multiple(value: int, step: int) -> int:
    return (value // step + 1) * step


class SuccessEvalCallback(BaseCallback):
    """Evaluate the agent greedily every ``eval_freq`` env steps and once more when training ends.

    Writes ``evaluations.npz`` with the arrays of stable-baselines3's ``EvalCallback`` (``timesteps``,
    ``results``, ``ep_lengths``, ``successes``: one row per evaluation, one column per episode), plus
    ``train_seconds``: the wall time this process had trained when each evaluation ran, the evaluations'
    own time left out (curves of success against wall-clock minutes), and saves
    the agent as ``best_model.zip`` whenever an evaluation beats every earlier one (higher success rate,
    then higher mean return). The evaluation env returns raw observations; a normalizing agent normalizes
    them in ``predict`` with its current statistics.

    :param agent: the :class:`her_wrap.HER` being trained
    :param eval_env: a ``VecEnv`` of monitored goal envs
    :param eval_freq: env steps between evaluations; ``<= 0`` disables evaluation
    :param n_eval_episodes: episodes per evaluation
    :param evaluations_path: where to write ``evaluations.npz``, or ``None``
    :param best_model_path: where to save the best agent, or ``None``
    :param after_evaluation: called with each result; returning ``False`` stops training (Optuna pruning)
    :param max_train_seconds: stop training once its wall time, evaluations left out, passes this budget
        (a last evaluation then closes the curve); ``None``: no budget
    :param verbose: 1 prints each evaluation
    """

    def __init__(
        self,
        agent: HER,
        eval_env: Any,
        *,
        eval_freq: int,
        n_eval_episodes: int,
        evaluations_path: Path | None = None,
        best_model_path: Path | None = None,
        after_evaluation: Callable[[EvaluationResult], bool] | None = None,
        max_train_seconds: float | None = None,
        verbose: int = 1,
    ) -> None:
        super().__init__(verbose=verbose)
        self.agent = agent
        self.eval_env = eval_env
        self.eval_freq = eval_freq
        self.n_eval_episodes = n_eval_episodes
        self.evaluations_path = evaluations_path
        self.best_model_path = best_model_path
        self.after_evaluation = after_evaluation
        self.max_train_seconds = max_train_seconds
        self.results: list[tuple[int, EvaluationResult]] = []
        self.train_seconds: list[float] = []
        self._clock_start = time.perf_counter()
        self._evaluation_seconds = 0.0
        self.best: EvaluationResult | None = None
        self.stopped_early = False
        self._next_evaluation = 0

    def _on_training_start(self) -> None:
        self._clock_start = time.perf_counter()
        self._evaluation_seconds = 0.0
        if self.eval_freq > 0:
            self._next_evaluation = _next_multiple(self.num_timesteps, self.eval_freq)

    @property
    def evaluation_seconds(self) -> float:
        """Wall time spent in evaluations since training started."""
        return self._evaluation_seconds

    def curve(self) -> tuple[list[int], list[float], list[float]]:
        """The success curve so far: env steps, success rate and training seconds of each evaluation."""
        steps = [timesteps for timesteps, _ in self.results]
        return steps, [result.success_rate for _, result in self.results], list(self.train_seconds)

    def _on_step(self) -> bool:
        if self.max_train_seconds is not None:
            trained = time.perf_counter() - self._clock_start - self._evaluation_seconds
            if trained >= self.max_train_seconds:
                return False
        if self.eval_freq <= 0 or self.num_timesteps < self._next_evaluation:
            return True
        self._next_evaluation = _next_multiple(self.num_timesteps, self.eval_freq)
        return self.evaluate()

    def _on_training_end(self) -> None:
        already_evaluated = bool(self.results) and self.results[-1][0] == self.num_timesteps
        if self.eval_freq > 0 and not self.stopped_early and not already_evaluated:
            self.evaluate()

    def evaluate(self) -> bool:
        """Run one evaluation now; return whether training should go on."""
        started = time.perf_counter()
        self.train_seconds.append(started - self._clock_start - self._evaluation_seconds)
        result = evaluate_agent(self.agent, self.eval_env, self.n_eval_episodes)
        self.results.append((self.num_timesteps, result))
        if self.verbose >= 1:
            print(f"Eval num_timesteps={self.num_timesteps}: {result.summary()}", flush=True)
        self.logger.record("eval/success_rate", result.success_rate)
        self.logger.record("eval/mean_reward", result.mean_return)
        self.logger.record("eval/mean_ep_length", result.mean_length)
        self.logger.dump(self.num_timesteps)
        if self.evaluations_path is not None:
            self._write_evaluations(self.evaluations_path)
        if self.best is None or result.ranking_key() > self.best.ranking_key():
            self.best = result
            if self.best_model_path is not None:
                save_agent(self.agent, self.best_model_path)
        self._evaluation_seconds += time.perf_counter() - started
        if self.after_evaluation is not None and not self.after_evaluation(result):
            self.stopped_early = True
            return False
        return True

    def _write_evaluations(self, path: Path) -> None:
        # Episodes per evaluation are fixed, so the rows stack into 2-D arrays as SB3 writes them.
        arrays = {
            "timesteps": np.array([timesteps for timesteps, _ in self.results]),
            "results": np.array([result.returns for _, result in self.results]),
            "ep_lengths": np.array([result.lengths for _, result in self.results]),
            "successes": np.array([result.successes for _, result in self.results]),
            "train_seconds": np.array(self.train_seconds),
        }
        atomic_write(path, lambda temporary: np.savez(temporary, **arrays))  # type: ignore[arg-type]


class CheckpointCallback(BaseCallback):
    """Save an atomic checkpoint (agent and replay buffer) every ``save_freq`` env steps.

    The checkpoint named after N env steps is saved once the training cycle that reached N has stored its
    steps and made its gradient steps (when the next cycle starts collecting, or when training ends): it is
    where a run of ``-n N`` ends, which also finishes that cycle first (the same agent when nothing is
    scheduled over the budget, as DQN's exploration is), and a run resumed from it owes no updates. With
    ``save_freq`` a multiple of the env steps per cycle the agent has exactly N env steps; otherwise it has
    those of the cycle's end (its ``num_timesteps``, where a resumed run carries on). Checkpoints that fall
    due in one cycle (``save_freq`` shorter than a cycle) are all that same agent; the replay buffer is kept
    with the last of them.

    With several workers every worker trains with one: worker 0 saves the agent and its replay buffer, each
    other worker its own replay buffer, at the same steps.

    See :mod:`her_wrap.runs.checkpoints` for the files and why a kill during a save is harmless.

    :param agent: the :class:`her_wrap.HER` being trained
    :param run_dir: the run folder
    :param save_freq: env steps between checkpoints; ``<= 0`` disables them
    :param verbose: 1 prints each checkpoint
    :param rank: this worker's rank
    :param synchronize: a barrier of the workers (``None`` when training alone)
    """

    def __init__(
        self,
        agent: HER,
        run_dir: Path,
        save_freq: int,
        verbose: int = 1,
        *,
        rank: int = 0,
        synchronize: Callable[[], None] | None = None,
    ):
        super().__init__(verbose=verbose)
        self.agent = agent
        self.run_dir = run_dir
        self.save_freq = save_freq
        self.rank = rank
        self.synchronize = synchronize
        self._next_save = 0
        self._due: list[int] = []  # env steps naming the checkpoints to save once this cycle has trained

    def _on_training_start(self) -> None:
        if self.save_freq > 0:
            self._next_save = _next_multiple(self.num_timesteps, self.save_freq)

    def _on_step(self) -> bool:
        if self.save_freq <= 0 or self.num_timesteps < self._next_save:
            return True
        self._next_save = _next_multiple(self.num_timesteps, self.save_freq)
        self._due.append(self.num_timesteps)
        return True

    def _on_rollout_start(self) -> None:
        self._save_if_due()

    def _on_training_end(self) -> None:
        self._save_if_due()

    def _save_if_due(self) -> None:
        due, self._due = self._due, []
        for timesteps in due[:-1] if self.rank == 0 else ():  # fell due earlier in the cycle: no buffer
            model = checkpoint_paths(self.run_dir, timesteps)[0]
            save_agent(self.agent, model)
            if self.verbose >= 1:
                print(f"Saved checkpoint {model}", flush=True)
        if due:
            saved = save_checkpoint(
                self.agent, self.run_dir, due[-1], rank=self.rank, synchronize=self.synchronize
            )
            if self.verbose >= 1:
                print(f"Saved checkpoint {saved.model}", flush=True)


def stop_announcement(signum: int) -> str:
    """How a run's first line after a stop signal begins (``"SIGTERM: stopping"``): a process that runs
    ``her-wrap train`` and reads its output tells by it that the run received the signal itself and saves."""
    return f"{signal.Signals(signum).name}: stopping"


def announces_stop(line: str) -> bool:
    """Whether ``line`` holds a run's announcement that it received SIGINT or SIGTERM (:func:`stop_announcement`).

    The announcement may follow the start of another line: a signal handler runs between a ``print``'s text
    and its line end."""
    return any(stop_announcement(signum) in line for signum in STOP_SIGNALS)


def _say_from_handler(line: str) -> None:
    """Print ``line`` from a signal handler.

    A handler runs wherever the main thread is, possibly inside a write to stdout that the signal
    interrupted (a full pipe to the process reading the run's output): printing there raises
    ``RuntimeError: reentrant call`` into the training loop. The line then goes straight to stdout's file
    descriptor instead.
    """
    try:
        print(line, flush=True)
    except RuntimeError:
        try:
            os.write(sys.stdout.fileno(), f"{line}\n".encode())
        except (OSError, ValueError, AttributeError):
            pass  # stdout has no descriptor (or it is closed): the run goes on without the line


class SignalStop(BaseCallback):
    """End training at the next env step once SIGINT or SIGTERM arrives; a second one exits at once.

    Job schedulers send SIGTERM before they pre-empt a job, and Ctrl-C sends SIGINT: either lets the
    step in progress finish, so that the caller can save a checkpoint a resumed run starts from. While
    :meth:`handling` is active the process's handlers of both signals are this callback's; a second signal
    leaves without saving (``os._exit``, status ``128 + signal number``), for a save that hangs.

    Workers of one run must stop at the same step (each step they share is a collective), so with
    ``synchronized`` they agree at the start of every training cycle, whether any of them received a signal:
    all stop at the first step of the cycle after one did. A worker takes the same signal again for the
    same stop delivered twice (a job scheduler that signals every process of the job, as Slurm's
    ``scancel`` does, while the launcher passes the signal on), however late it comes; what stops the
    workers at once is their launcher (killing them at its second signal), or another signal.

    :param synchronized: whether this is one worker of several
    :param announce: whether to print that a signal arrived (one worker of several does)
    """

    def __init__(self, synchronized: bool = False, announce: bool = True) -> None:
        super().__init__(verbose=0)
        self.announce = announce
        #: the signal that asked this process to stop, or None
        self.received: int | None = None
        self.synchronized = synchronized
        self._agreed: int | None = None

    @property
    def stopped_by(self) -> int | None:
        """The signal that stops training (with several workers, the one they agreed on), or None."""
        return self._agreed if self.synchronized else self.received

    def _on_rollout_start(self) -> None:
        if self.synchronized:
            from her_wrap.runs.workers import largest

            self._agreed = largest(self.received or 0) or None

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.received is not None:
            if self.synchronized and signum == self.received:
                return  # the same stop, delivered both by the scheduler and by the launcher
            _say_from_handler(f"{name} again: exiting at once, without saving")
            os._exit(signal_status(signum))
        self.received = signum
        if self.announce and self.synchronized:  # the launcher says what a second signal does
            _say_from_handler(
                f"{stop_announcement(signum)} at the workers' next training cycle to save the agent"
            )
        elif self.announce:
            _say_from_handler(
                f"{stop_announcement(signum)} after this step to save the agent ({name} again exits at once)"
            )

    @contextlib.contextmanager
    def handling(self) -> Iterator[SignalStop]:
        """Handle SIGINT and SIGTERM with this callback inside the ``with`` block (main thread only;
        elsewhere the block runs with the process's handlers as they are)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_step(self) -> bool:
        return self.stopped_by is None


class TrainingTimeBudget(BaseCallback):
    """End training at the first env step of the first training cycle that starts after ``minutes`` of
    training, evaluations left out (an entry's ``max_minutes``, ``her-wrap train --max-minutes``).

    The budget counts this process's wall time since :meth:`~BaseCallback.on_training_start`, less what
    ``evaluation_seconds`` reports (the evaluation callback's :attr:`SuccessEvalCallback.evaluation_seconds`).
    Workers of one run stop at the same step: with ``synchronized`` they agree at the start of every cycle on
    the clock of the one that ``leads`` (worker 0, the one that evaluates; the others wait out its
    evaluations in their next collective, so their own clocks would count them).

    :param minutes: the training budget
    :param evaluation_seconds: wall time spent evaluating so far (``None``: no evaluations)
    :param synchronized: whether this is one worker of several
    :param leads: whether this process's clock decides (with ``synchronized``, worker 0)
    """

    def __init__(
        self,
        minutes: float,
        evaluation_seconds: Callable[[], float] | None = None,
        *,
        synchronized: bool = False,
        leads: bool = True,
    ) -> None:
        super().__init__(verbose=0)
        self.minutes = float(minutes)
        self.evaluation_seconds = evaluation_seconds
        self.synchronized = synchronized
        self.leads = leads
        #: whether the budget stopped training
        self.spent = False
        self._clock_start = time.perf_counter()

    def _on_training_start(self) -> None:
        self._clock_start = time.perf_counter()
        self.spent = False

    def trained_seconds(self) -> float:
        """Wall time trained since training started, evaluations left out."""
        evaluating = self.evaluation_seconds() if self.evaluation_seconds is not None else 0.0
        return time.perf_counter() - self._clock_start - evaluating

    def _on_rollout_start(self) -> None:
        due = self.leads and self.trained_seconds() >= 60.0 * self.minutes
        if self.synchronized:
            from her_wrap.runs.workers import largest

            due = bool(largest(int(due)))
        self.spent = due

    def _on_step(self) -> bool:
        return not self.spent


class FiniteParameters(BaseCallback):
    """Stop a run whose learner's parameters turned NaN or infinite (a diverged loss) before anything saves
    them: one ``isfinite`` over the policy's tensors when a training round has run, every ``every`` env
    steps, and in :meth:`check` (before the final save).

    Put it before the checkpoint callback, with ``every`` dividing its ``save_freq``: the check then runs
    at the start of every rollout that begins with a checkpoint, and before it.

    :param every: env steps between two checks
    :param last_checkpoint: gives the newest checkpoint's path (or None), to name it in the message
    """

    def __init__(self, every: int, last_checkpoint: Callable[[], Path | None]) -> None:
        super().__init__(verbose=0)
        self.every = max(1, int(every))
        self.last_checkpoint = last_checkpoint
        self._next_check = 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        if self.num_timesteps >= self._next_check:
            self._next_check = _next_multiple(self.num_timesteps, self.every)
            self.check()

    def check(self) -> None:
        """Raise :class:`~her_wrap.runs.errors.RunError` when a parameter of the policy is not finite."""
        import torch

        policy = getattr(self.model, "policy", None)
        if not isinstance(policy, torch.nn.Module):
            return  # SBX's JAX learners hold no torch tensors
        with torch.no_grad():
            finite = all(bool(torch.isfinite(tensor).all()) for tensor in policy.parameters())
        if not finite:
            kept = self.last_checkpoint()
            raise RunError(
                f"the learner's parameters turned NaN or infinite by step {self.num_timesteps} (its loss "
                f"diverged); nothing was saved after it. The last good checkpoint: {kept or 'none'}. Try a "
                "lower learning_rate, clip_target, or normalize: true."
            )
