"""The scripts of ``scripts/``: thin command lines over :mod:`her_wrap.runs`, each runnable as documented.

Each script is started as a user starts it (``python scripts/NAME.py``), in a fresh interpreter, so a
script that imports a name the package no longer has, or whose options no longer parse, fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
