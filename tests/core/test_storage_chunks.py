"""EpisodeStorage.add_steps stores a chunk of steps exactly as that many single adds would.

Random step sequences (episodes ending at random, several env columns, rings small enough to wrap many
times) are stored twice, one add per step and in chunks cut at random; every array and counter must agree.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from her_wrap.core.storage import AddReport, EpisodeStorage, FieldSpec


def storage(n_envs: int, capacity: int) -> EpisodeStorage:
    return EpisodeStorage(
        capacity,
        n_envs,
        observation_fields={"position": FieldSpec((2,)), "goal": FieldSpec(())},
        step_fields={"action": FieldSpec((1,)), "flag": FieldSpec((), np.bool_)},
        store_infos=True,
    )


def flat(reports: list[AddReport], part: str) -> list:
    return sorted(item for report in reports for item in getattr(report, part))


@pytest.mark.parametrize("seed", range(40))
def test_chunks_store_what_single_adds_store(seed):
    rng = np.random.default_rng(seed)
    n_envs = int(rng.integers(1, 4))
    capacity, n_steps = int(rng.integers(12, 40)) * n_envs, int(rng.integers(1, 80))
    dones = rng.random((n_steps, n_envs)) < 0.25
    dones[:, :] |= np.arange(n_steps)[:, None] % 10 == 9  # episodes of at most 10 steps fit every ring
    observations = {"position": rng.random((n_steps, n_envs, 2)), "goal": rng.random((n_steps, n_envs))}
    next_observations = {"position": rng.random((n_steps, n_envs, 2)), "goal": rng.random((n_steps, n_envs))}
    steps = {"action": rng.random((n_steps, n_envs, 1)), "flag": rng.random((n_steps, n_envs)) < 0.5}
    infos = [[{"step": t, "column": c} for c in range(n_envs)] for t in range(n_steps)]
    single, chunked = storage(n_envs, capacity), storage(n_envs, capacity)
    single_reports = [
        single.add(
            {name: values[t] for name, values in observations.items()},
            {name: values[t] for name, values in next_observations.items()},
            {name: values[t] for name, values in steps.items()},
            dones[t],
            infos[t],
        )
        for t in range(n_steps)
    ]
    cuts = sorted({0, n_steps, *rng.integers(0, n_steps, size=3).tolist()})
    chunked_reports = [
        chunked.add_steps(
            {name: values[low:high] for name, values in observations.items()},
            {name: values[low:high] for name, values in next_observations.items()},
            {name: values[low:high] for name, values in steps.items()},
            dones[low:high],
            infos[low:high],
        )
        for low, high in itertools.pairwise(cuts)
        if high > low
    ]
    holds = single.step_index >= 0
    same = [
        *(
            np.array_equal(getattr(single, name), getattr(chunked, name))
            for name in ("step_index", "episode_length")
        ),
        *(
            np.array_equal(getattr(single, name), getattr(chunked, name))
            for name in ("written", "open_start")
        ),
        *(np.array_equal(single.observations[name], chunked.observations[name]) for name in observations),
        *(np.array_equal(single.steps[name][holds], chunked.steps[name][holds]) for name in steps),
        bool((single.infos[holds] == chunked.infos[holds]).all()),
        single.n_transitions == chunked.n_transitions,
        single.n_finished_transitions == chunked.n_finished_transitions,
        *(
            flat(single_reports, part) == flat(chunked_reports, part)
            for part in ("new_transitions", "cleared", "finished")
        ),
    ]
    assert all(same)


def test_a_chunk_with_an_episode_longer_than_a_column_leaves_the_storage_as_it_was():
    chunked = storage(1, 6)
    fields = {"position": np.zeros((8, 1, 2)), "goal": np.zeros((8, 1))}
    with pytest.raises(ValueError, match="raise the buffer capacity"):
        chunked.add_steps(
            fields,
            fields,
            {"action": np.zeros((8, 1, 1)), "flag": np.zeros((8, 1), bool)},
            np.zeros((8, 1), bool),
        )
    assert chunked.n_transitions == 0 and int(chunked.written[0]) == 0
