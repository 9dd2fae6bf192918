"""Adapters for what the user runs nbprof inside of: training frameworks (Lightning, Hugging Face
transformers) and torch profilers the user started (``from_profiler``, ``trace_handler``)."""
