"""The public API is small and deliberate: a change to it is a decision, made here on purpose.

The names are DESIGN.md's contract (load_trace, compare, controls, step, cuda_collection, the
result types, the error tree); anything else in ``nbprof`` is internal.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import nbprof
from nbprof import errors

PUBLIC = [
    "ClusterProfile",
    "Comparison",
    "MissingDependencyError",
    "NbprofError",
    "OptionError",
    "ProfilerBusyError",
    "PythonProfile",
    "SnapshotProfile",
    "TorchProfile",
    "TraceError",
    "__version__",
    "compare",
    "controls",
    "cuda_collection",
    "from_profiler",
    "lightning",
    "load_ipython_extension",
    "load_prof",
    "load_snapshot",
    "load_trace",
    "step",
    "trace_handler",
    "unload_ipython_extension",
]


def test_all_is_the_public_api():
    assert sorted(nbprof.__all__) == PUBLIC
    assert len(set(nbprof.__all__)) == len(nbprof.__all__)


def test_dir_shows_the_public_api_only():
    assert dir(nbprof) == PUBLIC  # no Any, TYPE_CHECKING, annotations, submodules


def test_every_public_name_resolves():
    """Each name is the function or class of that name (not a stand-in bound to it); the version
    is the package's; `lightning` is the submodule of that name."""
    import types
    from importlib.metadata import version

    for name in nbprof.__all__:
        obj = getattr(nbprof, name)
        if name == "__version__":
            assert obj == version("nbprof")
        elif name == "lightning":
            assert isinstance(obj, types.ModuleType) and obj.__name__ == "nbprof.lightning"
        else:
            assert (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__name__ == name, name


def test_result_types_load_on_demand_and_are_the_real_classes():
    from nbprof.comparison import Comparison
    from nbprof.model import PythonProfile, TorchProfile
    from nbprof.snapshot import SnapshotProfile

    assert nbprof.TorchProfile is TorchProfile
    assert nbprof.PythonProfile is PythonProfile
    assert nbprof.SnapshotProfile is SnapshotProfile
    assert nbprof.Comparison is Comparison


def test_unknown_attribute_is_an_attribute_error():
    try:
        nbprof.not_a_thing  # noqa: B018
    except AttributeError as e:
        assert "not_a_thing" in str(e)
    else:  # pragma: no cover
        raise AssertionError("nbprof.not_a_thing did not raise")


def test_error_tree():
    """One base class, so ``except nbprof.NbprofError`` catches everything nbprof raises."""
    for name in ("OptionError", "TraceError", "ProfilerBusyError", "MissingDependencyError"):
        cls = getattr(nbprof, name)
        assert issubclass(cls, nbprof.NbprofError) and cls is getattr(errors, name)
    assert issubclass(nbprof.NbprofError, Exception)


def test_signatures():
    """The call forms the README and the tutorials use."""
    assert list(inspect.signature(nbprof.load_trace).parameters) == ["path", "workers", "client", "progress", "max_bytes"]
    assert list(inspect.signature(nbprof.compare).parameters)[:2] == ["before", "after"]
    assert list(inspect.signature(nbprof.cuda_collection).parameters) == ["on"]
    assert not inspect.signature(nbprof.step).parameters
    assert list(inspect.signature(nbprof.from_profiler).parameters) == ["prof"]
    assert list(inspect.signature(nbprof.load_prof).parameters) == ["path"]
    snapshot = inspect.signature(nbprof.load_snapshot).parameters
    assert list(snapshot) == ["path", "max_bytes"] and snapshot["max_bytes"].kind is inspect.Parameter.KEYWORD_ONLY
    blocks = inspect.signature(nbprof.SnapshotProfile.blocks).parameters
    assert list(blocks) == ["self", "at"] and blocks["at"].default == "end"
    assert list(inspect.signature(nbprof.SnapshotProfile.memory_curve).parameters) == ["self", "window_us"]
    # a folder's summed tables: TorchProfile's, and each rank's own rows by keyword
    lines = inspect.signature(nbprof.ClusterProfile.lines).parameters
    assert list(lines) == ["self", "per_rank"] and lines["per_rank"].kind is inspect.Parameter.KEYWORD_ONLY
    # torch.profiler.tensorboard_trace_handler(dir_name, worker_name, use_gzip), then nbprof's own
    assert list(inspect.signature(nbprof.trace_handler).parameters) == ["dir_name", "worker_name", "use_gzip", "show",
                                                                        "keep"]


def test_import_is_light():
    """``import nbprof`` (and so ``%load_ext nbprof``) loads neither torch, plotly nor pandas."""
    code = "import sys, nbprof; print(sorted(m for m in ('torch', 'plotly', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# The result objects' public members (instance attributes: meta, profiler). Adding one is fine and
# deliberate: add it here and to "Results are data" (docs/reference/results.md).
RESULT_MEMBERS = {
    "TorchProfile": ["alive_at", "alive_at_end", "allocations", "collected", "collectives", "compilation",
                     "data_loading", "device_stats", "events", "findings",
                     "from_trace", "kernels", "key_averages", "kind", "launches", "lines", "memory_curve", "memory_growth",
                     "modules", "overview", "queue_length", "range_ops", "ranges", "ranks", "report", "save", "snapshot",
                     "step_breakdown", "steps", "summary", "timeline", "timeline_view", "to_chrome_trace", "to_html",
                     "worker_stats"],
    "PythonProfile": ["action_stats", "actions", "call_tree", "callees", "callers", "data_loading", "dump", "edges",
                      "findings", "flame", "kind", "lines", "pstats", "report", "stats", "to_html", "total_s",
                      "worker_stats"],
    "Comparison": ["html", "kind", "metric", "table", "text"],
    "SnapshotProfile": ["active_memory", "blocks", "kind", "memory_curve", "report", "save", "segments", "to_html"],
}
# a folder of ranks (nbprof.cluster): a TorchProfile, and one rank's profile on demand
RESULT_MEMBERS["ClusterProfile"] = sorted(RESULT_MEMBERS["TorchProfile"] + ["close", "collective_calls", "rank",
                                                                              "rank_labels", "rank_memory",
                                                                              "rank_summaries"])


def test_result_objects_members():
    for name, members in RESULT_MEMBERS.items():
        cls = getattr(nbprof, name)
        assert sorted(n for n in dir(cls) if not n.startswith("_")) == members, name


def test_metadata_is_typed():
    """``result.meta`` is a dataclass with one type and default per field (nbprof.meta), not a dict."""
    import dataclasses

    from nbprof.meta import PythonMeta, TorchMeta
    from nbprof.model import PythonProfile, TorchProfile

    from .conftest import trace_path

    p = nbprof.load_trace(trace_path("two_streams"))
    assert isinstance(p, TorchProfile) and isinstance(p.meta, TorchMeta)
    assert p.meta.source.endswith("two_streams.trace.json.gz") and p.meta.device_properties
    assert {f.name for f in dataclasses.fields(TorchMeta)} >= {"origin_ns", "notes", "sort", "rank", "parts"}
    assert isinstance(PythonProfile({}).meta, PythonMeta)
