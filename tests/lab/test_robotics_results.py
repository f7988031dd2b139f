"""The manipulation experiments and their tables (:mod:`lab.experiments`, :mod:`lab.results`).

A manipulation row must be the shipped ``configs/her.yml`` entry (or a named variant of it) run with the
row's command; these tests build run folders as ``her-wrap train`` writes them and check which are taken.
FetchPickAndPlace's entry trains in one process, FetchPush's and FetchSlide's on two workers (their
``workers: 2``). The tables show
every seed on its own, then the median and the worst seed.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess
import sys
import zipfile
from typing import Any

import numpy as np
import pytest

from her_wrap.runs.arguments import default_config_path
from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import UsageError
from her_wrap.runs.yaml_io import load_yaml_file, write_yaml_file
from lab import experiments, results, training_child

RESULTS_FILE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "robotics_results.json"
#: A task whose shipped entry trains in one process, and two whose entries train on two workers.
ONE_PROCESS = "fetch-pick-and-place-ddpg"
ONE_PROCESS_ENV = experiments.ENTRY_TASKS[ONE_PROCESS].env_id
TWO_WORKERS = "fetch-push-ddpg"
SLIDE = "fetch-slide-ddpg"


def write_agent_zip(path: pathlib.Path) -> None:
    """A stand-in for an agent's zip, with the ``data`` member every saved agent has."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", "{}")


def fake_run(
    tmp_path: pathlib.Path,
    entry: dict[str, Any],
    *,
    eval_freq: int = 20_000,
    env_id: str = ONE_PROCESS_ENV,
    workers: int = 1,
) -> pathlib.Path:
    """A run folder holding what ``her-wrap train`` records: the resolved entry and the arguments."""
    run_dir = tmp_path / "logs" / "her" / f"{env_id}_1"
    (run_dir / env_id).mkdir(parents=True)
    write_yaml_file(run_dir / env_id / "config.yml", {env_id: entry})
    args = {"env": env_id, "seed": 3, "eval_freq": eval_freq, "eval_episodes": 50, "workers": workers}
    write_yaml_file(run_dir / env_id / "args.yml", args)
    return run_dir


def command_entry(
    task: experiments.EntryTask, overrides: tuple[str, ...] = (), *, steps: int | None = None
) -> dict[str, Any]:
    """The entry ``her-wrap train`` records for ``task``'s command with ``overrides``: on the task's
    workers, each worker's share of ``steps`` (the task's by default)."""
    return load_run_config(
        task.config_path(),
        task.env_id,
        n_timesteps=(steps or task.steps) // task.workers,
        overrides=overrides,
        workers=task.workers,
    ).to_entry()


def command_run(
    tmp_path: pathlib.Path, task: experiments.EntryTask, entry: dict[str, Any] | None = None
) -> pathlib.Path:
    """A run folder of ``task``'s command (``entry``: the entry it recorded, :func:`command_entry`'s by
    default), with the task's workers and evaluation schedule."""
    return fake_run(
        tmp_path,
        command_entry(task) if entry is None else entry,
        eval_freq=task.eval_freq // task.workers,
        env_id=task.env_id,
        workers=task.workers,
    )


@pytest.mark.parametrize("name", [ONE_PROCESS, TWO_WORKERS, SLIDE])
def test_a_run_of_the_shipped_entry_is_taken(tmp_path: pathlib.Path, name: str) -> None:
    task = experiments.ENTRY_TASKS[name]
    _, args = experiments.check_shipped_entry(task, command_run(tmp_path, task))
    assert args["seed"] == 3


@pytest.mark.parametrize("name", [ONE_PROCESS, TWO_WORKERS, SLIDE])
def test_a_changed_entry_is_refused_naming_the_difference(tmp_path: pathlib.Path, name: str) -> None:
    task = experiments.ENTRY_TASKS[name]
    entry = {**command_entry(task), "batch_size": 256}
    with pytest.raises(UsageError, match="differs in batch_size"):
        experiments.check_shipped_entry(task, command_run(tmp_path, task, entry))


def test_another_budget_or_schedule_is_refused(tmp_path: pathlib.Path) -> None:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    with pytest.raises(UsageError, match="n_timesteps is 1000"):
        experiments.check_shipped_entry(task, fake_run(tmp_path / "a", command_entry(task, steps=1000)))
    with pytest.raises(UsageError, match="eval_freq is 5000"):
        experiments.check_shipped_entry(task, fake_run(tmp_path / "b", command_entry(task), eval_freq=5000))


def test_a_float32_run_of_fetch_push_is_its_auto_entry_only_on_a_host_without_bfloat16_products(
    tmp_path: pathlib.Path,
) -> None:
    task = experiments.ENTRY_TASKS[TWO_WORKERS]
    float32 = ("policy_kwargs.hidden_dtype:float32",)
    run_dir = command_run(tmp_path, task, command_entry(task, float32))
    experiments.check_shipped_entry(task, run_dir, bfloat16_products=False)
    with pytest.raises(UsageError, match="differs in policy_kwargs"):
        experiments.check_shipped_entry(task, run_dir, bfloat16_products=True)
    experiments.check_shipped_entry(task, run_dir, float32, bfloat16_products=True)


@pytest.mark.parametrize("name", [ONE_PROCESS, TWO_WORKERS, SLIDE])
def test_a_variant_run_is_taken_only_as_that_variant(tmp_path: pathlib.Path, name: str) -> None:
    task = experiments.ENTRY_TASKS[name]
    assert experiments.VARIANTS  # the loop below is not empty
    shipped = command_entry(task)
    taken = []
    for variant, overrides in experiments.VARIANTS.items():
        row = task.with_variant(variant)
        if row.workers == task.workers and not experiments.entry_differences(
            shipped, command_entry(row, overrides), task.workers
        ):
            continue  # a variant of another task's entry (this one already has its change)
        run_dir = command_run(tmp_path / variant, row, command_entry(row, overrides))
        experiments.check_shipped_entry(row, run_dir, overrides)
        with pytest.raises(UsageError, match="pass the --variant it ran"):
            experiments.check_shipped_entry(task, run_dir)
        taken.append(variant)
    # FetchPush's and FetchSlide's entries are the one-process regime on two workers: one-process undoes that.
    assert ("one-process" in taken) == (name != ONE_PROCESS) and ("workers-2" in taken)


@pytest.mark.parametrize("variant", sorted(set(experiments.VARIANTS) - set(experiments.VARIANT_WORKERS)))
def test_every_variant_changes_the_shipped_entry_of_some_manipulation_task(variant: str) -> None:
    env_ids = sorted({task.env_id for task in experiments.ENTRY_TASKS.values()})
    changed = [
        env_id
        for env_id in env_ids
        if experiments.entry_differences(
            load_run_config(
                default_config_path(), env_id, overrides=experiments.VARIANTS[variant]
            ).to_entry(),
            load_run_config(default_config_path(), env_id).to_entry(),
        )
    ]
    assert changed, f"{variant} changes no shipped manipulation entry"


def test_fetch_push_ships_8_relabeled_goals_and_the_other_manipulation_tasks_4() -> None:
    n_sampled_goal = {
        task.env_id: load_run_config(default_config_path(), task.env_id).hindsight.n_sampled_goal
        for task in experiments.ENTRY_TASKS.values()
    }
    assert n_sampled_goal.pop("FetchPush-v4") == 8 and set(n_sampled_goal.values()) == {4}


@pytest.mark.parametrize(
    ("variant", "read"),
    [
        ("envs-4", lambda config: config.n_envs == 4),
        ("envs-8", lambda config: config.n_envs == 8),
        ("noise-0.1", lambda config: config.noise_std == 0.1),
        ("random-0.2", lambda config: config.her["random_action_prob"] == 0.2),
        ("n-steps-3", lambda config: config.her["n_steps"] == 3),
        ("wide-512", lambda config: config.learner_kwargs["policy_kwargs"]["net_arch"] == [512, 512, 512]),
        ("layer-norm", lambda config: config.learner_kwargs["policy_kwargs"]["layer_norm"] is True),
        ("n-sampled-goal-4", lambda config: config.hindsight.n_sampled_goal == 4),
        ("grasp-start", lambda config: config.grasp_start == 0.5),
        ("movement-floor-0.001", lambda config: config.hindsight.movement_floor == 0.001),
        ("action-l2-0.01", lambda config: config.her["action_l2"] == 0.01),
        # priorities replace FetchPush's movement weights (both set how often a transition is drawn)
        ("per", lambda config: config.hindsight.prioritized and config.hindsight.movement_clip is None),
    ],
)
def test_a_variant_changes_the_one_setting_it_names(variant: str, read: Any) -> None:
    config = load_run_config(default_config_path(), "FetchPush-v4", overrides=experiments.VARIANTS[variant])
    assert read(config)


