"""Specification of the sum tree and of proportional prioritized replay (her_wrap.core.sum_tree)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from her_wrap.core.sum_tree import ProportionalPrioritizer, SumTree

# --------------------------------------------------------------------------------------------------
# SumTree
# --------------------------------------------------------------------------------------------------

_values = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def _updates(draw: st.DrawFn) -> tuple[int, list[tuple[list[int], list[float]]]]:
    """A capacity and a few update batches (indexes may repeat within a batch). Batches of up to 40 slots
    take both of the tree's write paths: slot by slot (up to 16) and level by level."""
    capacity = draw(st.integers(min_value=1, max_value=70))
    batches = []
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        size = draw(st.integers(min_value=1, max_value=40))
        indexes = draw(st.lists(st.integers(0, capacity - 1), min_size=size, max_size=size))
        values = draw(st.lists(_values, min_size=size, max_size=size))
        batches.append((indexes, values))
    return capacity, batches


def _reference(capacity: int, batches: list[tuple[list[int], list[float]]]) -> np.ndarray:
    """Slot values after applying the batches one write at a time (last write wins)."""
    expected = np.zeros(capacity)
    for indexes, values in batches:
        for index, value in zip(indexes, values, strict=True):
            expected[index] = value
    return expected


@settings(max_examples=150)
@given(_updates())
def test_total_equals_numpy_sum_after_random_updates(case: tuple[int, list]) -> None:
    capacity, batches = case
    tree = SumTree(capacity)
    for indexes, values in batches:
        tree.update(np.array(indexes, dtype=np.int64), np.array(values))
    assert tree.total() == pytest.approx(_reference(capacity, batches).sum(), rel=1e-12, abs=1e-9)


@settings(max_examples=150)
@given(_updates())
def test_get_returns_last_written_value_per_slot(case: tuple[int, list]) -> None:
    capacity, batches = case
    tree = SumTree(capacity)
    for indexes, values in batches:
        tree.update(np.array(indexes, dtype=np.int64), np.array(values))
    np.testing.assert_array_equal(tree.get(np.arange(capacity)), _reference(capacity, batches))


def test_duplicate_indexes_in_one_update_last_write_wins() -> None:
    tree = SumTree(4)
    tree.update(np.array([2, 0, 2, 2]), np.array([5.0, 1.0, 7.0, 3.0]))
    np.testing.assert_array_equal(tree.get(np.arange(4)), [1.0, 0.0, 3.0, 0.0])


@pytest.mark.parametrize("size", [3, 16, 17, 500])
def test_every_inner_node_is_the_sum_of_its_children_after_writes_of_any_size(size: int) -> None:
    rng = np.random.default_rng(size)
    tree = SumTree(100)
    for _ in range(3):
        tree.update(rng.integers(0, 100, size), rng.random(size))
    nodes, half = tree._nodes, tree._size
    np.testing.assert_array_equal(nodes[1:half], nodes[2 : 2 * half : 2] + nodes[3 : 2 * half : 2])


def test_duplicate_indexes_keep_parent_sums_exact() -> None:
    tree = SumTree(4)
    tree.update(np.array([2, 0, 2, 2]), np.array([5.0, 1.0, 7.0, 3.0]))
    assert tree.total() == 4.0


# Values [1, 0, 2, 3, 0, 4] own the intervals [0,1) [1,1) [1,3) [3,6) [6,6) [6,10).
_HAND_VALUES = np.array([1.0, 0.0, 2.0, 3.0, 0.0, 4.0])


@pytest.mark.parametrize(
    ("prefix", "leaf"),
    [
        pytest.param(0.0, 0, id="zero-prefix-first-leaf"),
        pytest.param(0.5, 0, id="inside-first-leaf"),
        pytest.param(1.0, 2, id="boundary-skips-zero-leaf"),
        pytest.param(2.999, 2, id="just-below-boundary"),
        pytest.param(3.0, 3, id="boundary-belongs-to-next-leaf"),
        pytest.param(5.5, 3, id="inside-middle-leaf"),
        pytest.param(6.0, 5, id="boundary-skips-second-zero-leaf"),
        pytest.param(9.999, 5, id="inside-last-leaf"),
        pytest.param(10.0, 5, id="prefix-equal-total-gives-last-positive-leaf"),
        pytest.param(1e9, 5, id="prefix-above-total-is-clipped"),
        pytest.param(-3.0, 0, id="negative-prefix-is-clipped"),
    ],
)
def test_find_returns_hand_computed_leaf(prefix: float, leaf: int) -> None:
    tree = SumTree(6)
    tree.update(np.arange(6), _HAND_VALUES)
    assert tree.find(np.array([prefix]))[0] == leaf


def test_find_is_vectorized_over_the_batch() -> None:
    tree = SumTree(6)
    tree.update(np.arange(6), _HAND_VALUES)
    np.testing.assert_array_equal(tree.find(np.array([0.5, 1.0, 3.0, 9.0])), [0, 2, 3, 5])


