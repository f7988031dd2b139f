"""her_wrap: Hindsight Experience Replay for any off-policy learner."""

from her_wrap.core.strategies import GoalSelectionStrategy

__all__ = ["GoalSelectionStrategy"]
__version__ = "0.1.0"