def test_pick_and_place_entry_starts_half_its_training_episodes_grasped_and_a_variant_undoes_it() -> None:
    shipped = load_run_config(default_config_path(), "FetchPickAndPlace-v4")
    undone = load_run_config(
        default_config_path(), "FetchPickAndPlace-v4", overrides=experiments.VARIANTS["no-grasp-start"]
    )
    assert shipped.grasp_start == 0.5 and undone.grasp_start is None
    assert "grasp_start" not in undone.to_entry()  # the run's config.yml reads as the entry before it


@pytest.mark.parametrize("env_id", ["FetchPush-v4", "PandaPush-v3", "FetchSlide-v4"])
def test_push_and_slide_entries_alone_draw_by_movement_and_a_variant_undoes_it(env_id: str) -> None:
    clips = {
        task.env_id: load_run_config(default_config_path(), task.env_id).hindsight.movement_clip
        for task in experiments.ENTRY_TASKS.values()
    }
    assert clips.pop("FetchPush-v4") == clips.pop("PandaPush-v3") == clips.pop("FetchSlide-v4") == 0.1
    assert set(clips.values()) == {None}  # the pick-and-place tasks draw uniformly
    shipped = load_run_config(default_config_path(), env_id)
    undone = load_run_config(default_config_path(), env_id, overrides=experiments.VARIANTS["no-movement"])
    assert shipped.hindsight.movement_floor == 0.01 and undone.hindsight.movement_clip is None
    # the run's config.yml reads as the entry before it: no movement key, every other one kept
    kept = {key: value for key, value in shipped.her.items() if not key.startswith("movement_")}
    assert undone.her == kept and undone.to_entry() == {**shipped.to_entry(), "her": kept}


@pytest.mark.parametrize("env_id", ["FetchPush-v4", "FetchSlide-v4"])
def test_fetch_push_and_slide_entries_alone_have_layer_norm_and_a_variant_gives_sb3s_networks(
    env_id: str,
) -> None:
    policy_kwargs = {
        task.env_id: load_run_config(default_config_path(), task.env_id).learner_kwargs["policy_kwargs"]
        for task in experiments.ENTRY_TASKS.values()
    }
    assert policy_kwargs.pop("FetchPush-v4") == {
        "net_arch": [256, 256],
        "layer_norm": True,
        "actor_average": 0.0025,
        "hidden_dtype": "auto",
    }
    assert policy_kwargs.pop("FetchSlide-v4") == {
        "net_arch": [256, 256, 256],
        "layer_norm": True,
        "actor_average": 0.0002,
        "hidden_dtype": "auto",
    }
    assert all(kwargs == {"net_arch": [256, 256, 256]} for kwargs in policy_kwargs.values())
    shipped = load_run_config(default_config_path(), env_id)
    undone = load_run_config(default_config_path(), env_id, overrides=experiments.VARIANTS["no-layer-norm"])
    shipped_kwargs = shipped.learner_kwargs["policy_kwargs"]
    assert undone.learner_kwargs["policy_kwargs"] == {**shipped_kwargs, "layer_norm": False}
    assert {**undone.to_entry(), "policy_kwargs": None} == {**shipped.to_entry(), "policy_kwargs": None}


def test_fetch_slide_alone_mixes_desired_goals_and_plays_the_actor_average_and_variants_undo_each() -> None:
    """The FetchSlide entry's own two changes, and ``no-goal-mix`` / ``no-actor-average`` giving the entry
    before them (its rows of 1.5M env steps), each changing nothing else."""
    goal_mixes = {
        task.env_id: load_run_config(default_config_path(), task.env_id).her.get("goal_mix")
        for task in experiments.ENTRY_TASKS.values()
    }
    assert goal_mixes.pop("FetchSlide-v4") == {"future": 0.5, "desired": 0.5}
    assert set(goal_mixes.values()) == {None}
    shipped = load_run_config(default_config_path(), "FetchSlide-v4")
    mixless = load_run_config(
        default_config_path(), "FetchSlide-v4", overrides=experiments.VARIANTS["no-goal-mix"]
    )
    assert mixless.her.get("goal_mix") is None
    assert experiments.entry_differences(shipped.to_entry(), mixless.to_entry()) == ["her"]
    greedy_actor = load_run_config(
        default_config_path(), "FetchSlide-v4", overrides=experiments.VARIANTS["no-actor-average"]
    )
    assert greedy_actor.learner_kwargs["policy_kwargs"]["actor_average"] == 0
    assert experiments.entry_differences(shipped.to_entry(), greedy_actor.to_entry()) == ["policy_kwargs"]


def test_fetch_push_alone_steps_five_envs_in_auto_dtype_and_variants_give_the_entry_before() -> None:
    """FetchPush's entry steps 5 envs for 50 steps per cycle with ``hidden_dtype: auto``; on a host with
    bfloat16 dot products (its rows') that is the bfloat16 entry, ``envs-5-steps-50+bf16``, and
    ``envs-2-steps-125+float32`` the entry before (its rows), changing nothing else."""
    shipped = load_run_config(default_config_path(), "FetchPush-v4")
    assert shipped.learner_kwargs["policy_kwargs"]["hidden_dtype"] == "auto"
    assert shipped.n_envs == 5 and shipped.to_entry()["train_freq"] == [50, "step"]
    others = [
        load_run_config(default_config_path(), task.env_id) for task in experiments.ENTRY_TASKS.values()
    ]
    assert {config.n_envs for config in others if config.env_id != "FetchPush-v4"} == {2}
    overrides = experiments.variant_overrides("envs-2-steps-125+float32")
    before = load_run_config(default_config_path(), "FetchPush-v4", overrides=overrides)
    assert before.n_envs == 2 and before.to_entry()["train_freq"] == [125, "step"]
    assert before.learner_kwargs["policy_kwargs"] == {
        **shipped.learner_kwargs["policy_kwargs"],
        "hidden_dtype": "float32",
    }
    assert experiments.entry_differences(shipped.to_entry(), before.to_entry()) == [
        "n_envs",
        "policy_kwargs",
        "train_freq",
    ]
    promoted = load_run_config(
        default_config_path(), "FetchPush-v4", overrides=experiments.variant_overrides("envs-5-steps-50+bf16")
    )
    assert experiments.entry_differences(shipped.to_entry(), promoted.to_entry()) == []
    assert experiments.entry_differences(
        shipped.to_entry(), promoted.to_entry(), bfloat16_products=False
    ) == ["policy_kwargs"]


@pytest.mark.parametrize("products", [True, False])
def test_auto_is_the_dtype_it_takes_on_the_hosts_cpu_and_no_other(products: bool) -> None:
    """``hidden_dtype: auto`` compares equal to bfloat16 on a host with bfloat16 dot products and to
    float32 (or no key) on one without, and to nothing else."""
    plain = {"model_class": "ddpg", "policy_kwargs": {"net_arch": [256, 256]}}
    auto = {**plain, "policy_kwargs": {"net_arch": [256, 256], "hidden_dtype": "auto"}}
    taken, other = ("bfloat16", "float32") if products else ("float32", "bfloat16")
    for dtype, same in ((taken, True), (other, False)):
        spelled = {**plain, "policy_kwargs": {"net_arch": [256, 256], "hidden_dtype": dtype}}
        for pair in ((auto, spelled), (spelled, auto)):
            differences = experiments.entry_differences(*pair, bfloat16_products=products)
            assert differences == ([] if same else ["policy_kwargs"])
    assert (experiments.entry_differences(auto, plain, bfloat16_products=products) == []) is not products
    assert experiments.entry_differences(auto, auto, bfloat16_products=products) == []


def test_a_rows_bfloat16_products_are_its_own_else_its_host_readings_else_true() -> None:
    assert experiments.row_bfloat16_products({"bfloat16_products": False, "host": {}}) is False
    assert experiments.row_bfloat16_products({"host": {"before": {"bfloat16_products": False}}}) is False
    assert experiments.row_bfloat16_products({"host": {"before": {"bfloat16_products": True}}}) is True
    assert experiments.row_bfloat16_products({"host": {"before": {"cpu": "AMD EPYC"}}}) is True
    assert experiments.row_bfloat16_products({}) is True
    assert experiments.row_bfloat16_products({"host": None}, default=False) is False
    assert experiments.row_bfloat16_products({"host": {"before": {"bfloat16_products": True}}}, default=False)


