"""The typed cluster definition, split by domain."""

from .definition import Definition

__all__ = ["Definition"]
