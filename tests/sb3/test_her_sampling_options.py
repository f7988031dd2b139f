"""HER's LaBER and prioritized replay options: they train every learner and survive save / load."""

from __future__ import annotations

import pytest
from stable_baselines3 import DDPG, DQN, SAC, TD3

from her_wrap import HER, BitFlippingEnv
from her_wrap.sb3.batch_sources import LaBERSource, PrioritizedSource

OPTIONS = {
    "laber": ({"laber": "mean", "laber_m": 2}, LaBERSource),
    "prioritized": ({"prioritized": True, "alpha": 0.5, "beta": 0.3}, PrioritizedSource),
}


def her_model(model_class: type, options: dict, learner_kwargs: dict) -> HER:
    env = BitFlippingEnv(n_bits=4, continuous=model_class is not DQN)
    return HER("MlpPolicy", env, model_class, seed=0, **options, **learner_kwargs)


@pytest.mark.parametrize("option", list(OPTIONS))
def test_sampling_option_survives_save_and_load(tmp_path, option, tiny_learner_kwargs):
    options, source_class = OPTIONS[option]
    her_model(DQN, options, tiny_learner_kwargs()).save(tmp_path / "model")
    loaded = HER.load(tmp_path / "model", env=BitFlippingEnv(n_bits=4))
    kept = {name: loaded.settings.to_dict()[name] for name in options}
    assert (kept, type(loaded.model.batch_source)) == (options, source_class)


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("model_class", [DQN, SAC, TD3, DDPG])
def test_every_gradient_step_draws_from_the_option_source(option, model_class, tiny_learner_kwargs):
    options, _ = OPTIONS[option]
    model = her_model(model_class, options, tiny_learner_kwargs())
    source = model.model.batch_source
    draws = []
    draw = source.draw
    source.draw = lambda learner, batch_size: draws.append(batch_size) or draw(learner, batch_size)
    model.learn(200)
    assert model.model._n_updates > 0 and len(draws) == model.model._n_updates


def test_prioritized_training_reports_td_errors_after_every_gradient_step(tiny_learner_kwargs):
    model = her_model(DQN, OPTIONS["prioritized"][0], tiny_learner_kwargs())
    buffer = model.replay_buffer
    updates = []
    update_priorities = buffer.update_priorities
    buffer.update_priorities = lambda indexes, priorities: (
        updates.append(len(indexes)) or update_priorities(indexes, priorities)
    )
    model.learn(200)
    assert model.model._n_updates > 0 and updates == [32] * model.model._n_updates


@pytest.mark.parametrize("variant", ["mean", "lazy", "max"])
def test_the_laber_source_weights_with_the_core_functor_of_the_variant_asked_for(
    variant, tiny_learner_kwargs
):
    from her_wrap.core import laber

    options = {"laber": variant, "laber_m": 2}
    source = her_model(DDPG, options, tiny_learner_kwargs()).model.batch_source
    assert isinstance(source, LaBERSource) and source.variant is getattr(laber, f"LaBER{variant}")


@pytest.mark.parametrize("option", [None, *OPTIONS])
def test_only_uniform_draws_may_be_drawn_ahead_of_the_previous_step(option, tiny_learner_kwargs):
    """Several workers draw the next batch while an all-reduce waits only where the draw reads neither the
    networks (LaBER scores with the critic) nor the last step's errors (prioritized replay)."""
    from her_wrap.sb3.batch_sources import UniformSource
    from her_wrap.sb3.train_steps import draws_ahead

    options = {} if option is None else OPTIONS[option][0]
    source = her_model(DDPG, options, tiny_learner_kwargs()).model.batch_source
    assert isinstance(source, UniformSource) == (option is None)
    assert draws_ahead(source) == (option is None)


def test_a_source_that_does_not_say_is_not_drawn_ahead() -> None:
    from her_wrap.sb3.train_steps import draws_ahead

    class OwnSource:
        def draw(self, model, batch_size):
            raise AssertionError("not drawn here")

        def report(self, td_abs):
            pass

    assert not draws_ahead(OwnSource())