@pytest.mark.parametrize(("env_id", "rate"), [("FetchPush-v4", 0.0025), ("FetchSlide-v4", 0.0002)])
def test_fetch_push_and_slide_play_an_actor_average_and_no_actor_average_gives_the_actor(
    env_id: str, rate: float
) -> None:
    """FetchPush's average has the target actor's horizon, FetchSlide's a slow one; ``no-actor-average``
    changes that one key (training is the same either way)."""
    shipped = load_run_config(default_config_path(), env_id)
    assert shipped.learner_kwargs["policy_kwargs"]["actor_average"] == rate
    promoted = load_run_config(
        default_config_path(), env_id, overrides=experiments.VARIANTS["actor-average-0.0025"]
    )
    assert (promoted.to_entry() == shipped.to_entry()) is (env_id == "FetchPush-v4")
    actor = load_run_config(default_config_path(), env_id, overrides=experiments.VARIANTS["no-actor-average"])
    assert actor.learner_kwargs["policy_kwargs"] == {
        **shipped.learner_kwargs["policy_kwargs"],
        "actor_average": 0,
    }
    assert experiments.entry_differences(shipped.to_entry(), actor.to_entry()) == ["policy_kwargs"]


@pytest.mark.parametrize(
    ("key", "default", "other"), [("actor_average", 0, 0.0025), ("hidden_dtype", "float32", "bfloat16")]
)
def test_a_policy_key_at_its_default_is_the_same_entry_as_none_and_any_other_value_is_not(
    key: str, default: Any, other: Any
) -> None:
    """Rows recorded before ``actor_average`` and ``hidden_dtype`` existed name neither;
    ``no-actor-average`` spells the first 0."""
    recorded = {"model_class": "ddpg", "policy_kwargs": {"net_arch": [256, 256], "layer_norm": True}}
    for value, differences in ((default, []), (other, ["policy_kwargs"])):
        spelled = {**recorded, "policy_kwargs": {**recorded["policy_kwargs"], key: value}}
        assert experiments.entry_differences(spelled, recorded) == differences
        assert experiments.entry_differences(recorded, spelled) == differences
    assert experiments.entry_differences({**recorded, "model_class": "td3"}, recorded) == ["model_class"]


#: The parts FetchSlide's two-worker entry took, and the parts that give back the one-process entry before it.
SLIDE_PROMOTED = "auto+updates-40+lr-linear+action-l2-0.1+random-0.2+workers-2-envs-2+budget-2m+minutes-115"
SLIDE_PREVIOUS = "float32+updates-20+lr-constant+action-l2-1+random-0.3+one-process+budget-2.5m+no-minutes"


@pytest.mark.parametrize(
    ("promoted", "previous"), list(zip(SLIDE_PROMOTED.split("+"), SLIDE_PREVIOUS.split("+"), strict=True))
)
def test_each_part_before_fetch_slides_entry_undoes_one_part_it_took(promoted: str, previous: str) -> None:
    """Each part of ``SLIDE_PREVIOUS`` changes the shipped FetchSlide entry (on a host with bfloat16 dot
    products), and its promoted part after it gives the entry back."""
    task = experiments.ENTRY_TASKS[SLIDE]
    if experiments.budget_of(promoted) is not None:
        assert (experiments.budget_of(promoted), experiments.budget_of(previous)) == (task.steps, 2_500_000)
        return
    shipped = command_entry(task)
    before = task.with_variant(previous)
    undone = command_entry(before, experiments.variant_overrides(previous))
    assert experiments.entry_differences(shipped, undone, task.workers)
    back = task.with_variant(f"{previous}+{promoted}")
    assert (back.workers, back.steps) == (task.workers, task.steps)
    redone = command_entry(back, experiments.variant_overrides(f"{previous}+{promoted}"))
    assert experiments.entry_differences(shipped, redone, task.workers) == []


def test_the_parts_before_fetch_slides_entry_give_the_one_process_recipe_of_its_earlier_rows() -> None:
    task = experiments.ENTRY_TASKS[SLIDE].with_variant(SLIDE_PREVIOUS)
    config = load_run_config(
        task.config_path(), task.env_id, overrides=experiments.variant_overrides(SLIDE_PREVIOUS)
    )
    learner = config.learner_kwargs
    assert (task.workers, task.steps, config.workers, config.max_minutes) == (1, 2_500_000, 1, None)
    assert (learner["batch_size"], learner["gradient_steps"], learner["learning_rate"]) == (2048, 20, 1e-3)
    assert learner["train_freq"] == [250, "step"] and learner["policy_kwargs"]["hidden_dtype"] == "float32"
    assert (config.her["action_l2"], config.her["random_action_prob"]) == (1.0, 0.3)


@pytest.mark.parametrize(("variant", "same_on_bfloat16_host"), [("bf16", True), ("float32", False)])
def test_a_dtype_variant_changes_only_the_hidden_dtype_of_the_fetch_slide_entry_and_only_where_auto_differs(
    variant: str, same_on_bfloat16_host: bool
) -> None:
    """FetchSlide's entry ships ``hidden_dtype: auto``: ``bf16`` is it on a host with bfloat16 dot products,
    ``float32`` on one without; elsewhere each differs in the hidden dtype alone."""
    shipped = load_run_config(default_config_path(), "FetchSlide-v4")
    changed = load_run_config(default_config_path(), "FetchSlide-v4", overrides=experiments.VARIANTS[variant])
    for products in (True, False):
        differences = experiments.entry_differences(
            shipped.to_entry(), changed.to_entry(), bfloat16_products=products
        )
        assert differences == ([] if products == same_on_bfloat16_host else ["policy_kwargs"])
    assert changed.learner_kwargs["policy_kwargs"] == {
        **shipped.learner_kwargs["policy_kwargs"],
        "hidden_dtype": {"bf16": "bfloat16", "float32": "float32"}[variant],
    }


def test_an_unknown_variant_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(UsageError, match="updates-40"):
        experiments.variant_overrides("updates-41")
    with pytest.raises(UsageError, match="unknown variant 'updates-41'"):
        experiments.variant_overrides("td3+updates-41")


def test_variants_joined_by_plus_make_both_changes_and_are_taken_only_as_both(tmp_path: pathlib.Path) -> None:
    overrides = experiments.variant_overrides("n-sampled-goal-4+td3")
    assert overrides == (*experiments.VARIANTS["n-sampled-goal-4"], *experiments.VARIANTS["td3"])
    config = load_run_config(default_config_path(), "FetchPush-v4", overrides=overrides)
    assert config.model_class == "td3" and config.hindsight.n_sampled_goal == 4
    task = experiments.ENTRY_TASKS[TWO_WORKERS]
    run_dir = command_run(tmp_path, task, command_entry(task, overrides))
    experiments.check_shipped_entry(task, run_dir, overrides)
    with pytest.raises(UsageError, match="pass the --variant it ran"):
        experiments.check_shipped_entry(task, run_dir, experiments.variant_overrides("td3"))


