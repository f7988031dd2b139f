"""``her-wrap train``: train a HER agent from a config entry into a new ``logs/her/ENV_ID_N`` folder.

Reads the entry (``-c``, default ``configs/her.yml``), makes ``n_envs`` monitored envs, builds the HER
agent (which normalizes observations itself when the entry says so), trains with periodic greedy
evaluation and optional atomic checkpoints, and saves the final agent. See
:mod:`her_wrap.runs.run_layout` for the files.

``-i PATH`` continues a saved agent (a run folder, a checkpoint or a model zip; see
:func:`her_wrap.runs.checkpoints.resolve_saved_agent`) with its replay buffer and normalization statistics
(their updates go on), into a new run folder. Its timestep count carries on, and training stops when it reaches ``n_timesteps``:
a run killed at step 6,000 of 10,000 and resumed from its 5,000-step checkpoint trains 5,000 more steps.
To train a finished agent further, raise ``-n``. The resumed run's envs, exploration and sampling go on
with :func:`resumed_seed` of its seed and step count, so that they do not start their streams over.

``--workers N`` (or the entry's ``workers: N``) trains with N worker processes on this machine; see
:mod:`her_wrap.runs.workers`.

``--max-minutes M`` (or the entry's ``max_minutes: M``) bounds the training time: once the run has trained M
minutes, evaluations left out, it stops at the start of its next training cycle (every worker at the same
step) and ends as a finished run does, with a last evaluation and the final agent saved, short of
``n_timesteps``. ``-params max_minutes:null`` trains all ``n_timesteps`` whatever the entry says. A
resumed run counts its minutes afresh.

SIGINT (Ctrl-C) or SIGTERM (a job scheduler about to pre-empt) stops a one-worker run at the next env step,
and the workers of several at the first step of their next training cycle, all at the same one: the agent, its
normalization statistics and, with ``--save-replay-buffer`` or ``--save-freq``, its replay buffers are saved
as the checkpoint of that step, one line says where, and the exit status is 128 + the signal's number (130 for SIGINT, 143 for
SIGTERM); a second signal exits at once, saving nothing more. A run that cannot go on (a corrupt saved agent,
a full disk, NaN from the env, a diverged learner) ends in one line and status 3, bad input in one line and
status 2; docs/troubleshooting.md says what to do in each case.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from her_wrap.envs.checks import NonFiniteDataError
from her_wrap.runs import arguments, launcher, train_endings, workers
from her_wrap.runs.atomic import remove_stale_temporaries
from her_wrap.runs.checkpoints import (
    SavedAgent,
    newest_checkpoint,
    resolve_saved_agent,
    save_agent,
    save_normalizer,
    worker_replay_buffer_path,
)
from her_wrap.runs.env_factory import (
    EVAL_SEED_OFFSET,
    TrainingEnvs,
    check_env_id,
    ensure_registered,
    make_training_envs,
)
from her_wrap.runs.errors import RunError, UsageError
from her_wrap.runs.run_layout import RunLayout, new_run
from her_wrap.runs.yaml_io import write_yaml_file

if TYPE_CHECKING:
    from her_wrap.runs.callbacks import SignalStop

#: Env steps between two checks that the learner's parameters are finite (a divisor of ``--save-freq``
#: is used instead when it is smaller, so that every checkpoint is checked).
FINITE_CHECK_STEPS = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    arguments.add_run_arguments(parser)
    parser.add_argument(
        "--eval-freq",
        type=int,
        default=10_000,
        help="env steps between evaluations; <= 0 disables (default: 10000)",
    )
    parser.add_argument(
        "--save-freq", type=int, default=-1, help="env steps between checkpoints; <= 0 disables (default)"
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar (default: only when stdout is a terminal)",
    )
    parser.add_argument(
        "-tb",
        "--tensorboard",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="write TensorBoard logs to DIR (default DIR: LOG_FOLDER/her/tensorboard)",
    )
    parser.add_argument(
        "--save-replay-buffer",
        action="store_true",
        help="also save the final replay buffer (replay_buffer.pkl)",
    )
    parser.add_argument(
        "-i",
        "--trained-agent",
        type=Path,
        default=None,
        metavar="PATH",
        help="continue a saved agent (see above)",
    )
    parser.add_argument(
        "--log-interval", type=int, default=100, help="episodes between training log tables (default: 100)"
    )
    parser.add_argument(
        "--max-minutes",
        type=arguments.positive_float,
        default=None,
        metavar="M",
        help="stop after M minutes of training, evaluations left out, and save the final agent "
        "(replaces the entry's max_minutes; default: the entry's, else no limit but -n)",
    )
    launcher.add_arguments(parser)


def _tensorboard_dir(args: argparse.Namespace) -> str | None:
    if args.tensorboard is None:
        return None
    return args.tensorboard or str(Path(args.log_folder) / "her" / "tensorboard")


def resumed_seed(seed: int, timesteps: int) -> int:
    """The seed a run started with ``seed`` goes on with when it resumes at ``timesteps``.

    A resumed run that reseeded its envs, exploration and sampling with ``seed`` itself would start their
    streams over: its training envs would replay the initial states of the run's first episodes, and its
    evaluations the first evaluation's episodes. Derived from both numbers, the seed gives new streams at
    every resume point and the same ones when the same checkpoint is resumed again. Below ``2**31``, so
    that the env offsets added to it stay valid NumPy seeds.
    """
    if timesteps < 0:
        raise ValueError(f"timesteps must be >= 0, got {timesteps}")
    state = np.random.SeedSequence([seed & 0xFFFFFFFF, timesteps]).generate_state(1, dtype=np.uint32)
    return int(state[0] >> 1)


def _load_agent(
    saved: SavedAgent, envs: TrainingEnvs, args: argparse.Namespace, seed: int, rank: int = 0
) -> Any:
    """Load ``saved`` onto ``envs``, reseeded with :func:`resumed_seed` at its timestep count, with worker
    ``rank``'s replay buffer (worker 0's when that worker's was not saved)."""
    from her_wrap import HER

    agent = HER.load(
        str(saved.model),
        env=envs.train,
        normalize_training=True,
        device=args.device,
        verbose=args.verbose,
        tensorboard_log=_tensorboard_dir(args),
    )
    seed = resumed_seed(seed, int(agent.model.num_timesteps))
    agent.model.set_random_seed(seed)  # also seeds the training envs' next reset: seed + i for env i
    envs.evaluate.seed(seed + EVAL_SEED_OFFSET)
    print(f"Envs, exploration and sampling go on with seed {seed} (resumed_seed)", flush=True)
    if saved.replay_buffer is not None:
        own = worker_replay_buffer_path(saved.replay_buffer, rank)
        if not own.is_file():
            print(f"Note: worker {rank} has no replay buffer saved ({own}); loading worker 0's", flush=True)
            own = saved.replay_buffer
        agent.load_replay_buffer(str(own))
        print(f"Loaded the replay buffer {own}", flush=True)
    else:
        print(f"Note: no replay buffer saved with {saved.model}; continuing with an empty one", flush=True)
    return agent


