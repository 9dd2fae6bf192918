"""What seed 73's sample of mutants (docs/testing.md) showed no test held in the static timeline's
zoom hint: the words a merged figure's subtitle gives the user, checked against the public
``Profile.timeline`` signature they point to."""

from __future__ import annotations

import inspect

import nbprof
from nbprof.model import TorchProfile

from .conftest import trace_path

HINT = "window_us=(start_us, end_us) draws a part in full detail"


def test_a_merged_static_timeline_s_subtitle_ends_with_the_window_us_hint_word_for_word():
    """The recorded CNN training step drawn with at most 200 rectangles is merged; its subtitle's
    last part (parts are joined by " · ") is exactly the hint, nothing before or after it, and the
    hint opens with a keyword ``Profile.timeline`` really takes, so the user can type it as read."""
    p = nbprof.load_trace(trace_path("cnn_train_cuda"))
    sub = p.timeline(max_rects=200).layout.title.subtitle.text
    assert "merged into" in sub  # merged: the case under test
    parts = sub.split(" · ")
    assert parts[-1] == HINT, sub
    keyword = parts[-1].split("=", 1)[0]
    assert keyword in inspect.signature(TorchProfile.timeline).parameters
