"""``model_class`` names of a config: :mod:`her_wrap.runs.model_classes`."""

from __future__ import annotations

import pytest

from her_wrap.runs.errors import UsageError
from her_wrap.runs.model_classes import canonical_learner_name, learner_parameters


def test_a_model_class_name_is_read_in_any_case() -> None:
    assert canonical_learner_name("SAC") == "sac"


def test_an_unknown_model_class_is_a_usage_error_listing_the_valid_ones() -> None:
    with pytest.raises(UsageError, match="sac"):
        canonical_learner_name("sacc")


def test_learner_parameters_leave_out_what_the_run_sets_itself() -> None:
    parameters = learner_parameters("ddpg")
    assert "learning_rate" in parameters
    assert "replay_buffer_class" not in parameters and "env" not in parameters
