"""Renaming a task's result rows when its shipped entry takes a variant's change (:mod:`lab.row_renames`)."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from her_wrap.runs.config import load_run_config
from her_wrap.runs.errors import UsageError
from her_wrap.runs.run_config import RunConfig
from lab.experiments import (
    ENTRY_TASKS,
    EntryTask,
    entry_differences,
    row_bfloat16_products,
    variant_overrides,
)
from lab.results import load_results
from lab.row_renames import rename_entry_rows

ROOT = Path(__file__).resolve().parents[2]
#: The PandaPush task with a budget of 600k env steps, and as it is once a 440k budget ships (the entry's
#: settings are read from configs/her.yml; the budget is the task's).
PANDA_PUSH = dataclasses.replace(ENTRY_TASKS["panda-push-ddpg"], steps=600_000)
PANDA_PUSH_440K = dataclasses.replace(PANDA_PUSH, steps=440_000)
#: FetchSlide's entry (two workers, with LayerNorm and movement weights) for 600k env steps.
FETCH_SLIDE = dataclasses.replace(ENTRY_TASKS["fetch-slide-ddpg"], steps=600_000)
#: FetchPush's entry on two workers, and the variants that name it and the entry before it (a batch of 1024
#: per worker, 400k env steps).
FETCH_PUSH = ENTRY_TASKS["fetch-push-ddpg"]
PROMOTED, PREVIOUS = ("batch-512+budget-500k", "batch-1024+budget-400k")


def row(steps: int, variant: str | None = None, final: float = 0.9, workers: int = 1) -> dict[str, Any]:
    """A recorded row as ``record`` writes one (the fields relabeling reads or rewrites, and a figure)."""
    return {
        "kind": "entry",
        "steps": steps,
        "workers": workers,
        "final_success": final,
        "variant": variant,
        "overrides": [],
        "command": "stale",
        "train_command": "stale",
    }


def slide_row(steps: int, variant: str | None = None, final: float = 0.9) -> dict[str, Any]:
    """A recorded row of FetchSlide's entry, on its two workers."""
    return row(steps, variant, final, workers=FETCH_SLIDE.workers)


def test_a_shipped_budget_makes_its_rows_the_entrys_and_the_old_rows_name_the_old_budget() -> None:
    results = {
        "fetch-push-ddpg/0": row(600_000, final=1.0),
        "panda-push-ddpg/0": row(600_000, final=1.0),
        "panda-push-ddpg+budget-360k/1": row(360_000, "budget-360k", final=0.89),
        "panda-push-ddpg+budget-440k/0": row(440_000, "budget-440k", final=0.95),
    }
    before = copy.deepcopy(results)
    updated, renamed = rename_entry_rows(
        results, "panda-push-ddpg", PANDA_PUSH_440K, "budget-440k", "budget-600k"
    )
    assert results == before
    assert list(updated) == [
        "fetch-push-ddpg/0",
        "panda-push-ddpg+budget-600k/0",
        "panda-push-ddpg+budget-360k/1",
        "panda-push-ddpg/0",
    ]
    assert updated["fetch-push-ddpg/0"] is results["fetch-push-ddpg/0"]
    entry = updated["panda-push-ddpg/0"]
    assert entry["final_success"] == 0.95 and entry["variant"] is None and entry["overrides"] == []
    assert entry["command"] == "python scripts/robotics_results.py run panda-push-ddpg --seeds 0"
    assert " -n 440000 " in entry["train_command"]
    old = updated["panda-push-ddpg+budget-600k/0"]
    assert old["final_success"] == 1.0 and old["variant"] == "budget-600k"
    assert old["command"].endswith("--seeds 0 --variant budget-600k")
    assert " -n 600000 " in old["train_command"]
    assert " -n 360000 " in updated["panda-push-ddpg+budget-360k/1"]["train_command"]
    assert [(item.old_key, item.new_key) for item in renamed] == [
        ("panda-push-ddpg/0", "panda-push-ddpg+budget-600k/0"),
        ("panda-push-ddpg+budget-360k/1", "panda-push-ddpg+budget-360k/1"),
        ("panda-push-ddpg+budget-440k/0", "panda-push-ddpg/0"),
    ]


