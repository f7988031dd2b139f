"""The scripts of ``scripts/``: thin command lines over :mod:`her_wrap.runs`, each runnable as documented.

Each script is started as a user starts it (``python scripts/NAME.py``), in a fresh interpreter, so a
script that imports a name the package no longer has, or whose options no longer parse, fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from script_modules import loaded_script

from lab import results

ROOT = Path(__file__).resolve().parents[2]
#: The scripts a user runs (``_repository.py`` is imported by them, never run).
SCRIPTS = sorted(path for path in (ROOT / "scripts").glob("*.py") if not path.name.startswith("_"))
RESULTS_FILE = ROOT / "docs" / "robotics_results.json"


def run_script(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *arguments], capture_output=True, text=True, timeout=300, cwd=ROOT, check=False
    )


def test_every_script_is_found() -> None:
    assert {"demo.py", "robotics_results.py", "bench_replay.py"} <= {script.name for script in SCRIPTS}


# One interpreter runs every script's --help in turn (as ``python scripts/NAME.py --help`` would): the
# imports of torch and stable-baselines3 are paid once.
USAGE_OF_EVERY_SCRIPT = """
import contextlib, io, json, runpy, sys
outcome = {}
for path in sys.argv[1:]:
    sys.argv = [path, "--help"]
    sys.path.insert(0, path.rsplit("/", 1)[0])
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code or 0
    except Exception as error:
        code = repr(error)
    finally:
        sys.path.pop(0)
    outcome[path] = [code, out.getvalue()[:200]]
print(json.dumps(outcome))
"""


def test_every_script_prints_its_usage() -> None:
    completed = run_script("-c", USAGE_OF_EVERY_SCRIPT, *map(str, SCRIPTS))
    assert completed.returncode == 0, completed.stderr[-2000:]
    outcome = json.loads(completed.stdout.strip().splitlines()[-1])
    failed = {Path(path).name: code for path, (code, _) in outcome.items() if code != 0}
    assert not failed, f"scripts whose --help failed: {failed}"
    no_usage = [Path(path).name for path, (_, text) in outcome.items() if "usage:" not in text]
    assert not no_usage, f"scripts that print no usage: {no_usage}"


def test_robotics_results_report_prints_the_tables_of_the_results_file() -> None:
    completed = run_script("scripts/robotics_results.py", "--results", str(RESULTS_FILE), "report")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert results.MANIPULATION_HEADER.splitlines()[0] in completed.stdout
    assert "**worst** of 3" in completed.stdout


def test_an_unknown_option_of_a_script_is_refused_naming_it() -> None:
    completed = run_script("scripts/robotics_results.py", "run", "fetch-push-ddpg", "--no-such-option")
    assert completed.returncode == 2
    assert "--no-such-option" in completed.stderr


def test_bench_updates_only_refuses_text_that_matches_no_recipe_listing_them() -> None:
    completed = run_script(
        "scripts/bench_updates.py", "--only", "no such recipe", "--quick", "--out", "/dev/null"
    )
    assert completed.returncode == 2
    assert "--only 'no such recipe' matches no recipe" in completed.stderr
    assert "manipulation DDPG, LayerNorm" in completed.stderr


def test_bench_updates_only_prints_its_recipes_and_leaves_the_page_of_all_of_them() -> None:
    page = ROOT / "docs" / "bench_updates.md"
    before = page.read_text()
    completed = run_script("scripts/bench_updates.py", "--only", "FetchReach SAC preset", "--quick")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "| FetchReach SAC preset (2 x 256, batch 256, 1 update per step) |" in completed.stdout
    assert "| SAC (3 x 256" not in completed.stdout
    assert page.read_text() == before


@pytest.fixture
def evaluate_actors() -> Iterator[ModuleType]:
    with loaded_script("evaluate_actors") as module:
        yield module


def test_evaluate_actors_plays_each_actors_weights_on_the_same_episodes(
    evaluate_actors: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    import torch as th

    from her_wrap import HER
    from her_wrap.runs.env_factory import make_vec_goal_env

    env_id = "BitFlippingContinuous-v0"
    agent = HER(
        "MultiInputPolicy",
        make_vec_goal_env(env_id, {}, 1, 0),
        "ddpg",
        seed=0,
        learning_starts=20,
        batch_size=8,
        policy_kwargs={"net_arch": [8], "actor_average": 0.2},
    )
    agent.learn(60)
    agent.save(tmp_path / "first.zip")
    agent.learn(60)
    agent.save(tmp_path / "second.zip")

    loaded = evaluate_actors.load_agent(tmp_path / "second.zip", env_id)
    states = evaluate_actors.actor_states(loaded)
    assert set(states) == {"actor", "target actor", "actor average"}
    policy = loaded.model.policy
    observation = dict(make_vec_goal_env(env_id, {}, 1, 3).reset())
    tensor, _ = policy.obs_to_tensor(observation)
    before = loaded.predict(observation, deterministic=True)[0]
    with evaluate_actors.greedy_weights(loaded, states["target actor"]):
        with th.no_grad():
            expected = policy.unscale_action(policy.actor_target(tensor).numpy())
        np.testing.assert_allclose(loaded.predict(observation, deterministic=True)[0], expected, rtol=1e-6)
    np.testing.assert_array_equal(loaded.predict(observation, deterministic=True)[0], before)  # restored
    mean = evaluate_actors.mean_state([states["actor"], states["target actor"]])
    th.testing.assert_close(
        mean["mu.0.weight"], (states["actor"]["mu.0.weight"] + states["target actor"]["mu.0.weight"]) / 2
    )

    completed = run_script(
        "scripts/evaluate_actors.py",
        env_id,
        str(tmp_path / "first.zip"),
        str(tmp_path / "second.zip"),
        "-n",
        "4",
        "--average-last",
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows = [
        line for line in completed.stdout.splitlines() if line.startswith(("| first", "| second", "| 2 |"))
    ]
    assert len(rows) == 3, completed.stdout
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")[1:]]
        assert all(0 <= float(cell) <= 1 for cell in cells), row
    missing = run_script("scripts/evaluate_actors.py", env_id, str(tmp_path / "none.zip"))
    assert missing.returncode == 2 and "no such file" in missing.stderr

    # Each agent's env is closed once its weights are played, the last one's after the averages.
    closed: list[int] = []
    built = []
    load_agent = evaluate_actors.load_agent

    def recording_load_agent(path: Path, env_id: str) -> HER:
        agent = load_agent(path, env_id)
        env = agent.get_env()
        index = len(built)
        built.append(env)
        close = env.close
        monkeypatch.setattr(env, "close", lambda: (closed.append(index), close()))
        return agent

    monkeypatch.setattr(evaluate_actors, "load_agent", recording_load_agent)
    paths = [str(tmp_path / "first.zip"), str(tmp_path / "second.zip")]
    assert evaluate_actors.main([env_id, *paths, "-n", "1", "--average-last"]) == 0
    assert closed == [0, 1]
