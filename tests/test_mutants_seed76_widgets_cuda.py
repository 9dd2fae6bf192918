"""What seed 76's sample of mutants (``widgets._cuda_state``) showed no test held: the panel's CUDA
state and its reason in the three states torch can be in besides "imported": not installed (a
``sys.path`` with no ``torch`` on it, checked through importlib's own ``find_spec``), installed but not
imported yet (a finder that finds it, whose import hands back the torch this process has loaded,
since one process cannot load a second torch), and a stand-in ``torch`` module with no import spec.
Each answer is the one torch (or the stand-in) gives, or the reason written out by hand."""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import types

from .conftest import needs_torch

NO_TORCH = "torch is not installed"
NO_CUDA = "CUDA is not available on this machine"


def test_without_torch_installed_the_panel_says_so(monkeypatch):
    # kills nbprof.widgets.x__cuda_state__mutmut_4
    # kills nbprof.widgets.x__cuda_state__mutmut_5
    # kills nbprof.widgets.x__cuda_state__mutmut_8
    # kills nbprof.widgets.x__cuda_state__mutmut_9
    # kills nbprof.widgets.x__cuda_state__mutmut_10
    # kills nbprof.widgets.x__cuda_state__mutmut_11
    """A Python with no torch on its path (this one, with ``torch`` out of ``sys.modules`` and the path
    entries that hold a ``torch`` folder left out, so that importlib's own ``find_spec`` finds none):
    CUDA is off, and the reason names torch missing, not CUDA."""
    from nbprof.widgets import _cuda_state

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not os.path.isdir(os.path.join(p or ".", "torch"))])
    assert importlib.util.find_spec("torch") is None
    assert _cuda_state() == (False, NO_TORCH)
    assert "torch" not in sys.modules  # and it did not try to import it


class _InstalledTorch(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``torch`` as an installed package not imported yet; importing it hands back the torch
    module this process has already loaded (its own, unchanged)."""

    def __init__(self, torch) -> None:
        self.torch = torch
        self.imported = 0

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name == "torch" else None

    def create_module(self, spec):
        self.imported += 1
        return self.torch

    def exec_module(self, module) -> None:
        pass


@needs_torch
def test_with_torch_installed_but_not_imported_the_panel_asks_torch(monkeypatch):
    # kills nbprof.widgets.x__cuda_state__mutmut_6
    # kills nbprof.widgets.x__cuda_state__mutmut_7
    """torch installed but not imported yet (the first ``nbprof.controls()`` of a kernel that has not
    imported torch): the panel imports it and says what ``torch.cuda.is_available()`` says, here
    that CUDA is there (torch's answer stood in for with monkeypatch; this machine has no GPU), and
    then that it is not (torch's own answer on this machine)."""
    import torch

    from nbprof.widgets import _cuda_state

    finder = _InstalledTorch(torch)
    # importlib sets the module it loads' __spec__ (the finder's): put torch's own back afterwards
    monkeypatch.setattr(torch, "__spec__", torch.__spec__)
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # stands for a machine with a GPU
    assert importlib.util.find_spec("torch") is not None
    assert _cuda_state() == (True, "")
    assert finder.imported == 1 and sys.modules["torch"] is torch

    monkeypatch.undo()
    cuda = bool(torch.cuda.is_available())
    monkeypatch.setattr(torch, "__spec__", torch.__spec__)
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(sys, "meta_path", [_InstalledTorch(torch), *sys.meta_path])
    assert _cuda_state() == ((True, "") if cuda else (False, NO_CUDA))


def test_a_stand_in_torch_module_with_cuda_counts_as_torch_with_cuda(monkeypatch):
    # kills nbprof.widgets.x__cuda_state__mutmut_1
    # kills nbprof.widgets.x__cuda_state__mutmut_2
    # kills nbprof.widgets.x__cuda_state__mutmut_4
    # kills nbprof.widgets.x__cuda_state__mutmut_18
    """A ``torch`` module already in ``sys.modules`` with no import spec (a stand-in, as docs builds
    and test doubles put there) whose ``cuda.is_available()`` says yes: CUDA is on with no reason,
    the answer the stand-in gives, not importlib's ValueError for a module whose ``__spec__`` is None."""
    from nbprof.widgets import _cuda_state

    stand_in = types.ModuleType("torch")
    stand_in.__version__ = "2.13.0"
    stand_in.cuda = types.SimpleNamespace(is_available=lambda: True)
    assert stand_in.__spec__ is None
    monkeypatch.setitem(sys.modules, "torch", stand_in)
    assert _cuda_state() == (True, "")
    stand_in.cuda.is_available = lambda: False
    assert _cuda_state() == (False, NO_CUDA)
