"""Timeline benchmark: build time, JSON size and SVG size at 10k / 100k / 1M events.

    python benchmarks/timeline_bench.py [N ...] [--repeat R] [--html DIR]

Targets (issue 4): at 1 M events the figure builds in under 2 s and its JSON stays under 5 MB;
the static SVG stays under about 300 KB. "build" is ``timeline_figure`` from a loaded profile
(prepare + figure); "json" is what the plotly mimetype carries (``figure_json``), serialized.
The profile itself (``TorchProfile(events)``, which builds the event tree) is timed apart (best
of ``--repeat`` too).
"zoom" is the live timeline's answer to a zoom into 1 % of the span: the window's rectangles on
the profile's rows and its figure as JSON (``views.live_timeline.LiveTimelineState``).
Timings are the best of ``--repeat`` runs; the machine's other load shows in them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from nbprof.model import TorchProfile  # noqa: E402
from nbprof.views.figure import figure_json  # noqa: E402
from nbprof.views.live_timeline import LiveTimelineState  # noqa: E402
from nbprof.views.timeline import DEFAULT_MAX_RECTS, prepare_timeline, timeline_figure, timeline_svg  # noqa: E402
from tests.test_timeline import synthetic_events  # noqa: E402


def best(fn, repeat, clock=time.perf_counter):
    times, out = [], None
    for _ in range(repeat):
        t = clock()
        out = fn()
        times.append(clock() - t)
    return min(times), out


def measure(n: int, repeat: int = 3, clock=time.perf_counter) -> dict:
    """Every number of one size (``n`` synthetic events), the timeline's objects under ``"_"``.
    ``clock``: wall time by default; ``time.process_time`` gives CPU seconds (what the guard in
    tests/test_perf_guards.py reads: on a busy machine the other jobs decide the wall times)."""
    events = synthetic_events(n)

    t_profile, profile = best(lambda: TorchProfile(events), repeat, clock)
    t_prepare, data = best(lambda: prepare_timeline(profile), repeat, clock)
    t_build, fig = best(lambda: timeline_figure(profile), repeat, clock)
    t_json, text = best(lambda: json.dumps(figure_json(fig)), repeat, clock)
    t_svg, svg = best(lambda: timeline_svg(profile), repeat, clock)
    live = LiveTimelineState(profile, data, python=False, max_rects=DEFAULT_MAX_RECTS, height=None)
    z0 = data.t0_us + data.span_us * 0.4
    t_zoom, _ = best(lambda: live.spec(live.window(z0, z0 + data.span_us / 100, 1200)), repeat, clock)
    return {"events": len(events), "profile_s": t_profile, "prepare_s": t_prepare, "build_s": t_build,
            "json_s": t_json, "json_mb": len(text) / 1e6, "rects": len(data.rects), "merged": data.merged_events,
            "svg_s": t_svg, "svg_kb": len(svg) / 1e3, "zoom_s": t_zoom, "_": (fig, svg)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", nargs="*", type=int, default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--html", help="also write <DIR>/timeline_<N>.html (plotly.js inline) and .svg")
    args = ap.parse_args()

    print(f"{'events':>10} {'profile s':>10} {'prepare s':>10} {'build s':>8} {'json s':>7} {'JSON MB':>8} "
          f"{'rects':>7} {'merged':>10} {'SVG s':>6} {'SVG KB':>7} {'zoom s':>7}")
    for n in args.sizes:
        m = measure(n, args.repeat)
        print(f"{m['events']:>10,} {m['profile_s']:>10.2f} {m['prepare_s']:>10.2f} {m['build_s']:>8.2f} "
              f"{m['json_s']:>7.2f} {m['json_mb']:>8.2f} {m['rects']:>7,} {m['merged']:>10,} {m['svg_s']:>6.2f} "
              f"{m['svg_kb']:>7.0f} {m['zoom_s']:>7.2f}")
        if args.html:
            fig, svg = m["_"]
            os.makedirs(args.html, exist_ok=True)
            fig.write_html(os.path.join(args.html, f"timeline_{n}.html"), include_plotlyjs=True)
            with open(os.path.join(args.html, f"timeline_{n}.svg"), "w") as f:
                f.write(svg)

if __name__ == "__main__":
    main()
