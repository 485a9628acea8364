"""Rollout engines (see :mod:`fade_core.rollout.base`)."""

from fade_core.rollout.base import ENGINE_NAMES, RolloutBatch, RolloutEngine, build_engine

__all__ = ["ENGINE_NAMES", "RolloutBatch", "RolloutEngine", "build_engine"]