def test_a_shipped_change_of_settings_moves_between_the_rows_parts_and_rewrites_their_params() -> None:
    results = {
        "fetch-slide-ddpg+layer-norm+td3/2": slide_row(600_000, "layer-norm+td3"),
        "fetch-slide-ddpg+td3/2": slide_row(600_000, "td3"),
        "fetch-slide-ddpg+budget-1m/2": slide_row(1_000_000, "budget-1m"),
    }
    updated, _ = rename_entry_rows(results, "fetch-slide-ddpg", FETCH_SLIDE, "layer-norm", "no-layer-norm")
    assert list(updated) == [
        "fetch-slide-ddpg+td3/2",
        "fetch-slide-ddpg+no-layer-norm+td3/2",
        "fetch-slide-ddpg+no-layer-norm+budget-1m/2",
    ]
    assert updated["fetch-slide-ddpg+td3/2"]["overrides"] == ["model_class:td3"]
    old = updated["fetch-slide-ddpg+no-layer-norm+td3/2"]
    assert old["overrides"] == ["policy_kwargs.layer_norm:false", "model_class:td3"]
    assert old["train_command"].endswith("-params policy_kwargs.layer_norm:false model_class:td3")
    # Each of its two workers trains half the budget.
    assert " -n 500000 " in updated["fetch-slide-ddpg+no-layer-norm+budget-1m/2"]["train_command"]


def test_a_row_that_ran_part_of_a_shipped_pair_of_changes_undoes_only_the_other() -> None:
    """FetchSlide's entry ships both parts; a row that ran one of them names only the other's undoing."""
    results = {
        "fetch-slide-ddpg/0": slide_row(600_000),
        "fetch-slide-ddpg+movement/0": slide_row(600_000, "movement"),
        "fetch-slide-ddpg+layer-norm+td3/0": slide_row(600_000, "layer-norm+td3"),
        "fetch-slide-ddpg+movement+layer-norm/0": slide_row(600_000, "movement+layer-norm", final=0.95),
    }
    updated, _ = rename_entry_rows(
        results, "fetch-slide-ddpg", FETCH_SLIDE, "movement+layer-norm", "no-movement+no-layer-norm"
    )
    assert list(updated) == [
        "fetch-slide-ddpg+no-movement+no-layer-norm/0",
        "fetch-slide-ddpg+no-layer-norm/0",
        "fetch-slide-ddpg+no-movement+td3/0",
        "fetch-slide-ddpg/0",
    ]
    assert updated["fetch-slide-ddpg/0"]["final_success"] == 0.95
    assert updated["fetch-slide-ddpg+no-layer-norm/0"]["overrides"] == ["policy_kwargs.layer_norm:false"]
    assert updated["fetch-slide-ddpg+no-movement+td3/0"]["train_command"].endswith(
        "-params her.movement_clip:null her.movement_floor:0.05 model_class:td3"
    )
    with pytest.raises(UsageError, match="row fetch-slide-ddpg\\+movement/0 ran movement, a part of "
                       "movement\\+layer-norm: give --previous one part for each part"):  # fmt: skip
        rename_entry_rows(results, "fetch-slide-ddpg", FETCH_SLIDE, "movement+layer-norm", "no-layer-norm")


def test_a_change_the_shipped_entry_does_not_make_yet_is_refused_naming_the_setting() -> None:
    results = {"fetch-slide-ddpg+td3/0": slide_row(600_000, "td3")}
    with pytest.raises(UsageError, match=r"does not make td3 yet \(model_class:td3 changes model_class\)"):
        rename_entry_rows(results, "fetch-slide-ddpg", FETCH_SLIDE, "td3", None)
    with pytest.raises(UsageError, match="trains 600000 env steps, not 440000"):
        rename_entry_rows(results, "panda-push-ddpg", PANDA_PUSH, "budget-440k", "budget-600k")


