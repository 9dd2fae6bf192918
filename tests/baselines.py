"""Reviewed baselines of what the report draws: each case's report HTML and figures, normalized,
compared with the copy in ``tests/data/baselines`` (the way matplotlib compares its figures with
baseline images).

The numbers in a report are checked against independent answers elsewhere (torch's
``key_averages``, pstats, HTA, hand counts); what no oracle has is everything around them: layout,
colours, labels, axis settings, the order of parts, hover templates. A baseline was looked at in a
browser when it was written; a change to it fails here with the parts that moved, and is written
again only once someone has looked at the new drawing (docs/testing.md, "Baselines").

Normalized so that only what nbprof decides is compared: the ids itables and the tab bars draw
(random or counted per session) renumbered in order of appearance, itables' own template (its
loading notice, its script: a new itables release) reduced to the arguments nbprof gives it, the
figures' typed arrays decoded, and floats rounded to 6 significant digits (a last-digit difference
of a sum in another numpy is not a change of the drawing)."""

from __future__ import annotations

import base64
import difflib
import gzip
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

BASELINES = Path(__file__).parent / "data" / "baselines"
UPDATE = os.environ.get("NBPROF_UPDATE_BASELINES") == "1"

_ITABLES_ID = re.compile(r"itables_[0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}")
_TAB_IDS = re.compile(r"nbprof-(tabs-|cg-)?(\d+)(?=[-\"'~:])")
_LOADING = re.compile(r'(<table id="itables_\d+" hidden="hidden">).*?(</table>\s*<div id="itables_\d+_fallback">)',
                      re.S)
_MODULE_SCRIPT = re.compile(r'<script type="module">.*?</script>', re.S)
_LONG_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{7,}(?:[eE][-+]?\d+)?(?![\w.])")


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def _round_floats(text: str) -> str:
    """Every long float written in ``text`` rounded to 6 significant digits."""
    return _LONG_FLOAT.sub(lambda m: repr(_round(float(m.group(0)))), text)


def _renumber(text: str, pattern: re.Pattern, make) -> str:
    seen: dict[str, int] = {}

    def sub(m: re.Match) -> str:
        key = m.group(0) if m.lastindex is None else m.group(m.lastindex)
        seen.setdefault(key, len(seen) + 1)
        return make(m, seen[key])

    return pattern.sub(sub, text)


def _dt_arguments(script: re.Match) -> str:
    """An itables script reduced to the arguments nbprof gave DataTables (the rows among them)."""
    body = script.group(0)
    at = body.find("let dt_args = ")
    if at < 0:
        return body
    args, _ = json.JSONDecoder().raw_decode(body, at + len("let dt_args = "))
    if isinstance(args.get("data_json"), str):
        args["data_json"] = json.loads(args["data_json"])
    return "<!-- DataTables arguments -->\n" + json.dumps(_rounded(args), indent=1, sort_keys=True, ensure_ascii=False)


def normalize_html(html: str, replace: dict[str, str] | None = None) -> str:
    for old, new in (replace or {}).items():
        html = html.replace(old, new)
    html = _renumber(html, _ITABLES_ID, lambda m, n: f"itables_{n}")
    html = _renumber(html, _TAB_IDS, lambda m, n: f"nbprof-{m.group(1) or ''}{n}")
    html = _LOADING.sub(r"\1(itables' loading notice)\2", html)
    html = _MODULE_SCRIPT.sub(_dt_arguments, html)
    html = _round_floats(html)
    return html.replace("><", ">\n<")


def _decoded(value: dict) -> list:
    arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    if "shape" in value:
        shape = value["shape"]
        arr = arr.reshape([int(s) for s in shape.split(",")] if isinstance(shape, str) else shape)
    return arr.tolist()


def _rounded(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) >= {"dtype", "bdata"}:
            return _rounded(_decoded(value))
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, float):
        return _round(value)
    if isinstance(value, str):
        return _round_floats(value)
    return value


def normalize_figure(fig: Any) -> str:
    """A plotly figure as nbprof sends it (``views.figure.figure_json``), one value a line."""
    from nbprof.views.figure import figure_json

    return json.dumps(_rounded(figure_json(fig)), indent=1, sort_keys=True, ensure_ascii=False)


def normalize_replies(replies: list[Any]) -> str:
    """What a live widget's kernel side answered, one message after another (its specs decoded)."""
    from plotly.io.json import to_json_plotly

    return json.dumps(_rounded(json.loads(to_json_plotly(replies))), indent=1, sort_keys=True, ensure_ascii=False)


def check(case: str, parts: dict[str, str]) -> None:
    """Compare ``parts`` (name -> normalized text) with the case's baseline; with
    NBPROF_UPDATE_BASELINES=1, write them as the new baseline instead."""
    path = BASELINES / f"{case}.json.gz"
    if UPDATE:  # the same bytes for the same parts (no time or name in the gzip header): git sees what changed
        BASELINES.mkdir(parents=True, exist_ok=True)
        text = json.dumps(parts, indent=0, sort_keys=True, ensure_ascii=False).encode("utf-8")
        path.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
        return
    assert path.exists(), f"no baseline {path.name}: write it with NBPROF_UPDATE_BASELINES=1 once you have looked at it"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        want = json.load(f)
    problems = []
    if sorted(want) != sorted(parts):
        problems.append(f"parts: baseline has {sorted(want)}, now {sorted(parts)}")
    for name in sorted(set(want) & set(parts)):
        if want[name] != parts[name]:
            diff = list(difflib.unified_diff(want[name].splitlines(), parts[name].splitlines(), "baseline", "now",
                                             n=1, lineterm=""))
            shown = "\n".join(line[:300] for line in diff[:40])
            more = f"\n... {len(diff) - 40} more diff lines" if len(diff) > 40 else ""
            problems.append(f"{case} · {name} differs from its baseline:\n{shown}{more}")
    assert not problems, ("\n\n".join(problems) + "\n\nIf the change is meant, look at the drawing (docs/testing.md, "
                          "'Baselines') and write it: NBPROF_UPDATE_BASELINES=1 pytest tests/test_baselines.py")
