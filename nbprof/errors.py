"""The exceptions nbprof raises.

    NbprofError                 base of everything below
    ├── OptionError             a bad flag or argument value (the magics turn it into a UsageError)
    ├── TraceError              a trace or .prof file that cannot be read (names the file)
    ├── ProfilerBusyError       another profiler is already running in this process
    └── MissingDependencyError  an optional package (torch, ...) is not installed

Every message is one line that says what was wrong and what to do instead.
"""

from __future__ import annotations

__all__ = [
    "NbprofError",
    "OptionError",
    "TraceError",
    "ProfilerBusyError",
    "MissingDependencyError",
]


class NbprofError(Exception):
    """Base class of every error nbprof raises on purpose."""


class OptionError(NbprofError, ValueError):
    """A flag or argument has a value nbprof cannot use."""


class TraceError(NbprofError, ValueError):
    """A trace file (or a cProfile ``.prof`` file) is missing, empty, truncated or not one."""


class ProfilerBusyError(NbprofError, RuntimeError):
    """Another profiler is already active, so this one cannot start."""


class MissingDependencyError(NbprofError, ImportError):
    """An optional dependency is needed for this feature."""