def test_a_previous_variant_that_changes_nothing_or_none_for_old_rows_is_refused() -> None:
    results = {
        "fetch-slide-ddpg/0": slide_row(600_000),
        "fetch-slide-ddpg+layer-norm/1": slide_row(600_000, "layer-norm"),
    }
    with pytest.raises(UsageError, match="layer-norm changes nothing in the shipped FetchSlide-v4 entry"):
        rename_entry_rows(results, "fetch-slide-ddpg", FETCH_SLIDE, "layer-norm", "layer-norm")
    with pytest.raises(UsageError, match="row fetch-slide-ddpg/0 did not run layer-norm: pass --previous"):
        rename_entry_rows(results, "fetch-slide-ddpg", FETCH_SLIDE, "layer-norm", None)
    only_promoted = {"fetch-slide-ddpg+layer-norm/1": slide_row(600_000, "layer-norm")}
    updated, _ = rename_entry_rows(only_promoted, "fetch-slide-ddpg", FETCH_SLIDE, "layer-norm", None)
    assert list(updated) == ["fetch-slide-ddpg/1"]


def test_a_row_whose_env_steps_are_not_its_new_commands_budget_is_refused() -> None:
    # The old entry's rows ran 600k: naming the old entry budget-500k would give them a wrong command.
    results = {"panda-push-ddpg/0": row(600_000)}
    with pytest.raises(UsageError, match="row panda-push-ddpg/0 ran 600000 env steps, but as "
                       "panda-push-ddpg\\+budget-500k its command trains 500000"):  # fmt: skip
        rename_entry_rows(results, "panda-push-ddpg", PANDA_PUSH_440K, "budget-440k", "budget-500k")


def test_two_rows_that_would_share_a_name_are_refused_and_neither_is_lost() -> None:
    results = {
        "panda-push-ddpg/0": row(600_000),
        "panda-push-ddpg+budget-600k/0": row(600_000, "budget-600k"),
    }
    with pytest.raises(UsageError, match="rows panda-push-ddpg/0 and panda-push-ddpg\\+budget-600k/0 would "
                       "both become panda-push-ddpg\\+budget-600k/0"):  # fmt: skip
        rename_entry_rows(results, "panda-push-ddpg", PANDA_PUSH_440K, "budget-440k", "budget-600k")