@st.composite
def _sparse_tree(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Slot values with many zeros (at least one positive) and prefixes across and beyond [0, total]."""
    capacity = draw(st.integers(min_value=1, max_value=100))
    values = np.array(
        draw(
            st.lists(
                st.one_of(st.just(0.0), st.floats(1e-300, 1e300), st.floats(1e-3, 1e3)),
                min_size=capacity,
                max_size=capacity,
            )
        )
    )
    values[draw(st.integers(0, capacity - 1))] = draw(st.floats(1e-300, 1e300))
    fractions = np.array(draw(st.lists(st.floats(-0.1, 1.1), min_size=1, max_size=50)))
    return values, fractions


@settings(max_examples=200)
@given(_sparse_tree())
def test_find_never_returns_a_zero_valued_leaf(case: tuple[np.ndarray, np.ndarray]) -> None:
    values, fractions = case
    tree = SumTree(values.size)
    tree.update(np.arange(values.size), values)
    found = tree.find(fractions * tree.total())
    assert np.all(tree.get(found) > 0)


@settings(max_examples=200)
@given(_sparse_tree())
def test_find_never_returns_an_index_outside_capacity(case: tuple[np.ndarray, np.ndarray]) -> None:
    values, fractions = case
    tree = SumTree(values.size)
    tree.update(np.arange(values.size), values)
    found = tree.find(fractions * tree.total())
    assert np.all((found >= 0) & (found < values.size))


def test_find_on_an_empty_tree_raises() -> None:
    with pytest.raises(ValueError, match="positive total"):
        SumTree(4).find(np.array([0.0]))


@pytest.mark.parametrize("capacity", [0, -1, 2.5, True])
def test_sum_tree_rejects_bad_capacity(capacity: object) -> None:
    with pytest.raises(ValueError, match="capacity must be an integer >= 1"):
        SumTree(capacity)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# ProportionalPrioritizer
# --------------------------------------------------------------------------------------------------


def test_sampling_frequencies_follow_priorities_chi_square() -> None:
    # Stored value per slot is (p + eps) ** alpha; with alpha = 0.6 a sampler that ignored alpha (or eps)
    # would be far off. 2,000 batches of 16 = 32,000 draws over 8 slots, df = 8 - 1 = 7,
    # critical value chi2.ppf(0.999, 7) ~= 24.32: a correct sampler fails this 1 time in 1,000 seeds.
    alpha, eps = 0.6, 1e-6
    priorities = np.array([0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 0.1, 3.0])
    prioritizer = ProportionalPrioritizer(priorities.size, alpha=alpha, eps=eps)
    prioritizer.update_priorities(np.arange(priorities.size), priorities)
    rng = np.random.default_rng(12345)
    draws = np.concatenate([prioritizer.sample(16, rng) for _ in range(2_000)])
    observed = np.bincount(draws, minlength=priorities.size)
    stored = (priorities + eps) ** alpha
    expected = draws.size * stored / stored.sum()
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    assert statistic < stats.chi2.ppf(0.999, df=priorities.size - 1)


def test_new_rows_get_the_current_max_priority() -> None:
    prioritizer = ProportionalPrioritizer(4, alpha=0.5, eps=1e-6)
    prioritizer.update_priorities(np.array([0]), np.array([9.0]))
    prioritizer.mark_new(np.array([1, 2]))
    np.testing.assert_allclose(prioritizer.probabilities(np.array([0, 1, 2])), [1 / 3, 1 / 3, 1 / 3])


def test_max_priority_starts_at_one() -> None:
    assert ProportionalPrioritizer(4).max_priority == 1.0


def test_max_priority_tracks_the_largest_update() -> None:
    prioritizer = ProportionalPrioritizer(4)
    prioritizer.update_priorities(np.array([0, 1]), np.array([3.0, 7.5]))
    prioritizer.update_priorities(np.array([1]), np.array([0.5]))
    assert prioritizer.max_priority == 7.5


def test_zeroed_slots_are_never_sampled() -> None:
    prioritizer = ProportionalPrioritizer(6)
    prioritizer.mark_new(np.arange(6))
    prioritizer.zero(np.array([0, 2, 5]))
    draws = prioritizer.sample(1_000, np.random.default_rng(0))
    assert set(np.unique(draws).tolist()) == {1, 3, 4}


def test_sampling_from_an_empty_prioritizer_raises() -> None:
    with pytest.raises(ValueError, match="mark_new"):
        ProportionalPrioritizer(4).sample(2, np.random.default_rng(0))


def test_same_seed_gives_the_same_sample() -> None:
    prioritizer = ProportionalPrioritizer(50)
    prioritizer.update_priorities(np.arange(50), np.linspace(0.0, 5.0, 50))
    first = prioritizer.sample(32, np.random.default_rng(7))
    np.testing.assert_array_equal(prioritizer.sample(32, np.random.default_rng(7)), first)


_BAD_UPDATES = [
    pytest.param(np.array([0, 1]), np.array([1.0, np.nan]), ValueError, "finite", id="nan-priority"),
    pytest.param(np.array([0, 1]), np.array([1.0, np.inf]), ValueError, "finite", id="inf-priority"),
    pytest.param(np.array([0, 1]), np.array([1.0, -0.5]), ValueError, ">= 0", id="negative-priority"),
    pytest.param(np.array([0, 8]), np.array([1.0, 2.0]), ValueError, r"\[0, 8\)", id="index-too-large"),
    pytest.param(np.array([0, -1]), np.array([1.0, 2.0]), ValueError, r"\[0, 8\)", id="negative-index"),
    pytest.param(
        np.array([0, 1, 2]), np.array([1.0, 2.0]), ValueError, "one value per index", id="shape-mismatch"
    ),
    pytest.param(np.array([[0, 1]]), np.array([[1.0, 2.0]]), ValueError, "1-D", id="two-dimensional"),
    pytest.param(np.array([0.0, 1.0]), np.array([1.0, 2.0]), TypeError, "integers", id="float-indexes"),
]


@pytest.mark.parametrize(("indexes", "priorities", "error", "message"), _BAD_UPDATES)
def test_bad_priority_update_raises_a_helpful_error(
    indexes: np.ndarray, priorities: np.ndarray, error: type[Exception], message: str
) -> None:
    prioritizer = ProportionalPrioritizer(8)
    with pytest.raises(error, match=message):
        prioritizer.update_priorities(indexes, priorities)


@pytest.mark.parametrize(("indexes", "priorities", "error", "message"), _BAD_UPDATES)
def test_bad_priority_update_leaves_the_tree_unchanged(
    indexes: np.ndarray, priorities: np.ndarray, error: type[Exception], message: str
) -> None:
    prioritizer = ProportionalPrioritizer(8)
    prioritizer.update_priorities(np.arange(8), np.arange(8, dtype=np.float64))
    before = (prioritizer.probabilities(np.arange(8)), prioritizer.total(), prioritizer.max_priority)
    with pytest.raises(error):
        # Every bad case starts with a valid slot 0: a non-atomic update would have changed it.
        prioritizer.update_priorities(indexes, priorities * 100)
    after = (prioritizer.probabilities(np.arange(8)), prioritizer.total(), prioritizer.max_priority)
    np.testing.assert_equal(after, before)


def test_importance_weights_are_one_for_uniform_priorities() -> None:
    prioritizer = ProportionalPrioritizer(10)
    prioritizer.update_priorities(np.arange(10), np.full(10, 2.0))
    weights = prioritizer.importance_weights(np.array([0, 3, 3, 9]), beta=0.7, n_stored=10)
    np.testing.assert_array_equal(weights, np.ones(4, dtype=np.float32))


def test_importance_weights_are_normalized_by_the_batch_max() -> None:
    # alpha = 1, eps tiny: P = [1, 3] / 4 with N = 2 gives raw weights (2P) ** -1 = [2, 2/3] -> [1, 1/3].
    prioritizer = ProportionalPrioritizer(2, alpha=1.0, eps=1e-12)
    prioritizer.update_priorities(np.array([0, 1]), np.array([1.0, 3.0]))
    weights = prioritizer.importance_weights(np.array([0, 1]), beta=1.0, n_stored=2)
    np.testing.assert_allclose(weights, [1.0, 1 / 3], rtol=1e-6)


@pytest.mark.parametrize("beta", [-0.1, 1.5, float("nan")])
def test_importance_weights_reject_beta_outside_unit_interval(beta: float) -> None:
    prioritizer = ProportionalPrioritizer(2)
    prioritizer.mark_new(np.array([0, 1]))
    with pytest.raises(ValueError, match=r"beta must be a number in \[0, 1\]"):
        prioritizer.importance_weights(np.array([0]), beta=beta, n_stored=2)


def test_importance_weights_reject_zero_probability_slots() -> None:
    prioritizer = ProportionalPrioritizer(2)
    prioritizer.mark_new(np.array([0]))
    with pytest.raises(ValueError, match="zero probability"):
        prioritizer.importance_weights(np.array([0, 1]), beta=0.5, n_stored=1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"capacity": 0}, "capacity", id="capacity-zero"),
        pytest.param({"capacity": 4, "alpha": -0.1}, "alpha", id="negative-alpha"),
        pytest.param({"capacity": 4, "eps": 0.0}, "eps", id="zero-eps"),
        pytest.param({"capacity": 4, "eps": -1e-6}, "eps", id="negative-eps"),
    ],
)
def test_prioritizer_constructor_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ProportionalPrioritizer(**kwargs)
