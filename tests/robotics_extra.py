"""Marks of the tests that need the robotics extra (gymnasium-robotics' Fetch, panda-gym's Panda).

``pytestmark = ROBOTICS`` marks a module ``robotics`` and skips it, naming the missing package, where
gymnasium-robotics is not installed; ``needs_panda_gym`` skips the Panda cases alone.
"""

from __future__ import annotations

import importlib.util

import pytest

MISSING_EXTRA = "needs the robotics extra (pip install 'her_wrap[robotics]'): {} is not installed"

ROBOTICS = [
    pytest.mark.robotics,
    pytest.mark.skipif(
        importlib.util.find_spec("gymnasium_robotics") is None,
        reason=MISSING_EXTRA.format("gymnasium_robotics"),
    ),
]

needs_panda_gym = pytest.mark.skipif(
    importlib.util.find_spec("panda_gym") is None, reason=MISSING_EXTRA.format("panda_gym")
)
