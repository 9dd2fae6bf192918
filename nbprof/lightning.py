"""``Trainer(profiler=nbprof.lightning.Profiler())``: nbprof's profiler for PyTorch Lightning.

The public path of :class:`~nbprof.integrations.lightning.Profiler`; the code lives in
``nbprof/integrations/`` with the other framework adapters. Importing this module imports no
Lightning.
"""

from __future__ import annotations

from .integrations.lightning import Profiler

__all__ = ["Profiler"]
