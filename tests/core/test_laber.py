"""Specification of the LaBER functors (her_wrap.core.laber), Lahire et al. 2021, arXiv:2110.01528."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from her_wrap.core.laber import LaBER, LaBERlazy, LaBERmax, LaBERmean

B, M = 8, 4
LARGE = B * M

# Expected weight of every pick when all priorities are equal, so p_i = 1 / (m * B):
#   mean: mean(p) / p = 1;  lazy: 1 / p = m * B;  max: (1/p) / max(1/p) = 1.
UNIFORM_WEIGHT = {LaBERmean: 1.0, LaBERlazy: float(LARGE), LaBERmax: 1.0}
VARIANTS = [LaBERmean, LaBERlazy, LaBERmax]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda cls: cls.__name__)
def test_uniform_priorities_give_the_formula_weight(variant: type[LaBER]) -> None:
    out = variant(B, M, seed=0)(priorities=np.full(LARGE, 3.0))
    np.testing.assert_allclose(out["weights"], np.full(B, UNIFORM_WEIGHT[variant]), rtol=1e-6)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda cls: cls.__name__)
def test_weights_are_float32_of_batch_size(variant: type[LaBER]) -> None:
    weights = variant(B, M, seed=0)(priorities=np.arange(LARGE, dtype=np.float64))["weights"]
    assert (weights.dtype, weights.shape) == (np.float32, (B,))


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda cls: cls.__name__)
def test_one_hot_priorities_pick_the_hot_index(variant: type[LaBER]) -> None:
    # p(hot) = (1 + eps) / (1 + LARGE * eps) ~= 1 - 3.1e-5, so 800 picks expect ~0.025 misses.
    priorities = np.zeros(LARGE)
    priorities[13] = 1.0
    laber = variant(B, M, seed=1)
    picks = np.concatenate([laber(priorities=priorities)["indexes"] for _ in range(100)])
    assert np.mean(picks == 13) >= 0.99


def test_weights_follow_the_mean_formula_for_skewed_priorities() -> None:
    priorities = np.arange(1, LARGE + 1, dtype=np.float64)
    out = LaBERmean(B, M, eps=1e-6, seed=3)(priorities=priorities)
    p = (priorities + 1e-6) / np.sum(priorities + 1e-6)
    np.testing.assert_allclose(out["weights"], p.mean() / p[out["indexes"]], rtol=1e-6)


def test_weights_follow_the_lazy_formula_for_skewed_priorities() -> None:
    priorities = np.arange(1, LARGE + 1, dtype=np.float64)
    out = LaBERlazy(B, M, eps=1e-6, seed=3)(priorities=priorities)
    p = (priorities + 1e-6) / np.sum(priorities + 1e-6)
    np.testing.assert_allclose(out["weights"], 1.0 / p[out["indexes"]], rtol=1e-6)


def test_weights_follow_the_max_formula_for_skewed_priorities() -> None:
    priorities = np.arange(1, LARGE + 1, dtype=np.float64)
    out = LaBERmax(B, M, eps=1e-6, seed=3)(priorities=priorities)
    p = (priorities + 1e-6) / np.sum(priorities + 1e-6)
    inverse = 1.0 / p[out["indexes"]]
    np.testing.assert_allclose(out["weights"], inverse / inverse.max(), rtol=1e-6)


def test_pick_frequencies_follow_priorities() -> None:
    # 200 calls x 8 picks = 1,600 draws between two positions with p = 1/4 and 3/4 (every other
    # priority 0, eps tiny): the share of position 5 has standard deviation ~0.011, tolerance 0.05.
    priorities = np.zeros(LARGE)
    priorities[[5, 20]] = [1.0, 3.0]
    laber = LaBERmean(B, M, eps=1e-12, seed=4)
    picks = np.concatenate([laber(priorities=priorities)["indexes"] for _ in range(200)])
    assert np.mean(picks == 5) == pytest.approx(0.25, abs=0.05)


@settings(max_examples=50)
@given(
    st.lists(st.floats(0.0, 1e6), min_size=LARGE, max_size=LARGE),
    st.integers(0, 2**32 - 1),
)
def test_indexes_are_positions_in_the_large_batch(priorities: list[float], seed: int) -> None:
    out = LaBERmean(B, M, seed=seed)(priorities=np.array(priorities), x=np.arange(LARGE))
    np.testing.assert_array_equal(out["x"], out["indexes"])


def test_every_keyword_array_is_subsampled_at_the_same_indexes() -> None:
    obs = np.arange(LARGE * 3, dtype=np.float32).reshape(LARGE, 3)
    out = LaBERmean(B, M, seed=5)(priorities=np.arange(LARGE, dtype=np.float64), obs=obs)
    np.testing.assert_array_equal(out["obs"], obs[out["indexes"]])


def test_output_keys_are_the_keywords_plus_weights_and_indexes() -> None:
    out = LaBERmax(B, M, seed=0)(priorities=np.ones(LARGE), obs=np.zeros((LARGE, 2)), rew=np.zeros(LARGE))
    assert set(out) == {"obs", "rew", "weights", "indexes"}


def test_indexes_are_int64() -> None:
    assert LaBERmean(B, M, seed=0)(priorities=np.ones(LARGE))["indexes"].dtype == np.int64


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda cls: cls.__name__)
def test_same_seed_gives_the_same_output(variant: type[LaBER]) -> None:
    priorities = np.random.default_rng(0).random(LARGE)
    first = variant(B, M, seed=42)(priorities=priorities)
    second = variant(B, M, seed=42)(priorities=priorities)
    np.testing.assert_equal(second, first)


def test_different_seeds_give_different_draws() -> None:
    priorities = np.ones(LARGE)
    first = LaBERmean(B, M, seed=1)(priorities=priorities)["indexes"]
    assert not np.array_equal(LaBERmean(B, M, seed=2)(priorities=priorities)["indexes"], first)


def test_a_generator_seed_is_used_as_is() -> None:
    priorities = np.ones(LARGE)
    expected = LaBERmean(B, M, seed=np.random.default_rng(9))(priorities=priorities)["indexes"]
    np.testing.assert_array_equal(LaBERmean(B, M, seed=9)(priorities=priorities)["indexes"], expected)


def test_global_numpy_random_state_is_not_touched() -> None:
    # The legacy global RNG is used here on purpose: LaBER must not draw from it.
    np.random.seed(0)  # noqa: NPY002
    LaBERmean(B, M, seed=0)(priorities=np.ones(LARGE))
    assert np.random.random() == np.random.RandomState(0).random()  # noqa: NPY002


def test_inputs_are_not_modified() -> None:
    priorities = np.arange(LARGE, dtype=np.float64)
    LaBERmean(B, M, seed=0)(priorities=priorities)
    np.testing.assert_array_equal(priorities, np.arange(LARGE, dtype=np.float64))


def test_base_class_cannot_be_instantiated() -> None:
    with pytest.raises(TypeError):
        LaBER(B, M)  # type: ignore[abstract]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"batch_size": 0}, "batch_size must be an integer >= 1", id="batch-size-zero"),
        pytest.param({"batch_size": 2.5}, "batch_size must be an integer >= 1", id="batch-size-fraction"),
        pytest.param({"batch_size": 4, "m": 0}, "m must be an integer >= 1", id="m-zero"),
        pytest.param({"batch_size": 4, "m": 1.5}, "m must be an integer >= 1", id="m-fraction"),
        pytest.param({"batch_size": 4, "eps": -1.0}, "eps must be a finite number >= 0", id="eps-negative"),
        pytest.param({"batch_size": 4, "eps": np.nan}, "eps must be a finite number >= 0", id="eps-nan"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LaBERmean(**kwargs)


@pytest.mark.parametrize(
    ("priorities", "message"),
    [
        pytest.param(np.ones(LARGE - 1), rf"length m \* batch_size = {M} \* {B} = {LARGE}", id="too-short"),
        pytest.param(np.ones(B), rf"sample a large batch of {LARGE}", id="small-batch-length"),
        pytest.param(np.ones((LARGE, 1)), r"\.ravel\(\)", id="column-vector"),
        pytest.param(np.full(LARGE, np.nan), "finite", id="nan"),
        pytest.param(np.full(LARGE, np.inf), "finite", id="inf"),
        pytest.param(-np.ones(LARGE), r"np\.abs", id="negative"),
    ],
)
def test_bad_priorities_raise_a_helpful_error(priorities: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LaBERmean(B, M, seed=0)(priorities=priorities)


def test_keyword_array_with_wrong_length_names_the_key() -> None:
    with pytest.raises(ValueError, match=r"'next_obs'.*first dimension must be m \* batch_size = 32"):
        LaBERmean(B, M, seed=0)(priorities=np.ones(LARGE), obs=np.zeros(LARGE), next_obs=np.zeros(B))


def test_scalar_keyword_names_the_key() -> None:
    with pytest.raises(ValueError, match="'done'"):
        LaBERmean(B, M, seed=0)(priorities=np.ones(LARGE), done=1.0)


@pytest.mark.parametrize("key", ["weights", "indexes"])
def test_reserved_keyword_is_rejected(key: str) -> None:
    with pytest.raises(ValueError, match=f"{key!r} is reserved"):
        LaBERmean(B, M, seed=0)(priorities=np.ones(LARGE), **{key: np.zeros(LARGE)})


# --------------------------------------------------------------------------- eps = 0 (cpprb accepts it)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda cls: cls.__name__)
def test_eps_zero_is_accepted(variant: type[LaBER]) -> None:
    assert variant(B, M, eps=0).eps == 0.0


@settings(max_examples=50)
@given(
    priorities=st.lists(st.sampled_from([0.0, 0.0, 1e-300, 0.5, 3.0]), min_size=LARGE, max_size=LARGE).filter(
        lambda values: max(values) > 0
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_eps_zero_never_draws_a_zero_priority(priorities: list[float], seed: int) -> None:
    indexes = LaBERmean(B, M, eps=0, seed=seed)(priorities=priorities)["indexes"]
    assert np.all(np.asarray(priorities)[indexes] > 0)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda cls: cls.__name__)
def test_eps_zero_weights_are_finite(variant: type[LaBER]) -> None:
    priorities = np.zeros(LARGE)
    priorities[[2, 30]] = [1.0, 1e-3]
    weights = variant(B, M, eps=0, seed=0)(priorities=priorities)["weights"]
    assert np.all(np.isfinite(weights) & (weights > 0))


def test_all_zero_priorities_with_eps_zero_name_the_fix() -> None:
    with pytest.raises(ValueError, match=r"priorities are all 0 and eps is 0.*LaBERmean with eps > 0"):
        LaBERmean(B, M, eps=0, seed=0)(priorities=np.zeros(LARGE))


def test_all_zero_priorities_with_the_default_eps_are_uniform() -> None:
    out = LaBERmean(B, M, seed=0)(priorities=np.zeros(LARGE))
    np.testing.assert_allclose(out["weights"], np.ones(B), rtol=1e-6)


def test_integral_float_batch_size_is_refused_with_the_fix() -> None:
    with pytest.raises(
        ValueError, match=r"batch_size must be an integer >= 1, got 32.0; pass int\(32.0\) = 32"
    ):
        LaBERmean(32.0, 4)


def test_numpy_integer_batch_size_is_accepted() -> None:
    assert LaBERmean(np.int64(32), np.int32(4)).large_batch_size == 128


# --------------------------------------------------------------------------- the same calls against cpprb

# Constructor calls written for cpprb's LaBER: (positional, keyword) arguments.
CPPRB_ACCEPTED = {
    "batch-size-only": ((32,), {}),
    "positional-m": ((32, 2), {}),
    "keyword-m": ((32,), {"m": 8}),
    "eps-zero": ((32, 4), {"eps": 0}),
    "eps-zero-float": ((32,), {"m": 2, "eps": 0.0}),
    "eps-default-value": ((32, 4), {"eps": 1e-6}),
    "all-keywords": ((), {"batch_size": 16, "m": 4, "eps": 1e-3}),
}
CPPRB_REJECTED = {
    "batch-size-zero": ((0,), {}, ValueError),
    "m-zero": ((32, 0), {}, ValueError),
    "eps-negative": ((32, 4), {"eps": -1e-3}, ValueError),
    "eps-positional": ((32, 4, 0.0), {}, TypeError),
    "no-batch-size": ((), {}, TypeError),
}


@pytest.fixture(scope="module")
def cpprb_laber() -> ModuleType:
    return pytest.importorskip("cpprb.LaBER")


@pytest.mark.parametrize("name", CPPRB_ACCEPTED)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda cls: cls.__name__)
def test_constructor_accepts_what_cpprb_accepts(
    cpprb_laber: ModuleType, variant: type[LaBER], name: str
) -> None:
    args, kwargs = CPPRB_ACCEPTED[name]
    theirs = getattr(cpprb_laber, variant.__name__)(*args, **kwargs)
    ours = variant(*args, **kwargs)
    assert (ours.batch_size, ours.large_batch_size, ours.eps) == (
        theirs.batch_size,
        len(theirs.idx),
        theirs.eps,
    )


@pytest.mark.parametrize("name", CPPRB_REJECTED)
def test_constructor_rejects_what_cpprb_rejects(cpprb_laber: ModuleType, name: str) -> None:
    args, kwargs, error = CPPRB_REJECTED[name]
    with pytest.raises(error):
        cpprb_laber.LaBERmean(*args, **kwargs)
    with pytest.raises(error):
        LaBERmean(*args, **kwargs)


def same_batch(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray]) -> bool:
    """Same keys and, key by key, the same values (weights to float32 precision)."""
    return sorted(ours) == sorted(theirs) and all(
        np.allclose(ours[key], theirs[key], rtol=1e-6, atol=0) for key in theirs
    )


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda cls: cls.__name__)
def test_one_hot_priorities_with_eps_zero_give_cpprbs_batch(
    cpprb_laber: ModuleType, variant: type[LaBER]
) -> None:
    # With eps = 0 only the hot position can be drawn, so every output is determined.
    priorities = np.zeros(LARGE)
    priorities[13] = 2.0
    large = {"obs": np.arange(LARGE * 3).reshape(LARGE, 3), "act": np.arange(LARGE)}
    theirs = getattr(cpprb_laber, variant.__name__)(B, M, eps=0)(priorities=priorities, **large)
    ours = variant(B, M, eps=0, seed=0)(priorities=priorities, **large)
    assert same_batch(ours, theirs)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda cls: cls.__name__)
def test_uniform_priorities_give_cpprbs_weights(cpprb_laber: ModuleType, variant: type[LaBER]) -> None:
    priorities = np.full(LARGE, 0.25)
    theirs = getattr(cpprb_laber, variant.__name__)(B, M)(priorities=priorities)["weights"]
    ours = variant(B, M, seed=0)(priorities=priorities)["weights"]
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_all_zero_priorities_with_eps_zero_raise_the_error_type_cpprb_raises(cpprb_laber: ModuleType) -> None:
    with pytest.raises(ValueError), np.errstate(invalid="ignore"):
        cpprb_laber.LaBERmean(B, M, eps=0)(priorities=np.zeros(LARGE))
    with pytest.raises(ValueError):
        LaBERmean(B, M, eps=0, seed=0)(priorities=np.zeros(LARGE))


def test_each_laber_variant_names_its_functor_beside_laber() -> None:
    from her_wrap.core.laber import LABER_VARIANTS
    from her_wrap.core.settings import LaBERVariant

    assert LABER_VARIANTS == {
        LaBERVariant.MEAN: LaBERmean,
        LaBERVariant.LAZY: LaBERlazy,
        LaBERVariant.MAX: LaBERmax,
    }
