"""``Trainer(callbacks=[nbprof.huggingface.ProfilerCallback(...)])``: profile a window of a
Hugging Face ``transformers.Trainer``'s steps.

The public path of :class:`~nbprof.integrations.huggingface.ProfilerCallback`; the code lives in
``nbprof/integrations/`` with the other framework adapters. Importing this module imports
``transformers`` (a one-line ``MissingDependencyError`` where it is not installed).
"""

from __future__ import annotations

from .integrations.huggingface import ProfilerCallback

__all__ = ["ProfilerCallback"]
