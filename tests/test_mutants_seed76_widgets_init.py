"""What seed 76's sample of mutants (widgets.Controls: building the toggles, reading a setting, the
state) showed no test held, each against an answer of its own: the toggles read back through
ipywidgets' own traits against values and icon names written by hand (FontAwesome's "check"), and
the options the next ``%%torchprof`` run resolves through the magic's real flag parsing
(``magics.parse_flags``) with torch's ``cuda.is_available`` answering as on a machine with or without
CUDA."""

from __future__ import annotations

from .conftest import needs_torch
from .test_mutants_untested import panel  # noqa: F401  (the fixture: a fresh panel, put back after)


def _toggles(c) -> dict:
    """The panel's toggles by their label, found through ipywidgets' own containers."""
    return {t.description: t for t in c.widget.children[1].children}


def _next_run():
    """The options the next ``%%torchprof -q`` (no other flag typed) would record with."""
    from nbprof.magics import parse_flags

    return parse_flags("torchprof", "-q")


@needs_torch
def test_a_panel_first_shown_after_code_turned_options_on_shows_them_checked(panel, monkeypatch):  # noqa: F811
    # kills nbprof.widgets.xǁControlsǁ__init____mutmut_14
    # kills nbprof.widgets.xǁControlsǁ__init____mutmut_16
    # kills nbprof.widgets.xǁControlsǁ__init____mutmut_18
    # kills nbprof.widgets.xǁControlsǁ__init____mutmut_19
    """Memory and stacks turned on from code before the panel is first shown: the new panel's
    Memory and Stacks toggles are on and carry the "check" icon (as after a click), Shapes and the
    disabled CUDA toggle are off with no icon, and the next run records memory and stacks."""
    import torch

    import nbprof

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    panel.memory = True
    panel.stack = True
    c = nbprof.controls()
    t = _toggles(c)
    assert {k: (w.value, w.icon) for k, w in t.items()} == {
        "CUDA": (False, ""), "Memory": (True, "check"), "Shapes": (False, ""), "Stacks": (True, "check")}
    options = _next_run()
    assert (options.cuda, options.memory, options.shapes, options.stack) == (False, True, False, True)
    # a click on gives the same icon the new panel was built with
    t["Shapes"].value = True
    assert t["Shapes"].icon == "check"


@needs_torch
def test_cuda_clicked_off_stays_off_when_the_panel_is_shown_again(panel, monkeypatch):  # noqa: F811
    # kills nbprof.widgets.xǁControlsǁ_value__mutmut_6
    """Where torch says CUDA is available the CUDA toggle starts on; the user clicks it off. Shown
    again (``nbprof.controls()`` re-reads the settings), it is still off, and the next run records
    the CPU only: the built-in "CUDA where there is CUDA" applies only while the user set nothing."""
    import torch

    import nbprof

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    c = nbprof.controls()
    t_cuda = _toggles(c)["CUDA"]
    assert (t_cuda.value, t_cuda.disabled, _next_run().cuda) == (True, False, True)
    t_cuda.value = False  # the click
    assert _next_run().cuda is False
    assert nbprof.controls() is c
    assert (t_cuda.value, t_cuda.icon, panel.cuda) == (False, "", False)
    assert _next_run().cuda is False
    assert c.state()["cuda"] is False
    assert c.describe() == "next %%torchprof records: CPU"


@needs_torch
def test_cuda_set_on_from_code_where_there_is_none_is_not_said_to_be_recorded(panel, monkeypatch):  # noqa: F811
    # kills nbprof.widgets.xǁControlsǁstate__mutmut_6
    # kills nbprof.widgets.xǁControlsǁstate__mutmut_7
    """``settings.panel.cuda = True`` set from code on a machine without CUDA: the next run profiles
    the CPU only (with the note saying so), and the panel says the same: its state has CUDA off, its
    status and text name the CPU only."""
    import torch

    import nbprof

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    panel.cuda = True
    c = nbprof.controls()
    options = _next_run()
    assert options.cuda is False
    assert "CUDA is not available here: profiling the CPU only" in options.notes
    assert c.state() == {"cuda": False, "memory": False, "shapes": False, "stack": False}
    assert c.describe() == "next %%torchprof records: CPU"
    assert c.widget.children[3].value == '<span style="color:#555">next %%torchprof records: CPU</span>'
    assert repr(c) == ("nbprof controls: cuda=off, memory=off, shapes=off, stack=off"
                       " (CUDA: CUDA is not available on this machine)")
