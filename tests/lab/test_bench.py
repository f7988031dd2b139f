"""The harness of the bench scripts: clocks, workers in fresh interpreters, ratios, targets and pages."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from her_wrap.sb3.policies import cpu_has_bfloat16_products
from lab import bench
from lab.doc_sections import cpu_model, machine_note


def test_stopwatch_sums_the_blocks_run_under_it_and_keeps_each_lap() -> None:
    clock = bench.Stopwatch()
    for _ in range(2):
        with clock:
            time.sleep(0.02)
    assert len(clock.laps) == 2
    assert clock.wall == pytest.approx(sum(clock.laps))
    assert clock.wall >= 0.04
    assert clock.cpu < clock.wall  # sleeping costs this process no CPU time


def test_seconds_per_call_times_at_least_the_calls_asked_for_after_the_warmup() -> None:
    calls: list[int] = []
    seconds = bench.seconds_per_call(lambda: calls.append(1), 0.0, min_calls=7, warmup=2)
    assert len(calls) == 9
    assert seconds >= 0.0


def test_alternated_medians_reports_each_function_in_microseconds_per_call() -> None:
    medians = bench.alternated_medians(
        {"slow": lambda: time.sleep(0.002), "fast": lambda: None}, seconds=0.1, rounds=2
    )
    assert list(medians) == ["slow", "fast"]
    assert medians["slow"] >= 2_000 > medians["fast"]


def test_random_stepper_resets_the_env_at_an_episodes_end() -> None:
    from her_wrap import BitFlippingEnv

    env = BitFlippingEnv(n_bits=2, max_steps=3)
    step = bench.random_stepper(env, seed=0)
    for _ in range(10):  # more steps than one episode has: without resets the step count passes 3
        step()
    assert env.current_step <= 3


def test_matmul_peak_gflops_measures_one_thread_and_restores_the_threads() -> None:
    import torch as th

    threads = th.get_num_threads()
    th.set_num_threads(2)
    try:
        assert bench.matmul_peak_gflops(runs=3, size=256) > 0.1
        assert th.get_num_threads() == 2
    finally:
        th.set_num_threads(threads)


def test_matmul_wall_gflops_runs_on_the_threads_asked_and_restores_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch as th

    seen: list[int] = []
    mm = th.mm

    def counting_mm(a: th.Tensor, b: th.Tensor) -> th.Tensor:
        seen.append(th.get_num_threads())
        return mm(a, b)

    threads = th.get_num_threads()
    monkeypatch.setattr(th, "mm", counting_mm)
    assert bench.matmul_wall_gflops(1, rows=64, width=32, seconds=0.01) > 0.01
    assert set(seen) == {1}
    assert th.get_num_threads() == threads


def test_host_reading_names_the_cpu_the_speed_the_load_and_the_versions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata

    monkeypatch.setattr(bench, "SPEED_PACKAGES", ("torch", "no-such-package-of-her-wrap"))
    reading = bench.host_reading("BitFlippingContinuous-v0", seconds=0.05)
    assert reading["cpu"] == cpu_model() and reading["cpu"]
    assert reading["cpus"] == os.cpu_count()
    assert reading["bfloat16_products"] is cpu_has_bfloat16_products()
    assert reading["matmul_gflops_one_thread"] > 0.1
    wall = reading["update_matmul_gflops_wall"]
    assert set(wall) == {"1", str(os.cpu_count() or 1)}
    assert all(gflops > 0.1 for gflops in wall.values())
    assert len(reading["load_average"]) == 3
    assert reading["versions"] == {
        "torch": importlib.metadata.version("torch"),
        "no-such-package-of-her-wrap": None,
    }
    assert 0 < reading["env_step_ms"] < 1_000
    assert "env_step_ms" not in bench.host_reading(seconds=0.05)


WORKER = """
import sys
from lab import bench
if sys.argv[1:2] == ["--worker"]:
    if sys.argv[2] == "fail":
        sys.exit(3)
    print("progress line")
    bench.report_to_parent({"arguments": sys.argv[2:], "path": __import__("pathlib").Path("p")})
"""


@pytest.fixture
def worker_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root folder holding a worker module ``fake_worker`` (``lab`` reached through PYTHONPATH)."""
    (tmp_path / "fake_worker.py").write_text(WORKER)
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(Path(bench.__file__).resolve().parents[1]))
    return tmp_path


def test_run_worker_returns_the_json_of_the_workers_last_line(worker_root: Path) -> None:
    result = bench.run_worker("fake_worker", ["a", "2"])
    assert result == {"arguments": ["a", "2"], "path": "p"}


def test_run_worker_returns_none_and_says_so_when_the_worker_fails(
    worker_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.run_worker("fake_worker", ["fail"]) is None
    assert "worker fail failed (exit 3)" in capsys.readouterr().err


def test_the_benchmarks_that_start_workers_name_their_own_module() -> None:
    from lab.benchmarks import learning, replay

    assert learning.WORKER_MODULE == learning.__name__
    assert replay.WORKER_MODULE == replay.__name__


def test_ratio_is_ours_over_the_reference() -> None:
    assert bench.ratio(3.0, 4.0) == "0.75x"


def test_targets_table_says_which_targets_were_met() -> None:
    lines = bench.targets_table([("fast", "2.00x", True), ("small", "0.50x", False)], heading="goal")
    assert lines == [
        "| goal | measured | met |",
        "|---|---:|:---:|",
        "| fast | 2.00x | yes |",
        "| small | 0.50x | no |",
    ]


def test_page_names_the_script_and_its_command_before_the_body_and_ends_with_the_machine() -> None:
    text = bench.page("Title", "python scripts/bench_x.py --quick", ["| table |"], "Machine: here.")
    lines = text.splitlines()
    assert lines[0] == "# Title"
    assert "Written by `scripts/bench_x.py`" in lines[2]
    assert lines.index("python scripts/bench_x.py --quick") < lines.index("| table |")
    assert lines[-1] == "Machine: here."


def test_write_page_makes_the_folders_it_needs(tmp_path: Path) -> None:
    path = tmp_path / "new" / "page.md"
    bench.write_page(path, bench.page("T", "python scripts/b.py", [], machine_note()))
    assert path.read_text().startswith("# T\n")
