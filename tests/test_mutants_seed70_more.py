"""What seed 70's sample of mutants (docs/testing.md) showed no test held, each against an answer
of its own: inductor's provenance setting put back after a cell when the user set the other
variable themselves (read back from inductor's config); the stderr filter's thread (read back from
``threading.enumerate()``); a library imported from a source checkout, not site-packages (a real
module loaded from a file in a temporary folder); the flag cache of the magics (the calls IPython's
own argparse parser receives, counted); the Memory tab's y ticks of a curve between 1000 and 1100 B
(its labels worked out by hand)."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading

import pytest

from .test_mutants_memory import _curve_y_labels

# ------------------------------------------------------- collect.compile_state._restore_inductor_settings

_PROVENANCE = ("provenance_tracking_level", "provenance_tracking")  # torch 2.9+, torch 2.7-2.8


@pytest.fixture
def inductor_cfg():
    """Inductor's config, its kernel-profile and provenance settings put back after the test."""
    import torch._inductor.config as cfg

    saved = [(holder, name, getattr(holder, name)) for holder, name in
             [(cfg.cpp, "enable_kernel_profile"), *((cfg.trace, n) for n in _PROVENANCE)] if hasattr(holder, name)]
    yield cfg
    for holder, name, value in saved:
        setattr(holder, name, value)


def test_provenance_goes_back_after_the_cell_when_the_user_set_the_kernel_profile_variable(monkeypatch,
                                                                                           inductor_cfg):
    """Inductor's config not imported yet; the user set TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE
    themselves, INDUCTOR_PROVENANCE not. nbprof sets INDUCTOR_PROVENANCE=1 for the cell; inductor,
    imported during it, reads both (kernel profile on: the user's; provenance on: nbprof's). After
    the cell the variable is gone and the provenance setting is back to off (its default without the
    variable), while the user's kernel profile stays on: the first setting being the user's must
    not stop nbprof from putting back the next one."""
    from nbprof.collect.compile_state import CompileWatch

    cfg = inductor_cfg
    name = next((n for n in _PROVENANCE if hasattr(cfg.trace, n)), None)
    if name is None:
        pytest.skip("no provenance tracking in this torch")
    monkeypatch.setenv("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", "1")
    monkeypatch.delenv("INDUCTOR_PROVENANCE", raising=False)
    cfg.cpp.enable_kernel_profile = False
    setattr(cfg.trace, name, type(getattr(cfg.trace, name))(0))
    monkeypatch.delitem(sys.modules, "torch._inductor.config")
    w = CompileWatch()
    w.begin()
    during = os.environ.get("INDUCTOR_PROVENANCE")
    # inductor imported during the cell: its config read the two variables
    sys.modules["torch._inductor.config"] = cfg
    cfg.cpp.enable_kernel_profile = True
    setattr(cfg.trace, name, type(getattr(cfg.trace, name))(1))
    w.end()
    assert during == "1"
    assert "INDUCTOR_PROVENANCE" not in os.environ and os.environ["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] == "1"
    assert getattr(cfg.trace, name) == 0
    assert cfg.cpp.enable_kernel_profile is True


# ----------------------------------------------------------------- collect.native_output.NativeStderrFilter


def test_the_stderr_filter_runs_one_daemon_thread_named_for_nbprof_while_it_is_active():
    """While the filter is active, one thread more runs: a daemon (it keeps no interpreter from
    exiting) that says whose it is, "nbprof-stderr", in ``threading.enumerate()`` (as a user sees
    it in a debugger or a thread dump); it ends when the filter stops."""
    from nbprof.collect.native_output import NativeStderrFilter

    before = set(threading.enumerate())
    with NativeStderrFilter():
        during = [(t.name, t.daemon) for t in threading.enumerate() if t not in before]
    after = [t for t in threading.enumerate() if t not in before]
    assert during == [("nbprof-stderr", True)]
    assert after == []


# ------------------------------------------------------------------------- collect.user_code.library_dirs


def test_a_library_imported_from_a_source_checkout_is_not_the_users_code(tmp_path, monkeypatch):
    """ipykernel run from a source checkout (a folder on the path, not site-packages), as a real
    module loaded from its file: its folder is one of ``library_dirs()`` and its files are not the
    user's; the user's own script next to the checkout is."""
    from nbprof.collect.user_code import UserCode, library_dirs

    pkg = tmp_path / "src" / "ipykernel"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VERSION = 'checkout'\n")
    (pkg / "kernelbase.py").write_text("x = 1\n")
    (tmp_path / "src" / "train.py").write_text("y = 2\n")
    spec = importlib.util.spec_from_file_location("ipykernel", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.VERSION == "checkout"
    monkeypatch.setitem(sys.modules, "ipykernel", module)
    assert os.path.join(str(pkg), "") in library_dirs()
    user = UserCode()
    assert not user.is_user_file(str(pkg / "kernelbase.py"))
    assert user.is_user_file(str(tmp_path / "src" / "train.py"))


# ------------------------------------------------------------------------------- magics._parse_args


def test_a_flag_string_parsed_again_is_not_handed_to_argparse_again(monkeypatch):
    """A profiled cell's flags are parsed twice (the input transformer, then ``begin``) and a re-run
    cell has the same ones: IPython's argparse parser is asked once per flag string; each call gets
    its own copy of the parse (a change to one is not in the next), equal to the first; another
    flag string is parsed on its own."""
    from nbprof import magics

    monkeypatch.setattr(magics, "_PARSED", {})
    parser = magics._FUNCS["torchprof"].parser
    seen: list[str] = []
    real = parser.parse_argstring

    def counted(argstring, **kw):
        seen.append(argstring)
        return real(argstring, **kw)

    monkeypatch.setattr(parser, "parse_argstring", counted)
    first = magics._parse_args("torchprof", "-q --sort cpu -o kept")
    expected = vars(first).copy()
    first.sort = "changed"
    second = magics._parse_args("torchprof", "-q --sort cpu -o kept")
    assert seen == ["-q --sort cpu -o kept"]
    assert vars(second) == expected and second is not first and expected["sort"] == "cpu"
    magics._parse_args("torchprof", "-q")
    assert seen == ["-q --sort cpu -o kept", "-q"]


# -------------------------------------------------------------------------------- views.memory._byte_ticks


def test_a_curve_just_under_and_over_one_kib_is_ticked_in_round_steps_of_kib(tmp_path):
    """A CPU curve between 1000 and 1100 B: its axis runs 8 % of the span (8 B) past each end,
    992 to 1108 B, 0.969 to 1.082 KiB; a third of that, 0.038 KiB, rounds up to steps of 0.05 KiB,
    so the ticks are 1 and 1.05 KiB (1024 and 1075.2 B), both read in KiB. Decimal steps of
    100 B would read "1000 B" and "1.07 KiB"."""
    labels = [text for _, text in _curve_y_labels([1000, 1100, 1000, 1100], tmp_path)]
    assert labels == ["1.05 KiB", "1 KiB"]
