"""The scaling model of ``scripts/measure_scaling.py`` (docs/scaling.md): its arithmetic and its fit."""

from __future__ import annotations

import pytest
from script_modules import loaded_script


@pytest.fixture(scope="module")
def measure_scaling():
    with loaded_script("measure_scaling") as module:
        yield module


@pytest.fixture
def model(measure_scaling):
    """The figures docs/scaling.md first derived its table from (two buffers of tau 2.7 ms)."""
    return measure_scaling.ScalingModel(
        env_ms=1.6, update_a_ms=8.5, update_c_ms=0.0377, latency_ms=0.1, buffer_ms=(2.7, 2.7)
    )


def test_one_worker_has_no_all_reduce_and_the_whole_batch(model) -> None:
    assert model.allreduce_ms(1) == 0.0
    assert model.cycle_ms(1) == pytest.approx(500 * 1.6 + 20 * (8.5 + 0.0377 * 2048))
    assert model.env_steps_per_second(1) == pytest.approx(1000 * 500 / model.cycle_ms(1))


@pytest.mark.parametrize(
    ("workers", "allreduce_ms", "cycle_ms"),
    [(2, 5.8, 1458), (8, 12.3, 708), (16, 16.1, 639), (64, 35.8, 923)],
)
def test_total_batch_kept_reproduces_the_documented_rows(model, workers, allreduce_ms, cycle_ms) -> None:
    assert model.allreduce_ms(workers) == pytest.approx(allreduce_ms, abs=0.05)
    assert model.cycle_ms(workers) == pytest.approx(cycle_ms, abs=1.0)


def test_paper_regime_gathers_n_times_the_env_steps_per_cycle(model) -> None:
    # Each of 16 workers steps 500 env steps and updates on 2048 rows: 16 x 500 env steps per cycle.
    cycle = 500 * 1.6 + 20 * (8.5 + 0.0377 * 2048 + model.allreduce_ms(16))
    assert model.cycle_ms(16, paper=True) == pytest.approx(cycle)
    assert model.env_steps_per_second(16, paper=True) == pytest.approx(1000 * 16 * 500 / cycle)
    assert model.minutes_to(460_000, 16, paper=True) == pytest.approx(460_000 * cycle / (16 * 500) / 60_000)


def test_fit_recovers_the_parameters_of_exact_measurements(measure_scaling, model) -> None:
    updates = {batch: model.update_ms(batch) for batch in (256, 1024, 2048)}
    # On two workers one all-reduce takes 2 alpha + tau.
    allreduce = {"actor": 0.2 + 1.0, "critic": 0.2 + 3.0, measure_scaling.LATENCY: 0.2}
    fitted = measure_scaling.ScalingModel.fitted(1.6, updates, allreduce)
    assert fitted.update_a_ms == pytest.approx(8.5)
    assert fitted.update_c_ms == pytest.approx(0.0377)
    assert fitted.latency_ms == pytest.approx(0.1)
    assert fitted.buffer_ms == pytest.approx((1.0, 3.0))
    assert fitted.allreduce_ms(2) == pytest.approx(allreduce["actor"] + allreduce["critic"])


def test_fit_refuses_what_it_cannot_fit(measure_scaling) -> None:
    with pytest.raises(ValueError, match="two batch sizes"):
        measure_scaling.ScalingModel.fitted(1.6, {1024: 47.1}, {measure_scaling.LATENCY: 0.2})
    with pytest.raises(ValueError, match="latency"):
        measure_scaling.ScalingModel.fitted(1.6, {1024: 47.1, 2048: 85.7}, {"actor": 1.0})


def test_joint_all_reduce_pays_the_latency_once_per_gradient_step_and_twice_more_per_cycle(
    measure_scaling, model
) -> None:
    joint = measure_scaling.ScalingModel(
        env_ms=1.6, update_a_ms=8.5, update_c_ms=0.0377, latency_ms=0.1, buffer_ms=(2.7, 2.7), joint=True
    )
    for workers in (2, 16):
        steps = 2 * (workers - 1)
        # The data moved is the same; the latency is paid once instead of once per buffer.
        assert joint.allreduce_ms(workers) == pytest.approx(model.allreduce_ms(workers) - steps * 0.1)
        # 19 joint all-reduces, the first critic's and the last actor's alone: 21 latencies, 20 of each buffer.
        assert joint.cycle_ms(workers) == pytest.approx(
            model.cycle_ms(workers) - 20 * steps * 0.1 + steps * 0.1
        )
    assert joint.cycle_ms(1) == model.cycle_ms(1)


def test_fit_leaves_the_joint_figure_out(measure_scaling) -> None:
    allreduce = {"actor": 1.2, "critic": 3.2, measure_scaling.JOINT: 4.2, measure_scaling.LATENCY: 0.2}
    fitted = measure_scaling.ScalingModel.fitted(1.6, {256: 10.0, 2048: 80.0}, allreduce, joint=True)
    assert fitted.buffer_ms == pytest.approx((1.0, 3.0))
    assert fitted.joint
    # On two workers the joint all-reduce is modelled as 2 alpha + both buffers' transfer.
    assert fitted.allreduce_ms(2) == pytest.approx(allreduce[measure_scaling.JOINT])


def test_every_throughput_run_keeps_the_entrys_env_steps_rows_and_random_steps_per_update(
    measure_scaling,
) -> None:
    from lab.experiments import VARIANT_WORKERS, VARIANTS

    # The 2-worker runs are the variants whose data per update tests/runs/test_robotics_results.py holds
    # equal to the entry's (env steps, rows and random steps per gradient step).
    # Every run trains the one-process FetchPush entry the scaling model measured, the variant's changes after.
    measured = measure_scaling.measured_entry_overrides()
    assert measured == (
        *VARIANTS["envs-2-steps-125"],
        *VARIANTS["float32"],
        *VARIANTS["no-actor-average"],
        *VARIANTS["n-steps-1"],
        *VARIANTS["net-3x256"],
        *VARIANTS["one-process"],
    )
    (_, extra, workers), *split = measure_scaling.throughput_runs()
    assert workers == 1 and tuple(extra[extra.index("-params") + 1 :]) == measured
    ran = [(workers, tuple(extra[extra.index("-params") + 1 :])) for _, extra, workers in split]
    variants = ["workers-2", "workers-2-envs-2", "workers-2-envs-2"]
    assert ran == [(VARIANT_WORKERS[name], (*measured, *VARIANTS[name])) for name in variants]
    # the last layout is the one before it, its workers left unbound
    assert [("--no-pin-workers" in extra) for _, extra, _ in split] == [False, False, True]


def test_throughput_rounds_alternate_their_order(measure_scaling) -> None:
    assert [measure_scaling.round_order(index, 3) for index in range(3)] == [[0, 1, 2], [2, 1, 0], [0, 1, 2]]


def test_throughput_summary_takes_each_layouts_median_ratio_and_ratio_of_means(measure_scaling) -> None:
    # Two rounds on a host that sped up by half between them: 1 worker, then two 2-worker layouts.
    rounds = [[100.0, 110.0, 130.0], [150.0, 180.0, 180.0]]
    (first, second) = measure_scaling.throughput_summary(rounds)
    assert first == pytest.approx((1.15, 290 / 250))
    assert second == pytest.approx((1.25, 310 / 250))
