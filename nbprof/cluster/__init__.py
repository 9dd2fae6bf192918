"""A folder of ranks: :class:`~nbprof.cluster.profile.ClusterProfile`, what
``nbprof.load_trace(folder)`` returns for two or more trace files."""

from __future__ import annotations

from .profile import ClusterProfile

__all__ = ["ClusterProfile"]
