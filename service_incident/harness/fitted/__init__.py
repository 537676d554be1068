"""The fitted reference agent: a model fitted on training play, evaluated in pure Python."""

from .agent import FittedAgent

__all__ = ["FittedAgent"]