def run_rename(results: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/robotics_results.py", "--results", str(results), "rename", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )


def test_the_script_prints_the_new_names_writes_them_and_leaves_the_file_on_a_dry_run_or_an_error(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results.json"
    text = json.dumps(
        {
            "fetch-slide-ddpg/0": slide_row(2_000_000),
            "fetch-slide-ddpg+layer-norm/1": slide_row(2_000_000, "layer-norm"),
        }
    )
    results.write_text(text)
    refused = run_rename(results, "fetch-slide-ddpg", "--promoted", "layer-norm")
    assert refused.returncode != 0 and "pass --previous" in refused.stderr
    assert results.read_text() == text
    dry = run_rename(results, "fetch-slide-ddpg", "--promoted", "layer-norm", "--previous", "no-layer-norm",
                      "--dry-run")  # fmt: skip
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert (
        "fetch-slide-ddpg/0 -> fetch-slide-ddpg+no-layer-norm/0: her-wrap train --env FetchSlide-v4"
        in dry.stdout
    )
    assert results.read_text() == text
    done = run_rename(results, "fetch-slide-ddpg", "--promoted", "layer-norm", "--previous", "no-layer-norm")
    assert done.returncode == 0, done.stderr[-2000:]
    assert list(json.loads(results.read_text())) == ["fetch-slide-ddpg+no-layer-norm/0", "fetch-slide-ddpg/1"]


def test_the_fetch_push_entry_of_batch_512_renames_each_kind_of_row_to_the_command_it_ran() -> None:
    """FetchPush's entry took a batch of 512 per worker for 500k env steps, measured as ``PROMOTED``;
    ``PREVIOUS`` names the entry before it (1024 per worker, 400k env steps)."""
    old_rows = {
        f"fetch-push-ddpg+{PROMOTED}/4": (500_000, 2, "fetch-push-ddpg/4"),
        "fetch-push-ddpg+batch-512/0": (400_000, 2, "fetch-push-ddpg+budget-400k/0"),
        "fetch-push-ddpg/1": (400_000, 2, f"fetch-push-ddpg+{PREVIOUS}/1"),
        "fetch-push-ddpg+n-steps-1/2": (400_000, 2, "fetch-push-ddpg+batch-1024+n-steps-1+budget-400k/2"),
        "fetch-push-ddpg+n-steps-1+net-3x256+one-process+budget-600k/3": (
            600_000, 1, "fetch-push-ddpg+batch-1024+n-steps-1+net-3x256+one-process+budget-600k/3"
        ),
    }  # fmt: skip
    results = {
        key: row(steps, key.split("/")[0].partition("+")[2] or None, workers=workers)
        for key, (steps, workers, _) in old_rows.items()
    }
    updated, renamed = rename_entry_rows(results, "fetch-push-ddpg", FETCH_PUSH, PROMOTED, PREVIOUS)
    assert [(item.old_key, item.new_key) for item in renamed] == [
        (key, new_key) for key, (_, _, new_key) in old_rows.items()
    ]
    commands = {item.new_key: item.train_command for item in renamed}
    # The rows of the entry: its two workers, each its share of the 500k env steps, the entry as it stands.
    assert commands["fetch-push-ddpg/4"] == (
        "her-wrap train --env FetchPush-v4 --seed 4 -n 250000 --eval-freq 10000 --eval-episodes 50 "
        "--save-freq 50000 --workers 2"
    )
    # The batch of 512 for 400k env steps: the entry's settings on a smaller budget.
    assert commands["fetch-push-ddpg+budget-400k/0"] == (
        "her-wrap train --env FetchPush-v4 --seed 0 -n 200000 --eval-freq 10000 --eval-episodes 50 "
        "--save-freq 50000 --workers 2"
    )
    assert commands[f"fetch-push-ddpg+{PREVIOUS}/1"].endswith(" -n 200000 --eval-freq 10000 --eval-episodes 50 "
                                                              "--save-freq 50000 --workers 2 -params batch_size:1024")  # fmt: skip
    one = updated["fetch-push-ddpg+batch-1024+n-steps-1+net-3x256+one-process+budget-600k/3"]
    assert one["overrides"][0] == "batch_size:1024" and "batch_size:2048" in one["overrides"]
    assert " -n 600000 " in one["train_command"] and "--workers" not in one["train_command"]


#: The FetchSlide task as it ships (two workers, 2M env steps, a 115-minute limit).
SLIDE = ENTRY_TASKS["fetch-slide-ddpg"]


def ran_row(
    ran: str, minutes: float, steps: int = 2_000_000, variant: str | None = None, bf16_host: bool = True
) -> dict[str, Any]:
    """A FetchSlide row whose run trained the shipped entry with ``ran``'s changes for ``minutes``, on a
    host with bfloat16 dot products or without (``bf16_host``)."""
    settings = load_run_config(SLIDE.config_path(), SLIDE.env_id, overrides=variant_overrides(ran)).to_entry()
    return {
        **slide_row(steps, variant),
        "settings": settings,
        "train_seconds": 60 * minutes,
        "bfloat16_products": bf16_host,
    }


def test_a_row_ran_a_part_it_does_not_name_when_its_run_was_already_so_on_its_host() -> None:
    """The entry now ships ``auto`` and ``minutes-115``: a ``bf16`` row of a host with bfloat16 products ran
    ``auto``, a float32 row of a host without them too; a row without a limit that trained less than 115
    minutes ran as with it, one that trained longer names ``no-minutes``. Parts a row names that change
    nothing in the entry on its host leave its name."""
    before = "float32+no-minutes"
    results = {
        "fetch-slide-ddpg+bf16/0": ran_row(f"{before}+bf16", 113, variant="bf16"),
        "fetch-slide-ddpg+bf16/1": ran_row(f"{before}+bf16", 131, variant="bf16"),
        "fetch-slide-ddpg/2": ran_row(before, 100),
        "fetch-slide-ddpg+float32/3": ran_row(before, 100, variant="float32", bf16_host=False),
        "fetch-slide-ddpg+auto+minutes-115/4": ran_row(
            "auto", 115.02, steps=990_004, variant="auto+minutes-115", bf16_host=False
        ),
    }
    updated, renamed = rename_entry_rows(results, "fetch-slide-ddpg", SLIDE, "auto+minutes-115", before)
    assert [item.new_key for item in renamed] == [
        "fetch-slide-ddpg/0",
        "fetch-slide-ddpg+no-minutes/1",
        "fetch-slide-ddpg+float32/2",
        "fetch-slide-ddpg/3",
        "fetch-slide-ddpg/4",
    ]
    assert updated["fetch-slide-ddpg+no-minutes/1"]["overrides"] == ["max_minutes:null"]
    assert updated["fetch-slide-ddpg/4"]["steps"] == 990_004


def test_fewer_env_steps_than_the_budget_are_refused_unless_the_limit_stopped_the_run() -> None:
    """A row of 990k env steps that trained 60 minutes was not stopped by the entry's 115: its command
    would train more. A run may end up to one cycle (500 env steps of the two workers) past its budget."""
    short = {"fetch-slide-ddpg+auto/1": ran_row("auto", 60, steps=990_004, variant="auto")}
    with pytest.raises(UsageError, match="row fetch-slide-ddpg\\+auto/1 ran 990004 env steps, but as "
                       "fetch-slide-ddpg its command trains 2000000"):  # fmt: skip
        rename_entry_rows(short, "fetch-slide-ddpg", SLIDE, "auto", None)
    past = {"fetch-slide-ddpg+auto/1": ran_row("auto", 100, steps=2_000_302, variant="auto")}
    assert list(rename_entry_rows(past, "fetch-slide-ddpg", SLIDE, "auto", None)[0]) == ["fetch-slide-ddpg/1"]
    beyond = {"fetch-slide-ddpg+auto/1": ran_row("auto", 100, steps=2_000_500, variant="auto")}
    with pytest.raises(UsageError, match="ran 2000500 env steps"):
        rename_entry_rows(beyond, "fetch-slide-ddpg", SLIDE, "auto", None)


def test_a_renamed_row_whose_workers_are_not_its_new_commands_is_refused() -> None:
    # A run of the entry in one process would be no row of PREVIOUS, which trains on two workers.
    results = {"fetch-push-ddpg/0": row(400_000, workers=1)}
    message = (
        f"row fetch-push-ddpg/0 ran on 1 worker(s), but as fetch-push-ddpg+{PREVIOUS} its command trains on 2"
    )
    with pytest.raises(UsageError, match=re.escape(message)):
        rename_entry_rows(results, "fetch-push-ddpg", FETCH_PUSH, PROMOTED, PREVIOUS)


def recorded_row(task_name: str, task: EntryTask, key: str) -> tuple[dict[str, Any], EntryTask, RunConfig]:
    """A row of docs/robotics_results.json, the task its name trains (``task`` with the row's variant) and
    that command's validated entry; the key must be the name its variant gives."""
    record = load_results(ROOT / "docs" / "robotics_results.json")[key]
    variant = record["variant"]
    assert key == f"{task_name}{'+' + variant if variant else ''}/{record['seed']}"
    row_task = task.with_variant(variant)
    config = load_run_config(
        row_task.config_path(),
        row_task.env_id,
        overrides=variant_overrides(variant),
        n_timesteps=row_task.steps // row_task.workers,
        workers=row_task.workers,
    )
    return record, row_task, config


def _without_plain_layer_norm(settings: dict[str, Any]) -> dict[str, Any]:
    """Recorded settings with SB3's plain networks spelled as the entry spells them now (``layer_norm:
    false``; rows recorded before the entries took LayerNorm have no key, the same networks)."""
    policy_kwargs = settings["policy_kwargs"]
    if "layer_norm" in policy_kwargs:
        return settings
    return {**settings, "policy_kwargs": {**policy_kwargs, "layer_norm": False}}


@pytest.mark.parametrize(
    "key",
    [
        "fetch-push-ddpg/0",
        "fetch-push-ddpg+envs-2-steps-125+float32/4",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average/4",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+budget-400k/4",
        f"fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+{PREVIOUS}/3",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+batch-1024+n-steps-1+budget-400k/1",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+batch-1024+n-steps-1+net-3x256+one-process+budget-600k/3",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+batch-1024+n-steps-1+net-3x256+budget-600k/2",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+batch-1024+net-3x256+one-process+budget-300k/1",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+batch-1024+net-3x256+budget-300k/0",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+batch-1024+n-steps-1+net-3x256+one-process+no-layer-norm+budget-600k/4",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+batch-1024+n-steps-1+net-3x256+one-process+no-layer-norm+no-movement+workers-2+budget-600k/0",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+batch-1024+n-steps-1+net-3x256+one-process+no-layer-norm+no-movement+workers-2-paper+budget-600k/0",
        "fetch-push-ddpg+envs-2-steps-125+float32+no-actor-average+batch-1024+n-steps-1+net-3x256+one-process+no-layer-norm+no-movement+updates-40+budget-600k/0",
    ],
)
def test_a_recorded_fetch_push_rows_name_gives_the_settings_and_workers_it_ran(key: str) -> None:
    """The rows of docs/robotics_results.json, renamed for each entry FetchPush took (two workers, then 512
    rows per worker, then the actor average): each name's command on the entry as it now is trains what
    the row recorded."""
    record, task, config = recorded_row("fetch-push-ddpg", FETCH_PUSH, key)
    variant, command = record["variant"], config.to_entry()
    assert (record["steps"], record.get("workers") or 1) == (task.steps, task.workers)
    assert record["overrides"] == list(variant_overrides(variant))
    assert entry_differences(command, _without_plain_layer_norm(record["settings"]), task.workers) == []


@pytest.mark.parametrize(
    "key",
    [
        "fetch-slide-ddpg/0",
        "fetch-slide-ddpg/1",
        "fetch-slide-ddpg/2",
        "fetch-slide-ddpg+no-minutes/1",
        "fetch-slide-ddpg+updates-20/1",
        "fetch-slide-ddpg+one-process/1",
        "fetch-slide-ddpg+one-process+no-minutes/0",
        "fetch-slide-ddpg+random-0.3+one-process+no-minutes/3",
        "fetch-slide-ddpg+lr-constant+action-l2-1+random-0.3+one-process/0",
        "fetch-slide-ddpg+updates-20+lr-constant+action-l2-1+random-0.3+one-process+budget-2.5m/2",
        "fetch-slide-ddpg+float32+updates-20+lr-constant+action-l2-1+random-0.3+budget-2.5m/1",
        "fetch-slide-ddpg+float32+updates-20+lr-constant+action-l2-1+random-0.3+one-process+no-minutes+budget-2.5m/0",
    ],
)
def test_a_recorded_fetch_slide_rows_name_gives_the_settings_and_workers_it_ran(key: str) -> None:
    """The rows of docs/robotics_results.json, renamed for FetchSlide's two-worker entry: each name's command
    trains what the row recorded on the row's host (``auto`` is bfloat16 where the host has bfloat16 dot
    products), for its budget, or until its 115-minute limit stopped it."""
    record, task, config = recorded_row("fetch-slide-ddpg", SLIDE, key)
    variant = record["variant"]
    assert (record.get("workers") or 1) == task.workers
    stopped = config.max_minutes is not None and record["train_seconds"] >= 60 * (config.max_minutes - 1)
    # A run ends on a whole cycle of 500 env steps, possibly past its budget.
    assert task.steps <= record["steps"] < task.steps + 500 or (stopped and record["steps"] < task.steps)
    assert record["overrides"] == list(variant_overrides(variant))
    ran = {**record["settings"], "max_minutes": record["settings"].get("max_minutes")}
    if config.max_minutes is not None and ran["max_minutes"] is None:
        assert record["train_seconds"] < 60 * config.max_minutes  # the limit would not have fired
        ran["max_minutes"] = config.max_minutes
    products = row_bfloat16_products(record)
    assert entry_differences(config.to_entry(), ran, task.workers, products) == []