def test_a_workers_variant_splits_the_budget_and_schedules_among_the_workers() -> None:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    assert experiments.variant_workers("workers-2") == experiments.variant_workers("td3+workers-2") == 2
    assert experiments.variant_workers(None) is None and experiments.variant_workers("td3") is None
    row = task.with_variant("td3+workers-2")
    assert row.workers == 2 and row.steps == task.steps
    arguments = row.train_arguments(0, experiments.variant_overrides("workers-2"))
    cut = arguments.index("-params")
    options = dict(zip(arguments[:cut:2], arguments[1:cut:2], strict=True))
    assert "workers:2" in arguments[cut:]  # each worker takes the settings as given, undivided
    assert options["-n"] == str(task.steps // 2) and options["--eval-freq"] == str(task.eval_freq // 2)
    assert options["--save-freq"] == str(experiments.ENTRY_SAVE_FREQ // 2) and options["--workers"] == "2"
    assert "--workers" not in task.train_arguments(0) and task.with_variant("td3").workers == 1


def train_options(arguments: list[str]) -> dict[str, str]:
    """The options of ``her-wrap train`` arguments before any ``-params``."""
    cut = arguments.index("-params") if "-params" in arguments else len(arguments)
    return dict(zip(arguments[:cut:2], arguments[1:cut:2], strict=True))


def test_an_entry_with_its_own_workers_trains_on_them_each_its_share_of_the_env_steps() -> None:
    task = experiments.ENTRY_TASKS[TWO_WORKERS]
    arguments = task.train_arguments(0)
    assert task.workers == 2 and task.steps == 500_000 and "-params" not in arguments
    assert train_options(arguments) == {
        "--env": "FetchPush-v4",
        "--seed": "0",
        "-n": "250000",
        "--eval-freq": "10000",
        "--eval-episodes": "50",
        "--save-freq": "50000",
        "--workers": "2",
    }
    # The row's command trains what ``her-wrap train --env FetchPush-v4`` trains: the entry as it stands.
    shipped = load_run_config(default_config_path(), "FetchPush-v4")
    assert shipped.workers == 2 and shipped.n_timesteps == 250_000
    assert load_run_config(default_config_path(), "FetchPush-v4", n_timesteps=250_000, workers=2) == shipped
    # A variant that sets no workers keeps the entry's; one-process trains it in one process.
    assert task.with_variant("td3").workers == task.with_variant("budget-600k").workers == 2
    assert train_options(task.with_variant("budget-600k").train_arguments(0))["-n"] == "300000"
    one = task.with_variant("one-process+budget-600k")
    options = train_options(one.train_arguments(0, experiments.variant_overrides("one-process")))
    assert one.workers == 1 and "--workers" not in options
    assert (options["-n"], options["--eval-freq"], options["--save-freq"]) == ("600000", "20000", "100000")


def test_a_run_of_the_two_worker_entry_on_one_worker_is_refused_naming_the_workers_variants(
    tmp_path: pathlib.Path,
) -> None:
    task = experiments.ENTRY_TASKS[TWO_WORKERS]
    run_dir = fake_run(tmp_path, command_entry(task), eval_freq=task.eval_freq // 2, env_id=task.env_id)
    with pytest.raises(UsageError, match=r"trained on 1 worker\(s\), not 2; pass the --variant it ran "
                       r"\(workers variants: one-process, workers-2"):  # fmt: skip
        experiments.check_shipped_entry(task, run_dir)


def test_a_run_on_two_workers_is_taken_only_as_the_workers_variant(tmp_path: pathlib.Path) -> None:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    overrides = experiments.variant_overrides("workers-2")
    row = task.with_variant("workers-2")
    entry = command_entry(row, overrides)
    run_dir = command_run(tmp_path, row, entry)
    experiments.check_shipped_entry(row, run_dir, overrides)
    with pytest.raises(UsageError, match=r"trained on 2 worker.*workers-2"):
        experiments.check_shipped_entry(task, run_dir, overrides)
    with pytest.raises(UsageError, match=f"n_timesteps is {task.steps // 2}, the task's is {task.steps}"):
        experiments.check_shipped_entry(
            task, fake_run(tmp_path / "one", entry, eval_freq=task.eval_freq // 2)
        )


def test_a_run_of_the_divided_entry_on_two_workers_is_taken_as_its_variant(tmp_path: pathlib.Path) -> None:
    # ``her-wrap train --workers 2`` records the entry it divided among the workers, ``workers: 2`` in it,
    # as the variant's own ``workers:2`` does.
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    variant = "n-steps-3+workers-2-envs-2"
    overrides = experiments.variant_overrides(variant)
    divided = tuple(item for item in overrides if item != "workers:2")
    assert divided != overrides
    row = task.with_variant(variant)
    entry = load_run_config(
        default_config_path(), task.env_id, n_timesteps=task.steps // 2, overrides=divided, workers=2
    ).to_entry()
    assert entry["workers"] == 2 and entry == command_entry(row, overrides)
    run_dir = command_run(tmp_path, row, entry)
    experiments.check_shipped_entry(row, run_dir, overrides)
    with pytest.raises(UsageError, match="differs in her"):
        experiments.check_shipped_entry(
            task.with_variant("workers-2-envs-2"), run_dir, experiments.variant_overrides("workers-2-envs-2")
        )


def test_a_workers_variant_keeps_the_entry_or_changes_it_and_always_sets_the_workers() -> None:
    assert experiments.VARIANT_WORKERS and set(experiments.VARIANT_WORKERS) <= set(experiments.VARIANTS)
    # Each worker takes the whole entry: her-wrap is told not to divide it among the workers.
    assert experiments.variant_overrides("workers-2-paper") == ("workers:2",)
    assert experiments.variant_workers("workers-2-paper") == 2
    # Each sets its workers last, so that it wins over a part before it (one-process+workers-2).
    for name, workers in experiments.VARIANT_WORKERS.items():
        assert experiments.VARIANTS[name][-1] == f"workers:{workers}", name


@pytest.mark.parametrize("variant", ["workers-2", "workers-2-envs-2"])
def test_a_two_worker_variant_keeps_the_entrys_env_steps_rows_and_random_steps_per_update(
    variant: str,
) -> None:
    shipped = load_run_config(default_config_path(), ONE_PROCESS_ENV)
    split = load_run_config(default_config_path(), ONE_PROCESS_ENV, overrides=experiments.VARIANTS[variant])
    workers = experiments.variant_workers(variant)
    assert workers == 2 and per_update(split, workers) == per_update(shipped, 1) == (25, 2048, 1000)


def per_update(config: Any, workers: int) -> tuple[int, int, int]:
    """Env steps, rows and random steps (before learning starts) per gradient step, all workers' together."""
    learner = config.learner_kwargs
    frequency, unit = learner["train_freq"]
    assert unit == "step"
    env_steps = frequency * config.n_envs * workers // learner["gradient_steps"]
    return env_steps, learner["batch_size"] * workers, learner["learning_starts"] * workers


def test_fetch_push_on_two_workers_keeps_the_one_process_entrys_env_steps_per_update_and_one_process_undoes_it() -> (
    None
):
    shipped = load_run_config(default_config_path(), "FetchPush-v4")
    one = load_run_config(
        default_config_path(),
        "FetchPush-v4",
        overrides=experiments.variant_overrides("envs-2-steps-125+one-process"),
    )
    # The same env steps and random steps per update, on half the rows (2 x 512; batch-1024 gives 2048).
    assert per_update(shipped, 2) == (25, 1024, 1000) and per_update(one, 1) == (25, 2048, 1000)
    before = load_run_config(
        default_config_path(), "FetchPush-v4", overrides=experiments.VARIANTS["batch-1024"]
    )
    assert per_update(before, 2) == per_update(one, 1)
    assert one.workers == 1 and experiments.variant_workers("one-process") == 1


def test_the_one_process_preset_is_the_labs_former_fetch_push_entry() -> None:
    # her_wrap.runs.presets.MANIPULATION_DDPG (in the wheel) and the lab's variant that gives back the
    # one-process entry of 3 x 256 (rows, scripts/measure_scaling.py) must configure the same run.
    from her_wrap.runs import presets

    former = "envs-2-steps-125+float32+no-actor-average+n-steps-1+net-3x256+one-process"
    assert experiments.variant_workers(former) == 1
    configs = [
        load_run_config(default_config_path(), "FetchPush-v4", overrides=overrides)
        for overrides in (presets.MANIPULATION_DDPG_CHANGES, experiments.variant_overrides(former))
    ]
    assert configs[0].to_entry() == configs[1].to_entry()
    assert configs[0].workers == 1 and configs[0].learner_kwargs["batch_size"] == 2048
    assert configs[0].to_entry() != load_run_config(default_config_path(), "FetchPush-v4").to_entry()


def test_a_curve_of_several_workers_counts_every_workers_env_steps(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "evaluations.npz"
    np.savez(path, timesteps=[10_000, 20_000], successes=[[0, 1], [1, 1]], train_seconds=[30.0, 61.0])
    assert experiments.entry_curve(path, workers=2) == ([20_000, 40_000], [0.5, 1.0], [30.0, 61.0])
    assert experiments.entry_curve(path)[0] == [10_000, 20_000]


def test_two_variants_that_both_set_the_workers_are_refused() -> None:
    experiments.VARIANT_WORKERS["workers-3"] = 3
    experiments.VARIANTS["workers-3"] = ("workers:3",)
    try:
        for variant in ("workers-2+workers-3", "one-process+workers-2+workers-3", "workers-2+one-process"):
            with pytest.raises(UsageError, match="sets the workers twice"):
                experiments.variant_workers(variant)
    finally:
        del experiments.VARIANT_WORKERS["workers-3"], experiments.VARIANTS["workers-3"]


@pytest.mark.parametrize("variant", ["workers-2", "workers-2-paper", "workers-2-envs-2"])
def test_one_process_before_a_workers_variant_trains_on_that_variants_workers_and_settings(
    variant: str,
) -> None:
    """``one-process+workers-2`` is ``workers-2`` on the one-process entry: FetchPickAndPlace's regime."""
    joined = f"one-process+{variant}"
    assert experiments.variant_workers(joined) == 2
    assert experiments.variant_argument(joined) == joined
    task = experiments.ENTRY_TASKS[TWO_WORKERS].with_variant(joined)
    assert task.workers == 2 and "--workers" in task.train_arguments(0)
    on_fetch_push = load_run_config(
        default_config_path(),
        "FetchPush-v4",
        overrides=experiments.variant_overrides(f"envs-2-steps-125+{joined}"),
    )
    on_one_process = load_run_config(
        default_config_path(), ONE_PROCESS_ENV, overrides=experiments.VARIANTS[variant]
    )
    assert on_fetch_push.workers == 2
    assert on_fetch_push.learner_kwargs["batch_size"] == on_one_process.learner_kwargs["batch_size"]
    assert per_update(on_fetch_push, 2) == per_update(on_one_process, 2)


def test_the_sbx_row_runs_its_own_shipped_file_and_only_that(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("sbx", reason="the SBX entries need the jax extra (pip install her_wrap[jax])")
    task = experiments.ENTRY_TASKS["fetch-push-sbx-crossq"]
    assert task.config_path() == default_config_path().with_name("her_jax.yml")
    arguments = task.train_arguments(0)
    assert arguments[arguments.index("-c") + 1] == "configs/her_jax.yml"
    assert (
        task.train_arguments(0, config_file="/x/her_jax.yml")[arguments.index("-c") + 1] == "/x/her_jax.yml"
    )
    crossq = command_entry(task)
    assert crossq["model_class"] == "sbx.crossq"
    experiments.check_shipped_entry(task, command_run(tmp_path / "crossq", task, crossq))
    ddpg = command_entry(dataclasses.replace(task, config="her.yml"))
    with pytest.raises(UsageError, match=r"shipped configs/her_jax\.yml one.*differs in"):
        experiments.check_shipped_entry(task, command_run(tmp_path / "ddpg", task, ddpg))
    assert (
        experiments.LEARNERS["sbx.crossq"].label == "sbx.CrossQ"
        and experiments.LEARNERS["ddpg"].label == "DDPG"
    )


def test_minutes_to_a_success_level_come_from_the_first_point_reaching_it() -> None:
    record = {
        "curve_steps": [0, 20_000, 40_000],
        "curve_success": [0.0, 0.6, 0.95],
        "curve_seconds": [0, 60, 150],
    }
    assert results.first_reaching(record, 0.5) == (20_000, 1.0)
    assert results.first_reaching(record, 0.9) == (40_000, 2.5)
    assert results.first_reaching(record, 0.99) is None


def entry_record(seed: int, success: list[float], final: float) -> dict[str, Any]:
    return {
        "kind": "entry",
        "env_id": "FetchPush-v4",
        "learner": "DDPG",
        "seed": seed,
        "steps": 60_000,
        "final_success": final,
        "train_seconds": 180.0,
        "curve_steps": [20_000, 40_000, 60_000],
        "curve_success": success,
        "curve_seconds": [60, 120, 180],
        "command": f"python scripts/robotics_results.py run fetch-push-ddpg --seeds {seed}",
    }


def cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.split("|")[1:-1]]


def test_each_seed_gets_its_own_row_with_steps_and_minutes_to_each_milestone() -> None:
    rows = results.manipulation_rows([entry_record(0, [0.6, 0.82, 0.84], 0.77)])
    assert len(rows) == 1  # one seed: no median or worst rows
    row = cells(rows[0])
    assert results.MILESTONES == (0.5, 0.8, 0.9)
    assert row[2:7] == ["0", "20k / 40k / -", "1 / 2 / -", "0.77", "60,000"]
    assert row[7] == "3.0"


def test_a_lagging_seed_makes_the_worst_row_and_is_not_averaged_away() -> None:
    records = [
        entry_record(0, [0.6, 0.95, 0.97], 0.96),
        entry_record(1, [0.7, 0.92, 0.98], 0.97),
        entry_record(2, [0.1, 0.2, 0.3], 0.29),
    ]
    rows = [cells(row) for row in results.manipulation_rows(records)]
    assert [row[2] for row in rows] == ["0", "1", "2", "median of 3", "**worst** of 3"]
    median, worst = rows[3], rows[4]
    assert median[3:6] == ["20k / 40k / 40k", "1 / 2 / 2", "0.96"]
    assert worst[3:6] == ["- / - / -", "- / - / -", "0.29"]


def test_the_mrl_figure_stands_beside_the_first_row_of_its_task() -> None:
    rows = [cells(row) for row in results.manipulation_rows([entry_record(0, [0.6, 0.9, 0.9], 0.9)])]
    assert rows[0][8].startswith("~0.25M")
    assert results.mrl_steps("PandaPush-v3") == "-"


def test_the_readme_table_has_a_column_per_seed_and_the_worst_seed() -> None:
    groups = {
        "fetch-push-ddpg": [entry_record(0, [0.6, 0.95, 0.97], 0.96), entry_record(1, [0.1, 0.2, 0.3], 0.29)]
    }
    header, _, row = results.readme_table(groups).splitlines()
    assert cells(header)[1:4] == ["run 1", "run 2", "worst seed"]
    assert cells(row)[1] == "seed 0: **0.96** (0.9 at 40k, 2 min)"
    assert cells(row)[3] == "seed 1: **0.29** (0.9 not reached in 60k)"


def test_a_recipe_names_its_file_and_workers_and_only_the_her_yml_entry_is_the_shipped_one() -> None:
    shipped = entry_record(0, [0.6, 0.95, 0.97], 0.96)
    crossq = {**entry_record(0, [0.1, 0.2, 0.3], 0.3), "learner": "sbx.CrossQ", "config": "her_jax.yml"}
    workers = {**entry_record(0, [0.1, 0.2, 0.3], 0.3), "variant": "workers-2", "workers": 2}
    workers["overrides"] = list(experiments.variant_overrides("workers-2"))
    assert results.recipe_name(crossq) == "HER(sbx.CrossQ), `configs/her_jax.yml`"
    assert results.recipe_name(workers).startswith(
        "HER(DDPG), `configs/her.yml` on 2 workers with `n_envs:1`"
    )
    groups = {
        "fetch-push-sbx-crossq": [crossq],
        "fetch-push-ddpg+workers-2": [workers],
        "fetch-push-ddpg": [shipped],
    }
    assert results.by_task(groups)["FetchPush-v4"][0] == [shipped]
    _, _, row = results.readme_table(groups).splitlines()
    assert cells(row)[1] == "seed 0: **0.96** (0.9 at 40k, 2 min)"


def test_a_task_figure_plots_the_shipped_entry_and_the_references_but_no_variant() -> None:
    shipped = [entry_record(0, [0.6, 0.95, 0.97], 0.96), entry_record(1, [0.5, 0.9, 0.98], 0.97)]
    variant = [{**entry_record(0, [0.1, 0.2, 0.3], 0.3), "variant": "bf16"}]
    zoo = [{**entry_record(0, [0.0, 0.0, 0.1], 0.1), "kind": "reference", "learner": "TQC, zoo"}]
    groups = {"fetch-push-zoo-tqc": zoo, "fetch-push-ddpg+bf16": variant, "fetch-push-ddpg": shipped}
    env_groups = results.by_task(groups)["FetchPush-v4"]
    assert len(env_groups) == 3
    assert results.figure_groups(env_groups) == [shipped, zoo]
    # A task that has only variants (no shipped entry yet) plots them all.
    assert results.figure_groups([variant, zoo]) == [variant, zoo]


def test_the_recorded_results_file_makes_every_table() -> None:
    groups = results.group_records(results.load_results(RESULTS_FILE))
    assert "FetchPush-v4" in results.manipulation_table(groups)
    assert "FetchPush-v4" in results.readme_table(groups)
    assert "FetchReach-v4" in results.reach_table(groups)


def test_every_reference_reads_an_unnormalized_her_entry_of_the_zoo_for_a_shipped_task() -> None:
    pytest.importorskip("rl_zoo3")
    for name, task in experiments.REFERENCE_TASKS.items():
        entry = experiments.zoo_entry(task)
        assert entry["replay_buffer_class"] == "HerReplayBuffer", name
        assert not entry.get("normalize", False), name
        assert isinstance(entry["replay_buffer_kwargs"], dict), name
        assert task.env_id in {entry_task.env_id for entry_task in experiments.ENTRY_TASKS.values()}, name


def _stopped_run(tmp_path: pathlib.Path, variant: str | None) -> pathlib.Path:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    run_dir = command_run(tmp_path, task, command_entry(task, experiments.variant_overrides(variant)))
    np.savez(
        run_dir / "evaluations.npz",
        timesteps=[20_000, 40_000],
        successes=[[0, 0, 1, 0], [1, 1, 0, 1]],
        train_seconds=[50.0, 101.0],
    )
    return run_dir


def test_a_stopped_run_gives_its_curve_and_the_command_that_reproduces_it(tmp_path: pathlib.Path) -> None:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    run_dir = _stopped_run(tmp_path, "updates-40")
    record = experiments.stopped_run_record(ONE_PROCESS, task, run_dir, "updates-40", note="session ended")
    assert record["stopped_at"] == 40_000 and record["budget"] == task.steps
    assert record["timesteps"] == [20_000, 40_000] and record["success"] == [0.25, 0.75]
    assert record["train_seconds"] == [50.0, 101.0]
    assert record["seed"] == 3 and record["note"] == "session ended" and "checkpoint" not in record
    assert (
        record["command"]
        == f"python scripts/robotics_results.py run {ONE_PROCESS} --seeds 3 --variant updates-40"
    )
    assert record["train_command"].endswith("-params gradient_steps:40")
    # The run must still be the command it claims: without the variant it is another recipe.
    with pytest.raises(UsageError, match="differs"):
        experiments.stopped_run_record(ONE_PROCESS, task, run_dir)


def test_a_stopped_run_of_the_two_worker_entry_counts_both_workers_env_steps(tmp_path: pathlib.Path) -> None:
    task = experiments.ENTRY_TASKS[TWO_WORKERS]
    run_dir = command_run(tmp_path, task)
    # her-wrap train records one worker's env steps: 10k and 20k each, 20k and 40k in all.
    np.savez(
        run_dir / "evaluations.npz",
        timesteps=[10_000, 20_000],
        successes=[[0, 1], [1, 1]],
        train_seconds=[30.0, 61.0],
    )
    record = experiments.stopped_run_record(TWO_WORKERS, task, run_dir)
    assert record["timesteps"] == [20_000, 40_000] and record["budget"] == 500_000
    assert record["train_command"].endswith("-n 250000 --eval-freq 10000 --eval-episodes 50 --save-freq 50000 "
                                            "--workers 2")  # fmt: skip
    with pytest.raises(UsageError, match=r"trained on 2 worker\(s\), not 1"):
        experiments.stopped_run_record(TWO_WORKERS, task, run_dir, "one-process")


def test_the_one_process_variant_takes_a_run_of_fetch_pushs_entry_before_it_took_two_workers(
    tmp_path: pathlib.Path,
) -> None:
    """A run of FetchPush's one-process entry recorded no ``workers``; named from the entry as it now is,
    ``no-actor-average+batch-1024+n-steps-1+net-3x256+one-process+budget-600k``, it is that row's command,
    and only that row's (``one-process`` sets the batch of 2048 after ``batch-1024``)."""
    variant = (
        "envs-2-steps-125+float32+no-actor-average+batch-1024+n-steps-1+net-3x256+one-process+budget-600k"
    )
    record = results.load_results(RESULTS_FILE)[f"{TWO_WORKERS}+{variant}/0"]
    assert "workers" not in record["settings"] and record["workers"] == 1 and record["steps"] == 600_000
    task = experiments.ENTRY_TASKS[TWO_WORKERS]
    row = task.with_variant(variant)
    overrides = experiments.variant_overrides(variant)
    assert (row.workers, row.steps) == (1, 600_000) and overrides == tuple(record["overrides"])
    # The row ran before the entry named actor_average: no key, as actor_average 0 keeps no average.
    assert "actor_average" not in record["settings"]["policy_kwargs"]
    assert experiments.entry_differences(command_entry(row, overrides), record["settings"]) == []
    run_dir = command_run(tmp_path, row, record["settings"])
    experiments.check_shipped_entry(row, run_dir, overrides)
    for other in (
        "no-actor-average+batch-1024+n-steps-1+one-process+budget-600k",
        "no-actor-average+batch-1024+n-steps-1+net-3x256+budget-600k",
    ):
        with pytest.raises(UsageError, match="pass the --variant it ran"):
            experiments.check_shipped_entry(
                task.with_variant(other), run_dir, experiments.variant_overrides(other)
            )


def test_a_stopped_run_without_the_checkpoint_asked_for_names_the_ones_it_has(tmp_path: pathlib.Path) -> None:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    run_dir = _stopped_run(tmp_path, None)
    write_agent_zip(run_dir / "rl_model_20000_steps.zip")
    with pytest.raises(UsageError, match=r"no checkpoint at 40000 steps; checkpoints: 20000$"):
        experiments.stopped_run_record(ONE_PROCESS, task, run_dir, checkpoint=40_000)


def test_a_stopped_runs_checkpoint_is_loaded_and_evaluated_on_fresh_episodes(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from her_wrap import HER

    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    run_dir = _stopped_run(tmp_path, None)
    HER("MultiInputPolicy", ONE_PROCESS_ENV, "ddpg", policy_kwargs=dict(net_arch=[8])).save(
        run_dir / "rl_model_20000_steps.zip"
    )
    evaluated: list[tuple[str, int]] = []

    def success(model: Any, env_id: str, seed: int) -> float:
        assert isinstance(model, HER) and model.model.policy.actor.mu[0].out_features == 8
        evaluated.append((env_id, seed))
        return 0.5

    monkeypatch.setattr(experiments, "final_success", success)
    record = experiments.stopped_run_record(ONE_PROCESS, task, run_dir, checkpoint=20_000)
    assert evaluated == [(ONE_PROCESS_ENV, 3)]
    assert record["checkpoint"]["timesteps"] == 20_000 and record["checkpoint"]["success"] == 0.5
    assert "--load-checkpoint 20000 -n 100" in record["checkpoint"]["command"]


def _recorded(run_dir: pathlib.Path, seed: int = 3) -> dict[str, Any]:
    """A row's record of ``run_dir`` as ``record`` writes it (the fields a budget reads)."""
    return {
        "seed": seed,
        "run_dir": str(run_dir),
        "steps": 600_000,
        "final_success": 0.97,
        "train_seconds": 3000.0,
    }


def test_a_budget_evaluates_every_recorded_seeds_checkpoint_beside_its_final_agent(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from her_wrap import HER

    run_dir = _stopped_run(tmp_path, None)
    HER("MultiInputPolicy", ONE_PROCESS_ENV, "ddpg", policy_kwargs=dict(net_arch=[8])).save(
        run_dir / "rl_model_40000_steps.zip"
    )
    evaluated: list[tuple[int, int]] = []

    def success(model: Any, env_id: str, seed: int) -> float:
        evaluated.append((model.model.policy.actor.mu[0].out_features, seed))
        return 0.5

    monkeypatch.setattr(experiments, "final_success", success)
    record = experiments.budget_record(ONE_PROCESS, [_recorded(run_dir)], [40_000])
    assert evaluated == [(8, 3)]
    (seed,) = record["seeds"]
    assert seed["checkpoints"][0]["timesteps"] == 40_000 and seed["checkpoints"][0]["success"] == 0.5
    # The training seconds of the checkpoint are the curve's at its env steps.
    assert seed["checkpoints"][0]["train_seconds"] == 101.0
    assert seed["final"] == {"timesteps": 600_000, "success": 0.97, "train_seconds": 3000.0}
    assert record["command"] == f"python scripts/robotics_results.py budget {ONE_PROCESS} --steps 40000"
    # --seeds leaves out a recorded seed (its run folder need not exist), and the command says so.
    gone = _recorded(tmp_path / "gone", seed=0)
    evaluated.clear()
    chosen = experiments.budget_record(ONE_PROCESS, [gone, _recorded(run_dir)], [40_000], seeds=[3])
    assert evaluated == [(8, 3)] and [seed["seed"] for seed in chosen["seeds"]] == [3]
    assert chosen["command"].endswith("--steps 40000 --seeds 3")
    assert experiments.budget_table(record).splitlines()[2:] == [
        "| 3 | 0.50 (2) | 0.97 (50) |",
        "| worst | 0.50 | 0.97 |",
    ]


def test_a_budget_can_play_every_agents_target_actor_the_final_ones_too(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch as th

    from her_wrap import HER

    run_dir = _stopped_run(tmp_path, None)
    saved = {}
    for name, shift in (("rl_model_40000_steps.zip", 1.0), (f"{ONE_PROCESS_ENV}.zip", 2.0)):
        agent = HER("MultiInputPolicy", ONE_PROCESS_ENV, "ddpg", policy_kwargs=dict(net_arch=[8]))
        with th.no_grad():
            for parameter in agent.model.policy.actor_target.parameters():
                parameter.add_(shift)  # a target actor unlike the actor
        agent.save(run_dir / name)
        saved[name] = agent.model.policy.actor_target.state_dict()
    played: list[str] = []

    def success(model: Any, env_id: str, seed: int) -> float:
        actor = model.model.policy.actor.state_dict()
        played.append(
            next(
                name for name, state in saved.items() if th.equal(actor["mu.0.weight"], state["mu.0.weight"])
            )
        )
        return 0.25 if played[-1].startswith("rl_model") else 0.75

    monkeypatch.setattr(experiments, "final_success", success)
    record = experiments.budget_record(ONE_PROCESS, [_recorded(run_dir)], [40_000], greedy="target-actor")
    assert played == ["rl_model_40000_steps.zip", f"{ONE_PROCESS_ENV}.zip"]
    (seed,) = record["seeds"]
    assert seed["checkpoints"][0]["success"] == 0.25
    # enjoy would play the agent's own actor: the checkpoint names the command that plays its target actor.
    assert seed["checkpoints"][0]["command"] == (
        f"python scripts/robotics_results.py budget {ONE_PROCESS} --steps 40000 --seeds {seed['seed']} "
        "--greedy target-actor"
    )
    assert seed["final"] == {
        "timesteps": 600_000,
        "success": 0.75,
        "train_seconds": 3000.0,
    }  # not the row's 0.97
    assert record["greedy"] == "target-actor" and record["command"].endswith(
        "--steps 40000 --greedy target-actor"
    )
    with pytest.raises(UsageError, match="greedy actions from 'average': choose one of agent, target-actor"):
        experiments.budget_record(ONE_PROCESS, [_recorded(run_dir)], [40_000], greedy="average")
    HER("MultiInputPolicy", ONE_PROCESS_ENV, "sac", policy_kwargs=dict(net_arch=[8])).save(
        run_dir / "rl_model_40000_steps.zip"
    )
    with pytest.raises(UsageError, match=r"SAC has no target actor .*greedy agent"):
        experiments.budget_record(ONE_PROCESS, [_recorded(run_dir)], [40_000], greedy="target-actor")


def test_a_budget_names_what_is_missing(tmp_path: pathlib.Path) -> None:
    run_dir = _stopped_run(tmp_path, None)
    write_agent_zip(run_dir / "rl_model_20000_steps.zip")
    with pytest.raises(UsageError, match=f"no recorded seed of {ONE_PROCESS}\\+td3"):
        experiments.budget_record(ONE_PROCESS, [], [20_000], "td3")
    with pytest.raises(UsageError, match=r"is gone; .* leave the seed out with --seeds"):
        experiments.budget_record(ONE_PROCESS, [_recorded(tmp_path / "elsewhere")], [20_000])
    with pytest.raises(
        UsageError, match=f"no record of seed\\(s\\) 1 in {ONE_PROCESS}; its recorded seeds: 3"
    ):
        experiments.budget_record(ONE_PROCESS, [_recorded(run_dir)], [20_000], seeds=[1, 3])
    with pytest.raises(UsageError, match="a run of seed 3"):
        experiments.budget_record(ONE_PROCESS, [_recorded(run_dir, seed=4)], [20_000])
    with pytest.raises(UsageError, match=r"no checkpoint at 40000 steps; checkpoints: 20000$"):
        experiments.budget_record(ONE_PROCESS, [_recorded(run_dir)], [40_000])


def test_every_manipulation_row_trains_its_shipped_entry_for_the_entrys_own_budget() -> None:
    """``her-wrap train --env ID`` and a row's command train for the same env steps on as many workers."""
    for name, task in experiments.ENTRY_TASKS.items():
        shipped = load_run_config(task.config_path(), task.env_id)
        workers = shipped.workers or 1
        assert (task.steps, task.workers) == (shipped.n_timesteps * workers, workers), (
            f"{name}: rows run {task.steps} on {task.workers}, the entry {shipped.n_timesteps} on {workers}"
        )


def test_a_budget_variant_sets_the_env_steps_and_nothing_else() -> None:
    assert experiments.variant_budget("budget-1m") == 1_000_000
    assert experiments.variant_budget("no-grasp-start+budget-1.5m") == 1_500_000
    assert experiments.variant_budget("budget-800k") == 800_000
    assert experiments.variant_budget("td3") is None and experiments.variant_budget(None) is None
    assert (
        experiments.variant_overrides("no-grasp-start+budget-1.5m") == experiments.VARIANTS["no-grasp-start"]
    )
    task = experiments.ENTRY_TASKS["fetch-pick-and-place-ddpg"]
    assert task.with_variant("budget-1m").steps == 1_000_000 and task.with_variant("td3") is task
    arguments = task.with_variant("budget-1m").train_arguments(0)
    assert arguments[arguments.index("-n") + 1] == "1000000" and "-params" not in arguments
    assert experiments.variant_argument("budget-1m+td3") == "budget-1m+td3"


def test_two_budgets_or_a_budget_of_nothing_are_refused() -> None:
    with pytest.raises(UsageError, match="sets the budget twice"):
        experiments.variant_budget("budget-1m+budget-2m")
    with pytest.raises(UsageError, match="no env steps"):
        experiments.variant_budget("budget-0k")
    with pytest.raises(UsageError, match="budget-N"):
        experiments.variant_overrides("budget-1g")


def test_a_run_of_another_budget_is_taken_only_with_its_budget_variant(tmp_path: pathlib.Path) -> None:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    run_dir = command_run(tmp_path, task, command_entry(task, steps=1_000_000))
    with pytest.raises(UsageError, match=f"n_timesteps is 1000000, the task's is {task.steps}"):
        experiments.check_shipped_entry(task, run_dir)
    experiments.check_shipped_entry(task.with_variant("budget-1m"), run_dir)
    record = {**entry_record(0, [0.1, 0.5, 0.9], 0.9), "variant": "budget-1m", "overrides": []}
    assert results.recipe_name(record) == "HER(DDPG), `configs/her.yml` with `-n 1000000`"
    # not the shipped entry: the README table, which shows the shipped entry's seeds, has no row for it
    assert results.readme_table({f"{ONE_PROCESS}+budget-1m": [record]}).count("\n") == 1


def _resumed_run(
    tmp_path: pathlib.Path, *, seed: int = 3, resumed_from: int = 40_000
) -> tuple[pathlib.Path, pathlib.Path]:
    """A run stopped after 60k env steps (checkpoints at 20k and 40k) and resumed from ``resumed_from``
    into a second folder that trained on to 80k: (first folder, second folder)."""
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    first = command_run(tmp_path / "first", task)
    np.savez(
        first / "evaluations.npz",
        timesteps=[20_000, 40_000, 60_000],
        successes=[[0, 0], [0, 1], [1, 1]],
        train_seconds=[50.0, 101.0, 150.0],
    )
    for steps in (20_000, 40_000):
        write_agent_zip(first / f"rl_model_{steps}_steps.zip")
    second = command_run(tmp_path / "second", task)
    args_path = second / ONE_PROCESS_ENV / "args.yml"
    args = {
        **load_yaml_file(args_path),
        "seed": seed,
        "trained_agent": str(first / f"rl_model_{resumed_from}_steps.zip"),
        "initial_timesteps": resumed_from,
    }
    write_yaml_file(args_path, args)
    np.savez(
        second / "evaluations.npz",
        timesteps=[60_000, 80_000],
        successes=[[1, 0], [1, 1]],
        train_seconds=[30.0, 62.0],
    )
    write_agent_zip(second / "rl_model_60000_steps.zip")
    return first, second


def test_a_resumed_run_is_recorded_across_its_folders(tmp_path: pathlib.Path) -> None:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    first, second = _resumed_run(tmp_path)
    record = experiments.stopped_run_record(ONE_PROCESS, task, second)
    # The first folder's curve up to the checkpoint it was resumed from, then the second's, whose
    # training seconds carry on from the first's at that checkpoint.
    assert record["timesteps"] == [20_000, 40_000, 60_000, 80_000]
    assert record["success"] == [0.0, 0.5, 0.5, 1.0]
    assert record["train_seconds"] == [50.0, 101.0, 131.0, 163.0]
    assert record["resumed_at"] == [40_000] and record["stopped_at"] == 80_000
    assert record["run_dirs"] == [str(first), str(second)]
    chain = experiments.check_run(task, second)
    assert chain.checkpoint_model_path(40_000).parent == first
    assert chain.checkpoint_model_path(60_000).parent == second
    row = results.manipulation_rows([{**entry_record(3, [0.0, 0.5, 0.5], 1.0), "resumed_at": [40_000]}])[0]
    assert cells(row)[2] == "3, resumed at 40k"


def test_a_run_resumed_with_a_longer_budget_is_its_longer_budgets_row(tmp_path: pathlib.Path) -> None:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    longer = task.with_variant("budget-3m")
    first, second = _resumed_run(tmp_path)
    second_config = second / ONE_PROCESS_ENV / "config.yml"
    # The first folder trained to the task's budget; the resumed one with -n 3000000.
    write_yaml_file(second_config, {ONE_PROCESS_ENV: command_entry(longer)})
    chain = experiments.check_run(longer, second)
    assert [part.layout.run_dir for part in chain.parts] == [first, second]
    # The last folder sets the row's budget: the task's own row is refused.
    with pytest.raises(UsageError, match=f"n_timesteps is 3000000, the task's is {task.steps}"):
        experiments.check_run(task, second)
    # A first folder of a longer budget than the last one's is no shorter budget.
    write_yaml_file(first / ONE_PROCESS_ENV / "config.yml", {ONE_PROCESS_ENV: command_entry(longer)})
    write_yaml_file(second_config, {ONE_PROCESS_ENV: command_entry(task)})
    with pytest.raises(UsageError, match=f"n_timesteps is 3000000, the task's is {task.steps}"):
        experiments.check_run(task, second)


def test_a_resumed_run_is_refused_when_its_parts_do_not_join(tmp_path: pathlib.Path) -> None:
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    with pytest.raises(UsageError, match=r"another seed \(3, 4\): resume with --seed"):
        experiments.check_run(task, _resumed_run(tmp_path / "seed", seed=4)[1])
    with pytest.raises(UsageError, match="no evaluation at 20000 env steps"):
        # Resumed from 20k, where the first folder has an evaluation: taken; then drop that evaluation.
        first, run = _resumed_run(tmp_path / "gap", resumed_from=20_000)
        np.savez(first / "evaluations.npz", timesteps=[40_000], successes=[[1, 1]], train_seconds=[90.0])
        experiments.check_run(task, run)
    first, best = _resumed_run(tmp_path / "best")
    write_agent_zip(first / "best_model.zip")
    args_path = best / ONE_PROCESS_ENV / "args.yml"
    write_yaml_file(args_path, {**load_yaml_file(args_path), "trained_agent": str(first / "best_model.zip")})
    with pytest.raises(UsageError, match=r"best_model\.zip, not a checkpoint of that run"):
        experiments.check_run(task, best)
    first, gone = _resumed_run(tmp_path / "gone")
    (first / "rl_model_40000_steps.zip").unlink()
    with pytest.raises(UsageError, match="which is gone"):
        experiments.check_run(task, gone)


def test_a_run_records_the_hosts_speed_just_before_and_just_after_training(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lab import bench

    events: list[str] = []
    readings = iter([{"matmul_gflops_one_thread": 70.0}, {"matmul_gflops_one_thread": 50.0}])

    def reading(env_id: str) -> dict[str, Any]:
        events.append(f"reading {env_id}")
        return next(readings)

    class Training:
        """``her-wrap train`` as run_entry sees it: its output, then exit status 0."""

        def __init__(self, command: list[str], **kwargs: Any) -> None:
            events.append("training")
            self.stdout = iter([f"Run folder: {tmp_path}\n"])
            self.returncode = 0
            self.pid = 12345

        def poll(self) -> int:
            return self.returncode

        def wait(self) -> int:
            return self.returncode

        def __enter__(self) -> Training:
            return self

        def __exit__(self, *exc: object) -> None:
            events.append("trained")

    recorded: dict[str, Any] = {}

    def record(task_name: str, task: Any, run_dir: pathlib.Path, variant: Any, host: Any) -> dict[str, Any]:
        recorded.update(run_dir=run_dir, host=host)
        return recorded

    monkeypatch.setattr(bench, "host_reading", reading)
    monkeypatch.setattr(training_child.subprocess, "Popen", Training)
    monkeypatch.setattr(experiments, "record_entry_run", record)
    task = experiments.ENTRY_TASKS[ONE_PROCESS]
    experiments.run_entry(ONE_PROCESS, task, 3, tmp_path / "logs")
    assert events == [f"reading {ONE_PROCESS_ENV}", "training", "trained", f"reading {ONE_PROCESS_ENV}"]
    assert recorded == {
        "run_dir": tmp_path,
        "host": {"before": {"matmul_gflops_one_thread": 70.0}, "after": {"matmul_gflops_one_thread": 50.0}},
    }


def test_a_pace_table_scales_each_rows_whole_run_by_the_runs_time_over_the_rows_at_its_last_point() -> None:
    row = {
        "curve_steps": [100_000, 200_000, 300_000],
        "curve_success": [0.1, 0.4, 0.8],
        "curve_seconds": [600.0, 1200.0, 2400.0],
        "train_seconds": 2400.0,
    }
    # The run at 150k env steps after 450 s; the row got there after 900 s (half way between its points).
    table = results.pace_table([50_000, 150_000], [0.0, 0.3], [150.0, 450.0], {"task/1": row})
    assert "The run at 150k env steps: 7.5 training minutes, greedy success 0.30" in table
    assert "| task/1 | 15.0 | 0.50 | - | 40 | 20 |" in table
    # At a point the row evaluated too, its success there is shown.
    table = results.pace_table([200_000], [0.5], [1800.0], {"task/1": row})
    assert "| task/1 | 20.0 | 1.50 | 0.40 | 40 | 60 |" in table
    with pytest.raises(ValueError, match="row task/1 ends at 300000 env steps, before the run's 400000"):
        results.pace_table([400_000], [0.5], [1800.0], {"task/1": row})
    with pytest.raises(ValueError, match="no evaluation yet"):
        results.pace_table([], [], [], {"task/1": row})


def test_the_pace_command_reads_a_run_still_training_against_the_rows_of_its_variant(
    tmp_path: pathlib.Path,
) -> None:
    """``pace`` takes the run's curve as ``record`` would (the variant's command checked) and compares it
    with the task's entry and variant rows by default; a row it was not asked for is left out."""
    run_dir = _stopped_run(tmp_path, "bf16")  # 40k env steps after 101 s
    row = {"curve_steps": [20_000, 40_000, 60_000], "curve_success": [0.0, 0.5, 0.9]}
    rows = {
        f"{ONE_PROCESS}/1": {**row, "curve_seconds": [100.0, 202.0, 300.0], "train_seconds": 300.0},
        f"{ONE_PROCESS}+bf16/1": {**row, "curve_seconds": [50.0, 101.0, 150.0], "train_seconds": 150.0},
        f"{ONE_PROCESS}+batch-1024/1": {**row, "curve_seconds": [9.0, 9.0, 9.0], "train_seconds": 9.0},
    }
    results_file = tmp_path / "results.json"
    results_file.write_text(json.dumps(rows))

    def pace(*arguments: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "scripts/robotics_results.py", "--results", str(results_file), "pace"]
        return subprocess.run(
            [*command, ONE_PROCESS, str(run_dir), *arguments],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=RESULTS_FILE.parents[1],
            check=False,
        )

    shown = pace("--variant", "bf16")
    assert shown.returncode == 0, shown.stderr
    assert f"| {ONE_PROCESS}/1 | 3.4 | 0.50 | 0.50 | 5 | 2 |" in shown.stdout
    assert f"| {ONE_PROCESS}+bf16/1 | 1.7 | 1.00 | 0.50 | 2 | 2 |" in shown.stdout
    assert "batch-1024" not in shown.stdout
    # A run of bf16 is not the entry's command, and a row that is not recorded is named.
    assert "pass the --variant it ran" in pace().stderr
    missing = pace("--variant", "bf16", "--against", f"{ONE_PROCESS}/7")
    assert missing.returncode != 0 and f"no row {ONE_PROCESS}/7" in missing.stderr
