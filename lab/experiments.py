"""The manipulation experiments of ``docs/research/robotics.md``: tasks, one-change variants, and their runs.

A row of the manipulation table is ``her-wrap train`` with the shipped ``configs/her.yml`` entry of a task
(:data:`ENTRY_TASKS`), possibly changed by a :data:`VARIANTS` entry (``-params`` items; several joined
by ``+`` combine their changes), one run per seed; the reference rows run stable-baselines3's own learner and ``HerReplayBuffer`` with
rl-baselines3-zoo's entry for the task (:data:`REFERENCE_TASKS`). :func:`check_shipped_entry` makes sure a
recorded run folder ran the row's recipe, and :func:`record_entry_run` turns such a folder into a result
record (see :mod:`lab.results`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from her_wrap.core.settings import HindsightSettings
from her_wrap.runs.arguments import DEFAULT_CONFIG, default_config_path
from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import StoppedBySignal, UsageError
from her_wrap.runs.run_config import build_run_config
from her_wrap.runs.run_layout import RunLayout, layout_of
from her_wrap.runs.yaml_io import load_yaml_file
from her_wrap.runs.zoo_translation import parse_literal_strings
from her_wrap.sb3.learners import LEARNERS
from lab.results import record_label
from lab.training_child import train_in_child

#: Env steps between two points of a curve, and fresh episodes per point, of a manipulation row.
ENTRY_EVAL_FREQ, ENTRY_EVAL_EPISODES = 20_000, 50
#: Fresh episodes of the end figure of every row (the final agent's greedy success).
FINAL_EPISODES = 100
#: Env steps between two checkpoints of a manipulation run.
ENTRY_SAVE_FREQ = 100_000


@dataclass(frozen=True)
class EntryTask:
    """A manipulation row: ``her-wrap train`` with the shipped entry of ``env_id`` in ``configs/<config>``.

    :param steps: env steps of a run (``-n``), all workers' together
    :param eval_freq: env steps between two points of the curve, all workers' together
    :param eval_episodes: fresh episodes per point
    :param config: the shipped hyperparameter file of the entry (``her.yml``: what ``her-wrap train`` reads
        without ``-c``; ``her_jax.yml``: the SBX learners' entries)
    :param workers: worker processes the run trains on: the entry's own ``workers`` (its settings each
        worker's as they stand), or a workers variant's (:data:`VARIANT_WORKERS`, :meth:`with_variant`)
    """

    env_id: str
    steps: int
    eval_freq: int = ENTRY_EVAL_FREQ
    eval_episodes: int = ENTRY_EVAL_EPISODES
    config: str = DEFAULT_CONFIG.name
    workers: int = 1

    def config_path(self) -> Path:
        """The shipped file of the entry, beside the ``configs/her.yml`` that ``her-wrap train`` reads."""
        return default_config_path().with_name(self.config)

    def train_arguments(
        self, seed: int, overrides: tuple[str, ...] = (), *, config_file: str | None = None
    ) -> list[str]:
        """The ``her-wrap train`` arguments of one seed (what a recorded run folder is checked against).

        With :attr:`workers` above 1, every step count is one worker's share (``her-wrap train --workers``
        counts one worker's env steps), so the run covers :attr:`steps` env steps in all. ``config_file``
        replaces the ``-c configs/...`` path of an entry outside ``configs/her.yml`` (the file to read).
        """
        config = config_file or str(DEFAULT_CONFIG.with_name(self.config))
        workers = self.workers
        return [
            "--env", self.env_id, "--seed", str(seed), "-n", str(self.steps // workers),
            "--eval-freq", str(self.eval_freq // workers), "--eval-episodes", str(self.eval_episodes),
            "--save-freq", str(ENTRY_SAVE_FREQ // workers),
            *(["-c", config] if self.config != DEFAULT_CONFIG.name else []),
            *(["--workers", str(workers)] if workers > 1 else []),
            *(["-params", *overrides] if overrides else []),
        ]  # fmt: skip

    def with_variant(self, variant: str | None) -> EntryTask:
        """The task a row of ``variant`` runs: with the variant's budget (``budget-1m``: ``-n 1000000``)
        and its workers (``workers-2``: 2, ``one-process``: 1; :func:`variant_workers`); itself when the
        variant sets neither."""
        budget, workers = variant_budget(variant), variant_workers(variant)
        if budget is None and workers is None:
            return self
        return dataclasses.replace(
            self,
            steps=self.steps if budget is None else budget,
            workers=self.workers if workers is None else workers,
        )


#: The manipulation rows: each task's ``steps`` is its shipped entry's ``n_timesteps`` on each of its
#: ``workers`` (the budget of its target), so a row's command and ``her-wrap train --env ID`` train the same
#: agent.
ENTRY_TASKS: dict[str, EntryTask] = {
    # Two workers (the entry's ``workers: 2``), 250k env steps each.
    "fetch-push-ddpg": EntryTask("FetchPush-v4", 500_000, workers=2),
    # The budget of its target, 0.9 within 60 minutes (the rows of 1M and 1.5M env steps: budget-1m and
    # budget-1.5m).
    "fetch-pick-and-place-ddpg": EntryTask("FetchPickAndPlace-v4", 600_000),
    # Two workers (the entry's ``workers: 2``), 1M env steps each; its 115-minute limit may stop a run sooner.
    # The one-process entry before it trained 2.5M (budget-2.5m), and before the goal mix 1.5M (budget-1.5m).
    "fetch-slide-ddpg": EntryTask("FetchSlide-v4", 2_000_000, workers=2),
    # The budget of its target, 0.9 within 20 minutes (the rows of 600k env steps, with uniform draws then:
    # no-movement+budget-600k).
    "panda-push-ddpg": EntryTask("PandaPush-v3", 440_000),
    # The budget of its target, 0.8 within 2 hours (the first row, before the entry took grasp_start 0.5,
    # ran 800k env steps: no-grasp-start+budget-800k).
    "panda-pick-and-place-ddpg": EntryTask("PandaPickAndPlace-v3", 900_000),
    # SBX's CrossQ (JAX) in the regime of the one-process PyTorch entry then (configs/her_jax.yml): which
    # learner reaches 0.9 on FetchPush first in wall time. Its budget, 400k env steps: about that entry's env
    # steps to 0.9 when the row ran (440k-460k on seeds 0-2 with uniform draws; 280k-400k on seeds 0-4 once
    # it drew by movement); CrossQ costs more per update, so it wins only if it gets there sooner.
    "fetch-push-sbx-crossq": EntryTask("FetchPush-v4", 400_000, config="her_jax.yml"),
}

#: The variant that trains an entry tuned for several workers in one process (:data:`VARIANTS`).
ONE_PROCESS = "one-process"

#: ``-params`` items that draw transitions uniformly (no ``movement_clip``; ``movement_floor`` at its default).
UNIFORM_DRAWS = ("her.movement_clip:null", f"her.movement_floor:{HindsightSettings().movement_floor}")

#: Changes to the shipped entry that a manipulation row can measure, one at a time (``--variant NAME``):
#: ``-params`` items of ``her-wrap train``. Rows of a variant are keyed ``TASK+NAME``.
VARIANTS: dict[str, tuple[str, ...]] = {
    # Half of the relabeled goals from other episodes' desired goals: with 4 relabeled goals per kept one,
    # 2 future and 2 desired per transition on average (mrl's "futureactual_2_2").
    "goal-mix": ("her.goal_mix:{future: 0.5, desired: 0.5}",),
    # Relabeled goals from the episode's future alone: the FetchSlide entry before it took the goal mix.
    "no-goal-mix": ("her.goal_mix:null",),
    # LaBER over the recipe's batch: score 4 x 2048 transitions, train on 2048 of them.
    "laber-mean": ("her.laber:LaBERmean", "her.laber_m:4"),
    # LaBER's premise at the recipe's cost: score a large batch of 2048, back-propagate through 512.
    "laber-mean-512": ("her.laber:LaBERmean", "her.laber_m:4", "batch_size:512"),
    # Prioritized replay (proportional, alpha 0.6, beta 0.4) instead of the entry's draw weights (FetchPush's
    # movement weights and priorities both set how often a transition is drawn).
    "per": (*UNIFORM_DRAWS, "her.prioritized:true"),
    # Twice the gradient steps per cycle: 40 of batch 2048 every 500 env steps (0.08 per env step).
    "updates-40": ("gradient_steps:40",),
    # 20 gradient steps per cycle: the manipulation entries' count, and the FetchSlide entry's before it took 40.
    "updates-20": ("gradient_steps:20",),
    # The learning rate decayed linearly from 1e-3 to 0 over the run (the zoo's lin_ form), so the last
    # updates move the networks least. On FetchSlide seed 0 its evaluations still swung 0.70-0.96 after 1.5M
    # env steps, as with the constant rate; its final agent scored 0.86 against 0.82.
    "lr-linear": ("learning_rate:lin_1e-3",),
    # A constant learning rate of 1e-3: the FetchSlide entry before it took the decayed one.
    "lr-constant": ("learning_rate:1e-3",),
    # TD3 instead of DDPG (twin critics, target policy smoothing, the actor updated every second step).
    "td3": ("model_class:td3",),
    # Eight relabeled goals per kept one: 8/9 of each batch relabeled instead of 4/5 (FetchPush's entry
    # ships 8; the other manipulation entries keep 4).
    "n-sampled-goal-8": ("her.n_sampled_goal:8",),
    # Four relabeled goals per kept one: the FetchPush entry before it took 8, and its variants' base then.
    "n-sampled-goal-4": ("her.n_sampled_goal:4",),
    # More envs stepped in lockstep: a cycle of train_freq steps then covers 4 (8) envs' steps, so the
    # gradient steps per env step halve (quarter).
    "envs-4": ("n_envs:4",),
    "envs-8": ("n_envs:8",),
    # Five envs in lockstep for 50 steps per cycle, one episode of each: on FetchPush's two workers a cycle is
    # still 500 env steps for the same 20 gradient steps, while the collection loop's work per step (one
    # exploration forward pass, the normalization statistics, SB3's loop) covers five env steps, not two.
    "envs-5-steps-50": ("n_envs:5", "train_freq:[50,step]"),
    # Two envs for 125 steps per cycle: the FetchPush entry before it took five envs.
    "envs-2-steps-125": ("n_envs:2", "train_freq:[125,step]"),
    # An L2 penalty of 0.01 on the actor's actions instead of 1.0 (mrl's FetchSlide recipe): a slide needs a
    # hard hit, which the penalty of 1.0 may hold back.
    "action-l2-0.01": ("her.action_l2:0.01",),
    # A tenth of the penalty: the FetchSlide agents' misses are far goals the puck stops short of, and 0.01
    # learned more slowly on the plain entry (docs/research/manipulation.md).
    "action-l2-0.1": ("her.action_l2:0.1",),
    # The penalty of 1.0: the other manipulation entries', and the FetchSlide entry's before it took 0.1.
    "action-l2-1": ("her.action_l2:1.0",),
    # Gaussian exploration noise of std 0.1 instead of 0.2.
    "noise-0.1": ("noise_std:0.1",),
    # 20% random actions instead of 30%.
    "random-0.2": ("her.random_action_prob:0.2",),
    # 30% random actions: the other manipulation entries', and the FetchSlide entry's before it took 20%.
    "random-0.3": ("her.random_action_prob:0.3",),
    # At most 115 minutes of training (evaluations left out), short of the budget's env steps on a slow host.
    # A row that ran without a limit and trained less than that ran as with it (lab.row_renames).
    "minutes-115": ("max_minutes:115",),
    # No limit on the training minutes: the FetchSlide entry before it took 115.
    "no-minutes": ("max_minutes:null",),
    # n-step returns over 2 (3) steps, every reward recomputed for the sample's goal; one-step returns: the
    # FetchPush entry before it took 3 steps.
    "n-steps-1": ("her.n_steps:1",),
    "n-steps-2": ("her.n_steps:2",),
    "n-steps-3": ("her.n_steps:3",),
    # Wider networks at the same update count: 3 x 512 instead of 3 x 256.
    "wide-512": ("policy_kwargs.net_arch:[512, 512, 512]",),
    # Cheaper updates (the FetchPush minutes search): two hidden layers of 256 instead of three (about half
    # the multiply-adds of an update), a batch of 1024 or 512 instead of 2048, 10 gradient steps per cycle
    # instead of 20.
    "net-2x256": ("policy_kwargs.net_arch:[256, 256]",),
    # Three hidden layers of 256: the FetchPush entry before it took two.
    "net-3x256": ("policy_kwargs.net_arch:[256, 256, 256]",),
    # A batch of 1024 (512, 256): on FetchPush, each worker's; 1024 was its two-worker entry before it took
    # 512. With updates-40, 256 rows cost about what 20 updates of 512 do (8.1 against 13.5 ms on one thread).
    "batch-1024": ("batch_size:1024",),
    "batch-512": ("batch_size:512",),
    "batch-256": ("batch_size:256",),
    "updates-10": ("gradient_steps:10",),
    # The FetchPush minutes search's trials 2 and 6 on seed 1 (lab/spaces/fetch_push_minutes_workers.yml:
    # 4.12 and 2.78 minutes to 0.9 against the entry's 4.42) are batch-256 (batch-1024)+learning-starts-2500+
    # n-sampled-goal-4+net-2x128: two hidden layers of 128 (about a quarter of an update's multiply-adds
    # of 2 x 256) and learning from each worker's 2,500th env step instead of its 500th. On seeds 0 and 2
    # trial 2 reached 0.9 later than the entry (420k and 360k env steps against 280k and 240k), trial 6
    # on seed 2 (300k against 240k).
    "net-2x128": ("policy_kwargs.net_arch:[128, 128]",),
    "learning-starts-2500": ("learning_starts:2500",),
    # Greedy actions from a running average of the actor, moved 0.0002 of the way after each actor step (a
    # mean age of 5,000 actor steps: 125k env steps of the FetchSlide entry). Training is unchanged, so a
    # seed's run trains as the entry's, and its checkpoints hold both the actor and the average.
    "actor-average-0.0002": ("policy_kwargs.actor_average:0.0002",),
    # Half that rate (a mean age of 10,000 actor steps): with updates-40 the average then spans the same
    # 125k env steps as 0.0002 does at the entry's 20 gradient steps per cycle.
    "actor-average-0.0001": ("policy_kwargs.actor_average:0.0001",),
    # The same with the target actor's horizon (a mean age of 400 actor steps: 10k env steps of the FetchSlide
    # and FetchPush entries), moved after every actor step instead of once per cycle: FetchPush's entry since.
    "actor-average-0.0025": ("policy_kwargs.actor_average:0.0025",),
    # Greedy actions from the actor itself: the FetchPush and FetchSlide entries before they took an average.
    "no-actor-average": ("policy_kwargs.actor_average:0",),
    # The hidden layers' matrix products in bfloat16 under torch.autocast (her_wrap.sb3.policies): about a
    # quarter less time per update on a CPU with bfloat16 dot products; every number of the run changes.
    "bf16": ("policy_kwargs.hidden_dtype:bfloat16",),
    # float32 hidden layers: the FetchPush entry before it took bfloat16 (the same weights and training, bit
    # for bit, as an entry without the key).
    "float32": ("policy_kwargs.hidden_dtype:float32",),
    # bfloat16 hidden layers on a CPU with bfloat16 dot products, float32 on one without (the row's host
    # reading records which: ``bfloat16_products``).
    "auto": ("policy_kwargs.hidden_dtype:auto",),
    # LayerNorm after every hidden layer of the actor and the critic (mrl's networks; her_wrap.sb3.policies).
    "layer-norm": ("policy_kwargs.layer_norm:true",),
    # SB3's plain networks: the FetchPush entry before it took LayerNorm (the same weights and training, bit
    # for bit, as the entry without the key).
    "no-layer-norm": ("policy_kwargs.layer_norm:false",),
    # Half of the training episodes start with the object in the gripper (the HER paper's pick-and-place
    # aid; her_wrap.envs.GraspStartWrapper); evaluations start as the task does.
    "grasp-start": ("grasp_start:0.5",),
    # Transitions drawn by how far their episode moved the object (her_wrap.core.samplers): weight 0.01 +
    # min(path, 0.1 m), so an episode that pushed the block 10 cm or more is drawn 11x as often as one that
    # never touched it.
    "movement": ("her.movement_clip:0.1", "her.movement_floor:0.01"),
    # Sharper movement weights: 0.001 + min(path, 0.1 m), so an episode that pushed the block 10 cm or more is
    # drawn 101x as often as one that never touched it (FetchPush's entry: 11x).
    "movement-floor-0.001": ("her.movement_clip:0.1", "her.movement_floor:0.001"),
    # Uniform draws: the FetchPush entry before it took the movement weights.
    "no-movement": UNIFORM_DRAWS,
    # Every training episode starts as the task does: the FetchPickAndPlace entry before it took
    # grasp_start 0.5.
    "no-grasp-start": ("grasp_start:null",),
    # Two workers of one torch thread each (VARIANT_WORKERS), the recipe's data per update kept: each
    # worker steps 1 env and samples 1024 rows, so a cycle is still 500 env steps in all and a gradient step
    # still averages 2048 rows (``workers:2``: the settings given are each worker's, as her-wrap would
    # otherwise divide the entry's train_freq too).
    "workers-2": ("n_envs:1", "batch_size:1024", "learning_starts:500", "workers:2"),
    # The same data per update as workers-2, each worker stepping the entry's 2 envs in lockstep for half
    # as many steps per cycle (train_freq 125 x 2 envs x 2 workers = 500 env steps): one exploration
    # forward pass and one pass of the collection loop per 2 env steps, as in one worker (FetchPush's entry,
    # whose workers draw 512 rows each).
    "workers-2-envs-2": ("batch_size:1024", "learning_starts:500", "train_freq:[125,step]", "workers:2"),
    # Two workers that each keep the whole recipe, as in the HER paper's regime: a cycle gathers 2 x 500 env
    # steps for the same 20 gradient steps, each averaging 2 x 2048 rows (half the updates per env step on
    # twice the batch; ``workers:2`` keeps her-wrap from dividing the entry among the workers).
    "workers-2-paper": ("workers:2",),
    # One process with the whole recipe: an update's 2048 rows and a cycle's 500 env steps (250 of each of
    # 2 envs) in it, as the manipulation entries train: the FetchPush entry before it took two workers.
    # envs-2-steps-125+float32+no-actor-average+n-steps-1+net-3x256+one-process is
    # her_wrap.runs.presets.MANIPULATION_DDPG (a test holds them equal).
    # Before a workers variant (one-process+workers-2), that variant's workers and settings win.
    ONE_PROCESS: ("batch_size:2048", "learning_starts:1000", "train_freq:[250,step]", "workers:1"),
}

#: The variants that set the worker processes a row trains on (``her-wrap train --workers N``), by name: N.
#: A row of none trains on its task's (:attr:`EntryTask.workers`).
VARIANT_WORKERS: dict[str, int] = {
    "workers-2": 2,
    "workers-2-envs-2": 2,
    "workers-2-paper": 2,
    ONE_PROCESS: 1,
}


@dataclass(frozen=True)
class ReferenceTask:
    """What a user would pick instead: SB3's learner and ``HerReplayBuffer`` with the zoo's entry.

    :param zoo_algo: the zoo's hyperparameter file (``tqc`` reads ``rl_zoo3/hyperparams/tqc.yml``)
    :param zoo_entry: the entry's key there (the zoo keeps the Fetch tasks under their v1 ids)
    :param minutes: wall-clock budget of training, evaluations left out
    :param eval_freq: env steps between two points of the curve
    """

    env_id: str
    zoo_algo: str
    zoo_entry: str
    minutes: float
    eval_freq: int
    eval_episodes: int = 20


#: Each budget is the shipped entry's training minutes on seed 0 to its target: 0.8 for FetchPickAndPlace
#: and PandaPickAndPlace, 0.5 for FetchSlide, 0.9 for PandaPush (for FetchPush, the whole 600k-step run of
#: its one-process entry then, more than the two-worker entry's 11 minutes), so a row shows where the zoo's
#: recipe stands when her_wrap's gets there.
REFERENCE_TASKS: dict[str, ReferenceTask] = {
    "fetch-push-zoo-tqc": ReferenceTask("FetchPush-v4", "tqc", "FetchPush-v1", 25.0, 1_000),
    "fetch-pick-and-place-zoo-tqc": ReferenceTask(
        "FetchPickAndPlace-v4", "tqc", "FetchPickAndPlace-v1", 48.0, 2_000
    ),
    "fetch-slide-zoo-tqc": ReferenceTask("FetchSlide-v4", "tqc", "FetchSlide-v1", 33.0, 1_000),
    "panda-push-zoo-tqc": ReferenceTask("PandaPush-v3", "tqc", "PandaPush-v1", 19.0, 1_000),
    "panda-pick-and-place-zoo-tqc": ReferenceTask(
        "PandaPickAndPlace-v3", "tqc", "PandaPickAndPlace-v1", 22.0, 1_000
    ),
}


#: A variant part that sets a run's budget instead of the entry's: ``budget-600k``, ``budget-1m``,
#: ``budget-1.5m`` (env steps, all workers' together; ``-n`` of ``her-wrap train``).
BUDGET_PATTERN = re.compile(r"budget-(\d+(?:\.\d+)?)([km])")


def budget_of(name: str) -> int | None:
    """The env steps of a ``budget-...`` part, None for any other name."""
    match = BUDGET_PATTERN.fullmatch(name)
    if match is None:
        return None
    steps = round(float(match.group(1)) * {"k": 1_000, "m": 1_000_000}[match.group(2)])
    if steps < 1:
        raise UsageError(f"variant {name!r} sets a budget of no env steps; e.g. budget-600k or budget-1.5m")
    return steps


def variant_overrides(variant: str | None) -> tuple[str, ...]:
    """The ``-params`` items of a variant (none for ``None``).

    :param variant: a name of :data:`VARIANTS` or a budget (``budget-1m``, :data:`BUDGET_PATTERN`), or
        several joined by ``+`` (``n-sampled-goal-4+laber-mean``: both changes, in that order)
    :raises UsageError: for an unknown variant, listing the known ones
    """
    if variant is None:
        return ()
    overrides: list[str] = []
    for name in variant.split("+"):
        if budget_of(name) is not None:
            continue
        if name not in VARIANTS:
            raise UsageError(
                f"unknown variant {name!r}; the variants: {', '.join(sorted(VARIANTS))}, and budget-N"
                " (N env steps, e.g. budget-1m)"
            )
        overrides.extend(VARIANTS[name])
    return tuple(overrides)


def variant_budget(variant: str | None) -> int | None:
    """The env steps a variant trains for instead of its task's (a ``budget-...`` part), or None.

    :raises UsageError: for two parts that both set the budget
    """
    budgets = [steps for name in (variant or "").split("+") if (steps := budget_of(name)) is not None]
    return _at_most_one(variant, budgets, "budget", "budget-N part")


def variant_workers(variant: str | None) -> int | None:
    """The workers a variant trains on: its part's in :data:`VARIANT_WORKERS`, None when no part sets them
    (its task's then, :meth:`EntryTask.with_variant`).

    :data:`ONE_PROCESS` followed by a workers variant (``one-process+workers-2-paper``) trains on that
    variant's workers, its ``-params`` (``workers:2`` among them) applied after ``one-process``'s.

    :raises UsageError: for two parts that both set the workers, but for ``one-process`` before another
    """
    names = [name for name in (variant or "").split("+") if name in VARIANT_WORKERS]
    if len(names) == 2 and names[0] == ONE_PROCESS:
        names = names[1:]
    return _at_most_one(
        variant, [VARIANT_WORKERS[name] for name in names], "workers", "workers-N variant (after one-process)"
    )


def _at_most_one(variant: str | None, values: list[int], setting: str, part: str) -> int | None:
    """The one value that the parts of ``variant`` give ``setting``, None when none does.

    :raises UsageError: for two parts that both set it
    """
    if len(values) > 1:
        raise UsageError(f"variant {variant!r} sets the {setting} twice; join at most one {part}")
    return values[0] if values else None


def variant_argument(text: str) -> str:
    """``--variant``'s type: one variant name, or several joined by ``+``.

    :raises argparse.ArgumentTypeError: for an unknown name
    """
    try:
        variant_overrides(text)
        variant_workers(text)
        variant_budget(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def entry_differences(
    first: dict[str, Any], second: dict[str, Any], workers: int = 1, bfloat16_products: bool = True
) -> list[str]:
    """The keys whose values differ between two validated entries (``RunConfig.to_entry()``), sorted.

    A run's entry names no ``workers`` when neither its entry nor ``-params`` set them (a run of one
    process) or when ``her-wrap train`` did not record them yet (the first ``--workers`` runs); such an
    entry counts as naming the ``workers`` its run trained on, so on one process no ``workers`` and
    ``workers: 1`` are the same. Likewise ``policy_kwargs`` that spell a default of
    :data:`UNNAMED_POLICY_DEFAULTS` (``actor_average: 0``, no average kept; ``hidden_dtype: float32``) are
    those of runs recorded before the key existed, which name none.

    ``hidden_dtype: auto`` is read as the dtype it takes on the host of the run compared: ``bfloat16``
    where the host has bfloat16 dot products (``bfloat16_products``, :func:`row_bfloat16_products` of a
    row), ``float32`` elsewhere. So on a host without them the float32 entry and the ``auto`` one are the
    same recipe, and on a host with them the bfloat16 one and the ``auto`` one.
    """
    first, second = (
        {"workers": workers, **_without_policy_defaults(_dtype_resolved(entry, bfloat16_products))}
        for entry in (first, second)
    )
    return sorted(key for key in {*first, *second} if first.get(key) != second.get(key))


#: ``policy_kwargs`` keys added after rows were recorded without them, by name: the value that means what
#: naming none does (:func:`entry_differences`).
UNNAMED_POLICY_DEFAULTS: dict[str, Any] = {"actor_average": 0, "hidden_dtype": "float32"}


def row_bfloat16_products(record: dict[str, Any], default: bool = True) -> bool:
    """Whether a row's host had bfloat16 dot products: its ``bfloat16_products`` (:func:`record_entry_run`),
    else its host reading's before the run (:func:`lab.bench.host_reading`), else ``default``. A row
    recorded before either named them says True: those rows ran bfloat16 only on such hosts, where it is
    faster than float32."""
    if "bfloat16_products" in record:
        return bool(record["bfloat16_products"])
    reading = (record.get("host") or {}).get("before") or {}
    return bool(reading.get("bfloat16_products", default))


def _dtype_resolved(entry: dict[str, Any], bfloat16_products: bool) -> dict[str, Any]:
    """``entry`` with ``hidden_dtype: auto`` spelled as the dtype it takes (:func:`entry_differences`)."""
    from her_wrap.sb3.policies import AUTO_DTYPE, HIDDEN_DTYPE_KEY

    policy_kwargs = entry.get("policy_kwargs")
    if not isinstance(policy_kwargs, dict) or policy_kwargs.get(HIDDEN_DTYPE_KEY) != AUTO_DTYPE:
        return entry
    dtype = "bfloat16" if bfloat16_products else "float32"
    return {**entry, "policy_kwargs": {**policy_kwargs, HIDDEN_DTYPE_KEY: dtype}}


def _without_policy_defaults(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` without the ``policy_kwargs`` keys that spell their :data:`UNNAMED_POLICY_DEFAULTS`."""
    policy_kwargs = entry.get("policy_kwargs")
    if not isinstance(policy_kwargs, dict):
        return entry
    kept = {
        key: value
        for key, value in policy_kwargs.items()
        if key not in UNNAMED_POLICY_DEFAULTS or value != UNNAMED_POLICY_DEFAULTS[key]
    }
    return {**entry, "policy_kwargs": kept}


def check_shipped_entry(
    task: EntryTask,
    run_dir: Path,
    overrides: tuple[str, ...] = (),
    *,
    shorter_budget: bool = False,
    bfloat16_products: bool = True,
) -> tuple[RunLayout, dict[str, Any]]:
    """The run folder's layout and arguments, once its run is the task's command with the shipped entry
    (changed by ``overrides``, a variant's ``-params``) on the task's workers (:attr:`EntryTask.workers`;
    a row's task is :meth:`EntryTask.with_variant`).

    ``shorter_budget`` takes a run of fewer env steps than the task's, otherwise the same command: the
    first folders of a run resumed with a longer budget (``-i`` and a larger ``-n``). ``bfloat16_products``
    says whether the run's host had bfloat16 dot products: what ``hidden_dtype: auto`` took there
    (:func:`entry_differences`).

    The entries are compared once validated, so an entry written by another version of ``her-wrap train``
    (keys spelled or ordered differently) is the same recipe when it means the same.

    :raises UsageError: naming the first difference (another entry, budget, evaluation schedule or number
        of workers)
    """
    layout = layout_of(run_dir)
    if layout is None:
        raise UsageError(f"{run_dir} is not a her-wrap train run folder (no <env id>/args.yml in it)")
    args = load_yaml_file(layout.args_path)
    (entry,) = load_yaml_file(layout.config_path).values()
    if args.get("env") != task.env_id:
        raise UsageError(f"{run_dir} trained {args.get('env')}, not {task.env_id}")
    ran_workers, workers = int(args.get("workers") or 1), task.workers
    if ran_workers != workers:
        raise UsageError(
            f"{run_dir} trained on {ran_workers} worker(s), not {workers}; pass the --variant it ran"
            f" (workers variants: {', '.join(sorted(VARIANT_WORKERS))})"
        )
    steps, eval_freq = task.steps // workers, task.eval_freq // workers
    recorded_steps = entry.get("n_timesteps")
    if shorter_budget and isinstance(recorded_steps, (int, float)) and 0 < recorded_steps < steps:
        steps = int(recorded_steps)
    for name, value in (("n_timesteps", steps), ("eval_freq", eval_freq)):
        recorded = entry.get(name) if name == "n_timesteps" else args.get(name)
        if recorded != value:
            raise UsageError(f"{run_dir}: {name} is {recorded}, the task's is {value}")
    if args.get("eval_episodes") != task.eval_episodes:
        raise UsageError(f"{run_dir}: eval_episodes is {args.get('eval_episodes')}, not {task.eval_episodes}")
    shipped = load_run_config(
        task.config_path(), task.env_id, overrides=overrides, n_timesteps=steps, workers=workers
    )
    ran = build_run_config(entry, task.env_id, str(layout.config_path))
    differences = entry_differences(shipped.to_entry(), ran.to_entry(), workers, bfloat16_products)
    if differences:
        raise UsageError(
            f"{run_dir} ran another entry than the shipped configs/{task.config} one for {task.env_id}"
            f"{' with ' + ' '.join(overrides) if overrides else ''} (differs in {', '.join(differences)}); "
            "pass the --variant it ran"
        )
    return layout, args


@dataclass(frozen=True)
class RunPart:
    """One ``her-wrap train`` run folder of a row's run.

    :param layout: its files
    :param args: its ``args.yml``
    :param start: env steps (one worker's) its agent had when it started: 0, or those of the saved agent it
        resumed (``-i``)
    """

    layout: RunLayout
    args: dict[str, Any]
    start: int


@dataclass(frozen=True)
class RunChain:
    """A row's run: one run folder, or several when the run was stopped and resumed from a checkpoint
    (``her-wrap train -i``), each resuming the one before; earliest first.

    The resumed parts carry on the agent, its optimizer, its normalization statistics and its replay buffer;
    their envs, exploration and sampling draw afresh from the run's seed.
    """

    parts: tuple[RunPart, ...]
    workers: int = 1

    @property
    def seed(self) -> int:
        return int(self.parts[-1].args["seed"])

    @property
    def layout(self) -> RunLayout:
        """The last part's files (its final agent is the run's)."""
        return self.parts[-1].layout

    @property
    def resumed_at(self) -> list[int]:
        """Env steps (all workers') at which each part after the first resumed."""
        return [part.start * self.workers for part in self.parts[1:]]

    def curve(self) -> tuple[list[int], list[float], list[float]]:
        """The run's curve (:func:`entry_curve`) across its parts: each part's evaluations up to the step
        the next part resumed from, training seconds carried on from part to part. The parts'
        ``evaluations.npz`` are read once per chain.

        :raises UsageError: when a part has no evaluation at the step the next one resumed from (its
            training seconds up to there are unknown)
        """
        steps, successes, seconds = self._curve
        return list(steps), list(successes), list(seconds)

    @functools.cached_property
    def _curve(self) -> tuple[list[int], list[float], list[float]]:
        steps: list[int] = []
        successes: list[float] = []
        seconds: list[float] = []
        offset = 0.0
        for index, part in enumerate(self.parts):
            part_steps, part_successes, part_seconds = entry_curve(part.layout.evaluations_path, self.workers)
            low = part.start * self.workers
            high = self.parts[index + 1].start * self.workers if index + 1 < len(self.parts) else None
            for step, success, second in zip(part_steps, part_successes, part_seconds, strict=True):
                if step > low and (high is None or step <= high):
                    steps.append(step)
                    successes.append(success)
                    seconds.append(second + offset)
            if high is not None:
                if high not in part_steps:
                    raise UsageError(
                        f"{part.layout.run_dir} has no evaluation at {high} env steps, where "
                        f"{self.parts[index + 1].layout.run_dir} resumed it: resume from a checkpoint at an "
                        "evaluation's step (--save-freq a multiple of --eval-freq)"
                    )
                offset += part_seconds[part_steps.index(high)]
        return steps, successes, seconds

    def checkpoint_model_path(self, timesteps: int) -> Path:
        """The agent's zip of the run's checkpoint at ``timesteps`` env steps (one worker's), in the part
        that saved it.

        :raises UsageError: when no part has one there (the checkpoints of the part that covers those steps
            are named)
        """
        from her_wrap.runs.checkpoints import checkpoint_model_path

        part = self.parts[0]
        for later in self.parts[1:]:
            if timesteps > later.start:
                part = later
        return checkpoint_model_path(part.layout.run_dir, timesteps)


def check_run(
    task: EntryTask, run_dir: Path, overrides: tuple[str, ...] = (), bfloat16_products: bool = True
) -> RunChain:
    """The row's run that ends in ``run_dir``: its folder and, when it was resumed (``-i``), the folders
    it resumed, each checked to be the task's command (:func:`check_shipped_entry`) with the same seed.
    A folder it resumed may have had a smaller budget (a run resumed to train longer, e.g. to 2.5M env
    steps from a checkpoint of a 1.5M run); the last folder trains the task's.

    :raises UsageError: naming the part that is not the command, another seed, a folder that is gone, or a
        resume from a step with no evaluation
    """
    from her_wrap.runs.checkpoints import checkpoint_paths, resolve_saved_agent

    parts: list[RunPart] = []
    current: Path | None = Path(run_dir)
    while current is not None:
        layout, args = check_shipped_entry(
            task, current, overrides, shorter_budget=bool(parts), bfloat16_products=bfloat16_products
        )
        if any(part.layout.run_dir.resolve() == layout.run_dir.resolve() for part in parts):
            raise UsageError(f"{layout.run_dir} resumes itself")
        start = int(args.get("initial_timesteps") or 0)
        parts.append(RunPart(layout, args, start))
        resumed = args.get("trained_agent")
        if resumed is None:
            break
        if start == 0:
            raise UsageError(f"{layout.run_dir} resumed {resumed}, an agent of no env steps")
        try:
            saved = resolve_saved_agent(Path(resumed))
        except UsageError:
            raise UsageError(f"{layout.run_dir} resumed {resumed}, which is gone") from None
        if saved.run is None:
            raise UsageError(f"{layout.run_dir} resumed {resumed}, which is in no run folder")
        model, replay_buffer = checkpoint_paths(saved.run.run_dir, start)
        if saved.model != model:
            raise UsageError(
                f"{layout.run_dir} resumed {resumed}, not a checkpoint of that run: resume from its run folder"
                " (its latest checkpoint) or a rl_model_N_steps.zip"
            )
        if "trained_replay_buffer" in args and args["trained_replay_buffer"] != str(replay_buffer):
            raise UsageError(
                f"{layout.run_dir} resumed {resumed} without its replay buffer (only a run's latest checkpoint"
                " keeps one): resume from the latest checkpoint"
            )
        current = saved.run.run_dir
    parts.reverse()
    seeds = {int(part.args["seed"]) for part in parts}
    if len(seeds) > 1:
        raise UsageError(
            f"{run_dir} resumed a run of another seed ({', '.join(map(str, sorted(seeds)))}): resume with "
            "--seed set to the run's"
        )
    chain = RunChain(tuple(parts), task.workers)
    chain.curve()  # every part has an evaluation where the next resumed
    return chain


def final_success(model: Any, env_id: str, seed: int) -> float:
    """Greedy success of a trained agent on :data:`FINAL_EPISODES` fresh episodes (a row's end figure)."""
    from her_wrap.envs.registry import make_goal_env
    from her_wrap.sb3.evaluation import success_rate

    final = success_rate(model, make_goal_env(env_id), FINAL_EPISODES, seed=1_000_000 + seed)
    print(f"  final greedy success on {FINAL_EPISODES} fresh episodes: {final:.2f}", flush=True)
    return final


def entry_curve(evaluations_path: Path, workers: int = 1) -> tuple[list[int], list[float], list[float]]:
    """A run's curve from its ``evaluations.npz``: env steps of all workers, greedy success, training seconds.

    ``her-wrap train --workers N`` records one worker's env steps (rank 0's count); the curve counts all
    ``workers`` workers' steps, so rows of any worker count share one axis.
    """
    with np.load(evaluations_path) as data:
        steps = [int(value) * workers for value in data["timesteps"]]
        successes = [float(row.mean()) for row in data["successes"]]
        seconds = [float(value) for value in data["train_seconds"]]
    return steps, successes, seconds


def reproducing_commands(task_name: str, task: EntryTask, seed: int, variant: str | None) -> dict[str, str]:
    """A record's ``command`` (this script's) and ``train_command`` (the ``her-wrap train`` it runs).

    ``task`` is the row's task with the variant's budget and workers already applied
    (:meth:`EntryTask.with_variant`).
    """
    return {
        "command": f"python scripts/robotics_results.py run {task_name} --seeds {seed}"
        + (f" --variant {variant}" if variant else ""),
        "train_command": "her-wrap train " + " ".join(task.train_arguments(seed, variant_overrides(variant))),
    }


def record_entry_run(
    task_name: str,
    task: EntryTask,
    run_dir: Path,
    variant: str | None = None,
    host: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of a finished ``her-wrap train`` run of ``task`` (with ``variant``'s changes): its curve,
    and its final agent on :data:`FINAL_EPISODES` fresh episodes.

    ``run_dir`` may be a run resumed from a checkpoint of a stopped one (:func:`check_run`): the curve then
    runs across the parts, and ``resumed_at`` names the env steps where each part took over. ``host``, the
    machine's speed around the run (:func:`run_entry`), is recorded as given; ``bfloat16_products`` is
    its reading's, or this machine's without one (what ``hidden_dtype: auto`` takes: the row is recorded
    on the host that ran it).
    """
    from her_wrap.sb3.policies import cpu_has_bfloat16_products

    task = task.with_variant(variant)
    bfloat16_products = row_bfloat16_products({"host": host}, default=cpu_has_bfloat16_products())
    chain = check_run(task, run_dir, variant_overrides(variant), bfloat16_products)
    layout, args, seed = chain.layout, chain.parts[-1].args, chain.seed
    steps, successes, seconds = chain.curve()
    final = saved_agent_success(task, layout.final_model_path, seed)
    config = load_run_config(layout.config_path, task.env_id)
    return {
        "kind": "entry",
        "env_id": task.env_id,
        "learner": LEARNERS[config.model_class].label,
        "config": task.config,
        "seed": seed,
        "steps": steps[-1],
        "final_success": final,
        "curve_steps": steps,
        "curve_success": successes,
        "curve_seconds": seconds,
        "train_seconds": seconds[-1],
        "eval_episodes": task.eval_episodes,
        "num_threads": args.get("num_threads"),
        "workers": task.workers,
        "load_average": os.getloadavg(),
        **({"host": host} if host is not None else {}),
        "bfloat16_products": bfloat16_products,
        "run_dir": str(run_dir),
        **_resumed_fields(chain),
        "settings": config.to_entry(),
        "variant": variant,
        "overrides": list(variant_overrides(variant)),
        **reproducing_commands(task_name, task, seed, variant),
    }


def _resumed_fields(chain: RunChain) -> dict[str, Any]:
    """``resumed_at`` (env steps) and ``run_dirs`` (earliest first) of a run resumed from a checkpoint;
    nothing for a run of one folder."""
    if len(chain.parts) == 1:
        return {}
    return {
        "resumed_at": chain.resumed_at,
        "run_dirs": [str(part.layout.run_dir) for part in chain.parts],
    }


def stopped_run_record(
    task_name: str,
    task: EntryTask,
    run_dir: Path,
    variant: str | None = None,
    checkpoint: int | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """The curve of a run of ``task`` stopped before its budget (``docs/experiments/*.json``), and, given
    ``checkpoint`` (env steps of one of its checkpoints), that agent's greedy success on
    :data:`FINAL_EPISODES` fresh episodes.

    It is not a table row: a row is a run to the entry's budget (:func:`record_entry_run`).

    :raises UsageError: when the run is not the task's command (:func:`check_shipped_entry`), or has no
        checkpoint at ``checkpoint`` (the ones it has are named)
    """
    task = task.with_variant(variant)
    chain = check_run(task, run_dir, variant_overrides(variant))
    seed = chain.seed
    steps, successes, seconds = chain.curve()
    record: dict[str, Any] = {
        "env_id": task.env_id,
        "seed": seed,
        "variant": variant,
        **reproducing_commands(task_name, task, seed, variant),
        "stopped_at": steps[-1] if steps else 0,
        "budget": task.steps,
        **_resumed_fields(chain),
        "timesteps": steps,
        "success": successes,
        "train_seconds": seconds,
    }
    if note:
        record["note"] = note
    if checkpoint is not None:
        seconds_at = dict(zip(steps, seconds, strict=True))
        record["checkpoint"] = checkpoint_success(task, chain, checkpoint, seconds_at)
    return record


#: Whose weights a budget's greedy actions come from: each saved agent's own (``agent``), or its target
#: actor's (``target-actor``: what ``policy_kwargs actor_average`` at the learner's ``tau`` plays, weight for
#: weight, on the same run; the learner's updates never read the average).
GREEDY_ACTORS = ("agent", "target-actor")


def check_greedy(greedy: str) -> None:
    """:raises UsageError: when ``greedy`` is none of :data:`GREEDY_ACTORS` (they are named)"""
    if greedy not in GREEDY_ACTORS:
        raise UsageError(f"greedy actions from {greedy!r}: choose one of {', '.join(GREEDY_ACTORS)}")


def saved_agent_success(task: EntryTask, model_path: Path, seed: int, greedy: str = "agent") -> float:
    """Greedy success of the agent saved at ``model_path`` on the :data:`FINAL_EPISODES` fresh episodes of
    seed ``seed``'s figures, its greedy actions from ``greedy`` (:data:`GREEDY_ACTORS`).

    :raises UsageError: for a ``greedy`` not in :data:`GREEDY_ACTORS`, or ``target-actor`` on a learner
        with no target actor (DDPG and TD3 have one)
    """
    from her_wrap.envs.registry import make_goal_env
    from her_wrap.sb3.her import HER
    from her_wrap.sb3.policies import greedy_actor

    check_greedy(greedy)
    model = HER.load(str(model_path), env=make_goal_env(task.env_id), device="cpu")
    if greedy == "target-actor":
        policy = model.model.policy
        target = getattr(policy, "actor_target", None)
        if target is None:
            raise UsageError(
                f"{model_path}: {model.model_class.__name__} has no target actor (DDPG and TD3 have one); "
                "evaluate its agents as saved (greedy agent)"
            )
        greedy_actor(policy).load_state_dict(target.state_dict())
    return final_success(model, task.env_id, seed)


def checkpoint_success(
    task: EntryTask,
    chain: RunChain,
    checkpoint: int,
    seconds_at: dict[int, float],
    greedy: str = "agent",
    command: str | None = None,
) -> dict[str, Any]:
    """The greedy success of a run's checkpoint on :data:`FINAL_EPISODES` fresh episodes (the episodes of a
    final agent's figure), with the env steps (all workers') and training seconds at which it was saved.

    :param chain: the run (:func:`check_run`)
    :param checkpoint: env steps of the checkpoint, one worker's (as ``--save-freq`` counts them)
    :param seconds_at: the run's training seconds by env steps of all workers (its curve,
        :meth:`RunChain.curve`); none when the checkpoint is no point of it
    :param greedy: whose weights act greedily (:func:`saved_agent_success`)
    :param command: the command that plays the same weights; None names ``her-wrap enjoy``, which plays
        the saved agent's own actor (right for ``greedy="agent"`` only)
    :raises UsageError: when the run has no checkpoint there (the ones it has are named)
    """
    model_path = chain.checkpoint_model_path(checkpoint)
    return {
        "timesteps": checkpoint * chain.workers,
        "success": saved_agent_success(task, model_path, chain.seed, greedy),
        "episodes": FINAL_EPISODES,
        "train_seconds": seconds_at.get(checkpoint * chain.workers),
        "command": command
        or f"her-wrap enjoy --env {task.env_id} -f LOGS --exp-id K --load-checkpoint {checkpoint} "
        f"-n {FINAL_EPISODES}",
    }


def budget_record(
    task_name: str,
    records: list[dict[str, Any]],
    budgets: list[int],
    variant: str | None = None,
    seeds: list[int] | None = None,
    greedy: str = "agent",
) -> dict[str, Any]:
    """What smaller budgets would have given on every recorded seed of a row: each seed's checkpoints at
    ``budgets`` env steps on :data:`FINAL_EPISODES` fresh episodes, beside its final agent.

    With ``greedy="target-actor"`` every agent, the final one too, acts greedily with its target actor's
    weights: what the row would have given with ``actor_average`` at the learner's ``tau``
    (:func:`saved_agent_success`).

    A checkpoint is the agent a run with that budget ends with: it is saved once the gradient steps of the
    cycle that reached its step are done (checkpoints of runs made before 2026-11-27 were saved before
    them, one cycle of updates short), and the entry has no schedule that reads the budget, so everything
    before is the same run (a seed's run is deterministic on one machine).

    :param records: the row's records (``record`` or ``run`` of the same task and variant), each naming the
        run folder it came from
    :param budgets: env steps of all workers, each a multiple of the row's checkpoint interval
    :param seeds: only these recorded seeds (``None``: all), e.g. when another seed's run folder is gone
    :param greedy: whose weights act greedily (:data:`GREEDY_ACTORS`)
    :raises UsageError: when there is no record, a seed asked for has none, a run folder is gone or is not
        the row's command, a budget is not one of its checkpoints, or ``greedy`` is none of
        :data:`GREEDY_ACTORS`
    """
    label = record_label(task_name, variant)
    check_greedy(greedy)
    if not records:
        raise UsageError(f"no recorded seed of {label}: run or record some first")
    if seeds is not None:
        recorded = sorted(int(record["seed"]) for record in records)
        missing = sorted(set(seeds) - set(recorded))
        if missing:
            raise UsageError(
                f"no record of seed(s) {', '.join(map(str, missing))} in {label}; its recorded seeds: "
                f"{', '.join(map(str, recorded))}"
            )
        records = [record for record in records if int(record["seed"]) in seeds]
    task = ENTRY_TASKS[task_name].with_variant(variant)
    overrides, workers = variant_overrides(variant), task.workers
    for budget in budgets:
        if budget % workers:
            raise UsageError(f"budget {budget} is not a multiple of the {workers} workers")
    # Every run folder and checkpoint is checked before any agent is evaluated (minutes each).
    chains = []
    for record in records:
        run_dir = Path(record["run_dir"])
        if not run_dir.is_dir():
            raise UsageError(
                f"seed {record['seed']}: its run folder {run_dir} is gone; record the row again from a copy, "
                "or leave the seed out with --seeds"
            )
        chain = check_run(task, run_dir, overrides)
        if chain.seed != int(record["seed"]):
            raise UsageError(
                f"the record of seed {record['seed']} names {run_dir}, a run of seed {chain.seed}"
            )
        for budget in budgets:
            chain.checkpoint_model_path(budget // workers)
        chains.append(chain)
    per_seed = []
    for record, chain in zip(records, chains, strict=True):
        steps, _, seconds = chain.curve()
        seconds_at = dict(zip(steps, seconds, strict=True))
        checkpoints = [
            checkpoint_success(
                task,
                chain,
                budget // workers,
                seconds_at,
                greedy,
                # `her-wrap enjoy` plays the agent's own actor: another actor's is this seed's budget command.
                None
                if greedy == "agent"
                else budget_command(task_name, [budget], variant, [chain.seed], greedy),
            )
            for budget in budgets
        ]
        final_figure = record["final_success"]
        if greedy != "agent":  # the row's own figure is the saved agent's
            final_figure = saved_agent_success(task, chain.layout.final_model_path, chain.seed, greedy)
        per_seed.append(
            {
                "seed": record["seed"],
                "run_dir": str(Path(record["run_dir"])),
                "checkpoints": checkpoints,
                "final": {
                    "timesteps": record["steps"],
                    "success": final_figure,
                    "train_seconds": record["train_seconds"],
                },
            }
        )
    return {
        "task": task_name,
        "env_id": task.env_id,
        "variant": variant,
        "budgets": budgets,
        "greedy": greedy,
        "seeds": per_seed,
        "command": budget_command(task_name, budgets, variant, seeds, greedy),
    }


def budget_command(
    task_name: str, budgets: list[int], variant: str | None, seeds: list[int] | None, greedy: str
) -> str:
    """The ``scripts/robotics_results.py budget`` command line that evaluates these budgets."""
    return (
        f"python scripts/robotics_results.py budget {task_name} --steps {' '.join(map(str, budgets))}"
        + (f" --variant {variant}" if variant else "")
        + (f" --seeds {' '.join(map(str, seeds))}" if seeds is not None else "")
        + (f" --greedy {greedy}" if greedy != "agent" else "")
    )


def budget_table(record: dict[str, Any]) -> str:
    """A Markdown table of :func:`budget_record`: per seed, the greedy success and training minutes at each
    budget and at the row's own."""
    finals = {seed["final"]["timesteps"] for seed in record["seeds"]}
    columns = [*record["budgets"], *sorted(finals)]
    header = "| seed | " + " | ".join(f"{steps // 1000}k: success (minutes)" for steps in columns) + " |"
    lines = [header, "|---:|" + "---:|" * len(columns)]
    by_steps: dict[int, list[float]] = {steps: [] for steps in columns}
    for seed in record["seeds"]:
        cells = {point["timesteps"]: point for point in [*seed["checkpoints"], seed["final"]]}
        row = []
        for steps in columns:
            point = cells.get(steps)
            if point is None:
                row.append("")
                continue
            by_steps[steps].append(point["success"])
            seconds = point["train_seconds"]
            row.append(f"{point['success']:.2f} ({'-' if seconds is None else f'{seconds / 60:.0f}'})")
        lines.append(f"| {seed['seed']} | " + " | ".join(row) + " |")
    lines.append("| worst | " + " | ".join(f"{min(by_steps[steps]):.2f}" for steps in columns) + " |")
    return "\n".join(lines)


def run_entry(
    task_name: str, task: EntryTask, seed: int, log_folder: Path, variant: str | None = None
) -> dict[str, Any]:
    """Train one seed with ``her-wrap train`` in a child process and return its record.

    The record's ``host`` holds :func:`lab.bench.host_reading` taken just before and just after the
    training (``before``, ``after``), so that the minutes of runs on different days can be compared.
    """
    from lab.bench import host_reading

    before = host_reading(task.env_id)
    arguments = task.with_variant(variant).train_arguments(
        seed, variant_overrides(variant), config_file=str(task.config_path())
    )
    command = [sys.executable, "-m", "her_wrap.runs.cli", "train", *arguments, "-f", str(log_folder)]
    print(" ".join(command), flush=True)
    try:
        completed = train_in_child(
            command, echo=lambda line: line.startswith(("Run folder:", "Eval num_timesteps"))
        )
    except StoppedBySignal:
        print(
            f"{task_name} seed {seed}: stopped, no row recorded; resume the run as its stop line says, then "
            f"record the resumed run's folder: python scripts/robotics_results.py record {task_name} RUN_FOLDER"
            + (f" --variant {variant}" if variant else ""),
            flush=True,
        )
        raise
    lines = completed.stdout.splitlines(keepends=True)
    if completed.returncode != 0:
        raise UsageError(f"her-wrap train failed:\n{''.join(lines[-20:])}")
    run_dir = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("Run folder:"))
    host = {"before": before, "after": host_reading(task.env_id)}
    return record_entry_run(task_name, task, Path(run_dir), variant, host=host)


def zoo_entry(task: ReferenceTask) -> dict[str, Any]:
    """The zoo's hyperparameters of ``task`` from the installed rl_zoo3, ``dict(...)`` strings parsed."""
    import rl_zoo3

    path = Path(rl_zoo3.__file__).parent / "hyperparams" / f"{task.zoo_algo}.yml"
    return parse_literal_strings(dict(load_yaml_file(path)[task.zoo_entry]))