def _config_source(args: argparse.Namespace, saved: SavedAgent | None) -> Path:
    if args.conf is not None:
        return args.conf
    if saved is not None and saved.run is not None:
        if saved.run.env_id != args.env:
            raise UsageError(f"{saved.model} was trained on {saved.run.env_id}, not {args.env}")
        return saved.run.config_path
    return arguments.default_config_path()


def train(args: argparse.Namespace) -> RunLayout:
    """Run ``her-wrap train`` with parsed arguments; return the layout of the new run folder."""
    from her_wrap.runs.callbacks import SignalStop

    ensure_registered(args.env)
    worker = workers.join_workers(args)  # rank 0 of 1 unless started as one of several workers
    # Several workers stop at the same step. They take the stop's signals from the start: the launcher passes
    # a stop on to every worker, and one still setting up then stops with the others instead of dying of it.
    stop = SignalStop(synchronized=worker.world > 1, announce=worker.leads)
    with stop.handling() if worker.world > 1 else contextlib.nullcontext():
        return _train(args, worker, stop)


def _train(args: argparse.Namespace, worker: workers.Worker, stop: SignalStop) -> RunLayout:
    """:func:`train` once this process joined its workers; ``stop`` handles the signals that stop the run
    (one process: from the line that says training starts)."""
    from her_wrap.runs.callbacks import CheckpointCallback, FiniteParameters, SuccessEvalCallback
    from her_wrap.runs.model_factory import build_agent

    workers.resume_restarted_run(args)  # a restarted group goes on from its newest checkpoint
    saved = resolve_saved_agent(args.trained_agent) if args.trained_agent is not None else None
    if saved is not None and saved.run is not None and worker.leads:
        remove_stale_temporaries(saved.run.run_dir)  # what a kill left half written there
    config_source = _config_source(args, saved)
    notes: list[str] = []
    config = arguments.command_config(args, config_source, notes)
    if getattr(args, "max_minutes", None) is not None:
        config = dataclasses.replace(config, max_minutes=args.max_minutes)
    check_env_id(config.env_id, config.env_kwargs)
    seed = args.seed if args.seed is not None else arguments.draw_seed()
    if worker.leads:
        for note in notes:
            print(note, flush=True)
    seed = worker.seed(seed)
    args.num_threads = arguments.torch_threads(args.num_threads, config.num_threads)
    arguments.set_torch_threads(args.num_threads)

    layout = RunLayout(worker.run_dir(lambda: new_run(args.log_folder, config.env_id).run_dir), config.env_id)
    envs: TrainingEnvs | None = None
    try:
        envs = make_training_envs(
            config, seed, vec_env=args.vec_env, monitor_dir=layout.run_dir if worker.leads else None
        )
        if saved is None:
            agent = build_agent(
                config,
                envs.train,
                seed=seed,
                verbose=args.verbose,
                device=args.device,
                tensorboard_log=_tensorboard_dir(args),
            )
        else:
            agent = _load_agent(saved, envs, args, seed, worker.rank)
        initial_timesteps = int(agent.model.num_timesteps) if saved is not None else 0
        remaining = config.n_timesteps - initial_timesteps
        if remaining <= 0:
            raise UsageError(
                f"{saved.model if saved else 'the agent'} has already trained {initial_timesteps} steps, "
                f"n_timesteps is {config.n_timesteps}: pass a larger -n to train further"
            )
    except BaseException:
        if envs is not None:
            envs.close()
        if worker.leads:
            shutil.rmtree(layout.run_dir, ignore_errors=True)
        raise
    if not worker.leads:
        return train_endings.follow(
            agent,
            envs,
            remaining,
            args,
            worker=worker,
            stop=stop,
            budget=train_endings.time_budget(config, worker),
            reset_num_timesteps=saved is None,
            layout=layout,
        )

    write_yaml_file(layout.config_path, {config.env_id: config.to_entry()})
    recorded = arguments.plain_arguments(args)
    recorded.update(
        conf=str(config_source),
        seed=seed,
        run_dir=str(layout.run_dir),
        trained_agent=str(saved.model) if saved is not None else None,
        trained_replay_buffer=str(saved.replay_buffer) if saved is not None and saved.replay_buffer else None,
        initial_timesteps=initial_timesteps,
    )
    write_yaml_file(layout.args_path, recorded)
    # From the line that says training starts, a stop's signal saves the agent (a process that signals the
    # run once it reads that line, as an optimize trial does, finds it stopping well). A stopped run saves
    # with the handlers still on: a repeat of the stop's signal is still the stop.
    with stop.handling():
        print(f"Run folder: {layout.run_dir}", flush=True)
        print(
            f"Training HER({config.model_class}, {config.policy}) on {config.env_id} for {remaining} steps "
            f"{f'on each of {worker.world} workers ({remaining * worker.world} in all) ' if worker.world > 1 else ''}"
            f"(seed {seed}{f', from step {initial_timesteps}' if initial_timesteps else ''})",
            flush=True,
        )

        evaluation = SuccessEvalCallback(
            agent,
            envs.evaluate,
            eval_freq=args.eval_freq,
            n_eval_episodes=args.eval_episodes,
            evaluations_path=layout.evaluations_path,
            best_model_path=layout.best_model_path,
            verbose=args.verbose,
        )
        checkpoints = CheckpointCallback(
            agent, layout.run_dir, args.save_freq, verbose=args.verbose, synchronize=worker.synchronize
        )
        # Checked whenever a checkpoint falls due, so that none holds a diverged learner.
        every = math.gcd(FINITE_CHECK_STEPS, args.save_freq) if args.save_freq > 0 else FINITE_CHECK_STEPS
        finite = FiniteParameters(every, lambda: newest_checkpoint(layout.run_dir))
        budget = train_endings.time_budget(config, worker, lambda: evaluation.evaluation_seconds)
        try:
            agent.learn(
                remaining,
                callback=[finite, evaluation, checkpoints, stop, *([budget] if budget is not None else [])],
                log_interval=args.log_interval,
                tb_log_name=layout.run_dir.name,
                reset_num_timesteps=saved is None,
                progress_bar=arguments.progress_bar_enabled(args.progress),
            )
        except KeyboardInterrupt:
            print("Interrupted: saving the agent as it is", flush=True)
        except NonFiniteDataError as error:
            envs.close()
            raise RunError(f"{config.env_id}: {error}") from None
        finite.check()
        if stop.stopped_by is not None:
            train_endings.end_stopped(
                agent, envs, layout, train_endings.stop_keeps_replay_buffer(args), stop.stopped_by, worker
            )
    if budget is not None and budget.spent:
        print(
            f"Trained {config.max_minutes:g} minutes (max_minutes), evaluations left out: stopped at step "
            f"{agent.model.num_timesteps} of {config.n_timesteps}"
            f"{' on each worker' if worker.world > 1 else ''}",
            flush=True,
        )
    save_agent(
        agent,
        layout.final_model_path,
        replay_buffer_path=layout.replay_buffer_path if args.save_replay_buffer else None,
    )
    save_normalizer(agent, layout.vecnormalize_path)
    envs.close()
    print(f"Saved the final agent to {layout.final_model_path}", flush=True)
    if evaluation.results:
        timesteps, last = evaluation.results[-1]
        print(f"Last evaluation (step {timesteps}): {last.summary()}", flush=True)
    workers.leave_workers()
    return layout


def _entry_workers(args: argparse.Namespace) -> int:
    """Worker processes the run's config entry asks for (its ``workers``, else 1).

    ``-i RUN_FOLDER`` becomes the file it resolves to, so that :func:`train` (in every worker) loads that
    file and the choice, with what it skipped, is made and reported once.
    """
    saved = resolve_saved_agent(args.trained_agent) if args.trained_agent is not None else None
    if saved is not None:
        args.trained_agent = saved.model
    return arguments.command_config(args, _config_source(args, saved)).workers or 1


def run(args: argparse.Namespace) -> int:
    if not workers.under_torchrun():
        if args.workers is None:
            ensure_registered(args.env)
            entry_workers = _entry_workers(args)
            if entry_workers > 1:
                print(f"{args.env}: the entry's workers: {entry_workers} (--workers replaces it)", flush=True)
                args.workers = entry_workers
        if (args.workers or 1) > 1:
            return launcher.launch(args, run)
    launcher.check_launcher_options(args)
    train(args)
    if workers.under_torchrun():
        workers.exit_worker(0)  # a worker of several ends without the interpreter's teardown
    return 0
