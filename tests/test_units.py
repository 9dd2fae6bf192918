"""One rule for bytes everywhere nbprof prints them (text tables, the interactive tables' script,
the memory figure's axis, the timeline's memory track, findings), and counts in the number's form.

Sizes are binary and labelled so: 1 KiB = 1,024 bytes (torch's counters and nvidia-smi count in
powers of two). The expected texts are worked out by hand below, not by nbprof's formatter."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .synthetic import Trace

# bytes -> the text, by hand: 1,000,000 / 1024 = 976.5625; 5 * 2**20 + 2**19 = 5.5 MiB; ...
BY_HAND = [
    (0, "0 B"),
    (512, "512 B"),
    (1023, "1023 B"),
    (1024, "1.00 KiB"),
    (1536, "1.50 KiB"),
    (1_000_000, "976.56 KiB"),
    (1_048_576, "1.00 MiB"),
    (5 * 2**20 + 2**19, "5.50 MiB"),
    (80 * 2**30, "80.00 GiB"),
    (3 * 2**40, "3.00 TiB"),
    (-2048, "-2.00 KiB"),
]


@pytest.mark.parametrize("n,text", BY_HAND)
def test_bytes_in_binary_units_labelled_as_such(n, text):
    from nbprof.format import fmt_bytes

    assert fmt_bytes(n) == text


def test_axis_ticks_drop_trailing_zeros():
    from nbprof.format import fmt_bytes

    assert [fmt_bytes(n, compact=True) for n in (0, 2**19, 3 * 2**18, 2**20, 5 * 2**18)] == [
        "0 B", "512 KiB", "768 KiB", "1 MiB", "1.25 MiB"]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("n,text", [x for x in BY_HAND if x[0] >= 0])
def test_the_tables_script_writes_the_same_text(n, text):
    """The interactive tables' render function (JavaScript), run by node."""
    from nbprof.views.datatable import _JS_BYTES

    out = subprocess.run(["node", "-e", f"var f = {_JS_BYTES}; process.stdout.write(f({n}, 'display'))"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out == text


def _allocating_trace(tmp_path, nbytes: int = 1_000_000):
    """One op that allocates ``nbytes`` on the CPU and one that frees them."""
    t = Trace()
    t.op("aten::empty", 0, 10)
    t.memory(5, nbytes, nbytes, nbytes, device=-1)
    t.op("aten::free_it", 20, 10)
    t.memory(25, -nbytes, 0, nbytes, device=-1)
    return t.load(tmp_path)


def test_text_table_memory_columns(tmp_path):
    p = _allocating_trace(tmp_path)
    text = p.report().text()
    row = next(line for line in text.splitlines() if line.startswith("aten::empty"))
    assert "976.56 KiB" in row and "KB" not in text and " MB" not in text


def test_memory_figure_axis_and_peak_label(tmp_path):
    p = _allocating_trace(tmp_path, 3 * 2**20)  # 3 MiB: ticks at whole MiB or halves
    fig = p.memory_curve()
    ticks = list(fig.layout.yaxis.tickvals)
    texts = list(fig.layout.yaxis.ticktext)
    assert texts and all(re.fullmatch(r"\d+(\.\d+)? (B|KiB|MiB)", t) for t in texts), texts
    units = {"B": 1, "KiB": 2**10, "MiB": 2**20}
    for value, text in zip(ticks, texts):  # each label says its tick's value
        number, unit = text.split()
        assert float(number) * units[unit] == pytest.approx(value)
    html = fig.to_json()
    assert "peak 3.00 MiB" in html


def test_timeline_memory_track_is_in_mib_as_its_title_says(tmp_path):
    from nbprof.views.timeline import counter_tracks, prepare_timeline

    p = _allocating_trace(tmp_path, 3 * 2**20)
    [track] = [t for t in counter_tracks(prepare_timeline(p)) if t["name"] == "memory"]
    assert track["title"] == "allocated MiB"
    [trace] = track["traces"]
    assert max(trace["y"]) == pytest.approx(3.0)  # 3 * 2**20 bytes, on an axis in MiB
    assert "3.00 MiB" in list(trace["text"])  # the hover says the same, in fmt_bytes' words


@pytest.mark.parametrize("nbytes,unit,top", [(13_612, "KiB", 13_612 / 1024), (700, "B", 700.0),
                                             (5 * 2**30, "GiB", 5.0), (2**20 - 1, "KiB", (2**20 - 1) / 1024)])
def test_timeline_memory_track_is_in_the_unit_its_peak_is_at_least_one_of(tmp_path, nbytes, unit, top):
    """A CPU model's 13 KiB on an axis in MiB read "0.005, 0.01": the axis takes the biggest unit
    the peak is at least one of, and says so."""
    from nbprof.views.timeline import counter_tracks, prepare_timeline

    p = _allocating_trace(tmp_path, nbytes)
    [track] = [t for t in counter_tracks(prepare_timeline(p)) if t["name"] == "memory"]
    assert track["title"] == f"allocated {unit}"
    [trace] = track["traces"]
    assert max(trace["y"]) == pytest.approx(top)


# ---------------------------------------------------------------------------------- counts


def test_counts_agree_with_their_number(tmp_path):
    t = Trace()
    t.op("aten::mm", 0, 10)
    p = t.load(tmp_path)
    assert p.report().text().splitlines()[0].startswith("torch profile: 1 event ·")
    assert repr(p).startswith("<TorchProfile 1 event,")
    assert "1 rank," in repr(p.ranks())
    from nbprof.views.timeline import describe, prepare_timeline

    assert describe(prepare_timeline(p)) == "Timeline: 1 lane, 1 event"


def test_a_one_call_cprofile(shell):
    from .conftest import run

    result, captured = run(shell, "%%cprofile -q -o one\nlen('x')")
    assert result.error_in_exec is None
    text = shell.user_ns["one"].report().text()
    assert re.match(r"cProfile: 1 function call in ", text), text.splitlines()[0]
    assert repr(shell.user_ns["one"]).startswith("<PythonProfile 1 call in ")
