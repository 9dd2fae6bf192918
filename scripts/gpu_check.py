"""The driver of ``scripts/gpu-check.sh``: every CUDA path of nbprof recorded and checked on a GPU
in a few minutes, the recordings kept for the tests that skip without one (docs/testing.md, "The GPU
check").

    python scripts/gpu_check.py [--dry-run] [--out DIR] [--data DIR] [--budget-s S] [--only STEP,...]

Each step runs in a process of its own (a fresh process: its profile is the process's first CUDA
profile, as torch's device times need; a hang is killed at the step's timeout, with its workers),
in a real IPython shell with ``%load_ext nbprof``, and checks what it recorded with the functions of
tests/gpu_checks.py against torch's own answers. After each step the results are written
(``results.json``, ``RESULTS.md``) and the recordings packed (``gpu-data.tar.gz``: ``gpu/`` and
``snapshots/`` as they go under tests/data), so a run cut short still leaves what it did.

Modes: on a machine where torch sees CUDA, every step on the GPU, recordings into tests/data/gpu;
without CUDA, the same steps on the CPU (the workloads, the shell, the saving and the checks that
apply: nothing in the tree changes), then one line saying there is no CUDA, exit 0; ``--dry-run``,
the CUDA checks fed the recorded H100 traces in tests/data (and, where they lack what a check needs,
hand-made inputs in torch's formats), then the recorded-data tests run on recordings made of them.
Exit status: 0 when every step run passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# one clock for the run's log: the steps' processes count from the run's start too
STARTED = float(os.environ.setdefault("GPU_CHECK_STARTED", repr(time.time())))
T0 = time.monotonic() - (time.time() - STARTED)
BUDGET_S = 420.0  # the steps' share of the 8 minutes a lent GPU gives one run, counted from gpu-check.sh's start (the wheels' install included)
MIN_STEP_S = 20.0  # a step is not started with less left


def log(msg: str) -> None:
    print(f"[{_dt.datetime.now().strftime('%H:%M:%S')} +{time.monotonic() - T0:5.1f}s] {msg}", flush=True)


# ================================================================== one step, in its own process


class StepContext:
    """What a step has: the device, where its recordings go, and its record (written after every
    check, so a step killed at its timeout leaves the checks it made)."""

    def __init__(self, name: str, device: str, data: Path, record: Path) -> None:
        self.name, self.device, self.data, self.record_path = name, device, data, record
        self.cuda = device == "cuda"
        self.record: dict[str, Any] = {"step": name, "device": device, "checks": [], "notes": []}
        self._shell: Any = None
        self.save()

    def save(self) -> None:
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, indent=1, default=str))
        tmp.replace(self.record_path)

    def note(self, text: str) -> None:
        log(f"{self.name}: {text}")
        self.record["notes"].append(text)
        self.save()

    def check(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one check; a failure is recorded with its message and the step goes on."""
        from tests.gpu_checks import CheckFailed, NotApplicable

        started = time.monotonic()
        entry: dict[str, Any] = {"check": name}
        try:
            entry["numbers"] = fn(*args, **kwargs)
            entry["ok"] = True
        except CheckFailed as e:
            entry.update(ok=False, message=str(e))
        except NotApplicable as e:
            entry.update(ok=None, message=f"not applicable: {e}")
        except Exception as e:  # the check itself broke: said as a failure of it, with where
            entry.update(ok=False, message=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:])
        entry["seconds"] = round(time.monotonic() - started, 2)
        self.record["checks"].append(entry)
        self.save()
        said = {True: "ok", None: entry.get("message", "")[:300], False: "FAILED: " + entry.get("message", "")[:300]}
        log(f"{self.name}: {name}: {said[entry['ok']]}")
        return entry.get("numbers")

    def not_applicable(self, name: str, why: str) -> None:
        self.record["checks"].append({"check": name, "ok": None, "message": f"not applicable: {why}"})
        self.save()

    # -- the shell ------------------------------------------------------------------------------

    @property
    def shell(self) -> Any:
        if self._shell is None:
            from IPython import get_ipython
            from IPython.testing.globalipapp import start_ipython

            self._shell = start_ipython() or get_ipython()
            self._shell.run_line_magic("load_ext", "nbprof")
        return self._shell

    def run(self, code: str) -> Any:
        """Run a cell in the shell, as a kernel does; an error in it ends the step."""
        from IPython.utils.capture import capture_output

        with capture_output() as captured:
            result = self.shell.run_cell(code, store_history=True)
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            raise RuntimeError(f"the cell raised {type(error).__name__}: {error}\n--- cell ---\n{code}\n"
                               f"--- its output ---\n{captured.stdout[-2000:]}{captured.stderr[-2000:]}")
        return result

    def ns(self, name: str) -> Any:
        return self.shell.user_ns[name]

    # -- recordings -----------------------------------------------------------------------------

    def keep(self, name: str, p: Any, extra: dict[str, Any], *, nbprof_copy: bool = False) -> dict:
        """Keep a live profile as the H100 set was kept (tests/data/README.md): torch's own
        ``export_chrome_trace``, gzipped, and its ``key_averages()`` as ``<name>.oracle.json``, plus
        what the check knows (``gpu_check``); with ``nbprof_copy``, ``p.save()`` too (its line
        table, its DataLoaders' records). Returns torch's trace as JSON."""
        from tests.gpu_checks import read_trace

        path = self.data / f"{name}.trace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        p.profiler.export_chrome_trace(str(path))
        doc = read_trace(path)
        with open(path, "rb") as f, gzip.open(str(path) + ".gz", "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
        path.unlink()
        oracle = torch_oracle(p.profiler, shapes=bool(p.collected.get("shapes")))
        oracle.update(workload=extra.pop("workload", name), activities="cpu,cuda" if self.cuda else "cpu",
                      gpu_check=dict(extra, device=self.device, cuda_profile=p.meta.cuda_profile,
                                     findings=sorted(set(p.findings["kind"]))))
        if nbprof_copy:
            p.save(self.data / f"{name}.nbprof.json.gz")
            oracle["gpu_check"]["nbprof"] = f"{Path(name).name}.nbprof.json.gz"
        (self.data / f"{name}.oracle.json").write_text(json.dumps(oracle, indent=1, default=str))
        return doc


ORACLE_FIELDS = ["key", "count", "cpu_time_total", "self_cpu_time_total", "device_time_total",
                 "self_device_time_total", "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage",
                 "self_device_memory_usage", "flops", "input_shapes", "device_type", "is_legacy"]


def _oracle_row(a: Any) -> dict[str, Any]:
    row = {}
    for f in ORACLE_FIELDS:
        v = getattr(a, f, None)
        if f == "device_type":
            v = str(v)
        row[f] = v if isinstance(v, (int, float, str, list, type(None))) else str(v)
    return row


def torch_oracle(profiler: Any, *, shapes: bool) -> dict[str, Any]:
    """torch's own answer for a live profile, as ``../shared/gpu/record_traces.py`` wrote it."""
    import torch

    ka = profiler.key_averages()
    out: dict[str, Any] = {"torch": torch.__version__,
                           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                           "self_cpu_time_total": ka.self_cpu_time_total, "rows": [_oracle_row(a) for a in ka]}
    if shapes:
        out["rows_by_input_shape"] = [_oracle_row(a) for a in profiler.key_averages(group_by_input_shape=True)]
    sort = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    out["table"] = ka.table(sort_by=sort, row_limit=15)
    return out


def _torch_trace(p: Any) -> dict:
    """torch's own trace of a live profile, as JSON (written to a temporary file by its exporter)."""
    from tests.gpu_checks import read_trace

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        p.profiler.export_chrome_trace(str(path))
        return read_trace(path)


def scalar_reads(profiler: Any) -> int:
    from tests.gpu_checks import SCALAR_READ

    return sum(a.count for a in profiler.key_averages() if a.key == SCALAR_READ)


# ------------------------------------------------------------------------------ the live steps


def step_env(ctx: StepContext) -> None:
    """The machine: GPU, driver, torch, CUDA, cuDNN, Python, the packages nbprof needs; whether
    ``import nbprof`` stays light (no torch, plotly or pandas, checked in a fresh interpreter)."""
    import platform

    import torch

    import nbprof

    env: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "cuda_runtime": torch.version.cuda, "nbprof": nbprof.__version__,
                           "commit": os.environ.get("GPU_CHECK_COMMIT", ""), "cuda": bool(torch.cuda.is_available())}
    if env["cuda"]:
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=torch.cuda.get_device_name(0), capability=f"sm_{props.major}{props.minor}",
                   gpu_memory_gib=round(props.total_memory / 2**30, 1), devices=torch.cuda.device_count(),
                   cudnn=torch.backends.cudnn.version())
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            env["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 and smi.stdout.strip() else ""
        except (OSError, subprocess.TimeoutExpired):
            env["driver"] = ""
    for module in ("IPython", "ipywidgets", "msgspec", "plotly", "pandas", "numpy", "itables", "anywidget", "pytest"):
        try:
            env[module] = __import__(module).__version__
        except Exception as e:  # said in the results: the wheels to carry
            env[module] = f"missing ({type(e).__name__})"
    ctx.record["environment"] = env
    ctx.save()

    def packages() -> dict[str, Any]:
        missing = [m for m in ("IPython", "ipywidgets", "msgspec", "plotly", "pandas") if str(env[m]).startswith("missing")]
        from tests.gpu_checks import expect

        expect(not missing, f"missing: {', '.join(missing)} (carry their wheels: scripts/gpu-wheels.sh)")
        return {m: env[m] for m in ("IPython", "ipywidgets", "msgspec", "plotly", "pandas")}

    def import_light() -> dict[str, Any]:
        from tests.gpu_checks import expect

        code = ("import sys, nbprof; from IPython.core.interactiveshell import InteractiveShell; "
                "s = InteractiveShell.instance(); s.run_line_magic('load_ext', 'nbprof'); "
                "print(sorted(m for m in ('torch', 'plotly', 'pandas') if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        expect(out.returncode == 0, f"%load_ext nbprof failed: {out.stderr[-500:]}")
        expect(out.stdout.strip().endswith("[]"), f"%load_ext nbprof imported {out.stdout.strip()}")
        return {"imported": []}

    ctx.check("packages", packages)
    ctx.check("load_ext_imports_no_torch", import_light)


def _device_setup(ctx: StepContext) -> str:
    return (f"import time, torch, nbprof\nimport torch.nn.functional as F\ndev = {ctx.device!r}\ntorch.manual_seed(0)\n"
            "sync = torch.cuda.synchronize if dev == 'cuda' else (lambda: None)\n")


ITEM_LINE = "    loss_value = loss.item()"
TRAIN_CELL = ("%%torchprof --cuda --lines --shapes -q -o p\n"
              "for step in range(STEPS):\n"
              "    opt.zero_grad()\n"
              "    loss = F.cross_entropy(model(x), y)\n"
              "    loss.backward()\n"
              "    opt.step()\n"
              f"{ITEM_LINE}\n")


def _lines_step(ctx: StepContext, name: str, model_code: str, steps: int, workload: str) -> None:
    """A training loop under ``--cuda --lines``: torch's key_averages; the per-line device time
    summing to the device records'; each ``.item()`` on its line; ``sync_line`` naming it (on a
    GPU); no ``clock_skew`` on a process's first CUDA profile; the report rendering."""
    from tests import gpu_checks as G

    ctx.run(_device_setup(ctx) + model_code)
    ctx.run("for _ in range(2):\n    opt.zero_grad(); F.cross_entropy(model(x), y).backward(); opt.step()\nsync()")
    started = time.monotonic()
    ctx.run(TRAIN_CELL.replace("STEPS", str(steps)))
    ctx.note(f"profiled {steps} steps in {time.monotonic() - started:.1f} s")
    p = ctx.ns("p")
    reads = scalar_reads(p.profiler)
    doc = ctx.keep(name, p, {"workload": workload, "item_source": ITEM_LINE, "item_calls": steps, "item_reads": reads,
                             "steps": steps,
                             "lines": True, "sync_line": ctx.cuda}, nbprof_copy=True)
    oracle = json.loads((ctx.data / f"{name}.oracle.json").read_text())
    ctx.check("key_averages_equal_torchs", G.check_key_averages, p, oracle)
    ctx.check("item_on_its_line", G.check_item_line, p, ITEM_LINE, steps, reads)
    if ctx.cuda:
        ctx.check("lines_device_time_sums_to_the_kernels", G.check_lines_device_sum, p, doc)
        ctx.check("sync_line_names_the_item_line", G.check_sync_line, p, ITEM_LINE)
        ctx.check("first_cuda_profile_is_numbered_1",
                  lambda: G.holds(p.meta.cuda_profile == 1, f"cuda_profile {p.meta.cuda_profile}",
                                  {"cuda_profile": p.meta.cuda_profile}))
    else:
        ctx.not_applicable("lines_device_time_sums_to_the_kernels", "no CUDA")
        ctx.check("no_sync_line_on_the_cpu", lambda: G.holds(not G.fired(p, "sync_line"), "sync_line fired on the CPU"))
    ctx.check("no_clock_skew_on_a_first_profile", lambda: G.holds(not G.fired(p), "clock_skew fired: "
              + "; ".join(p.findings.loc[p.findings["kind"] == "clock_skew", "message"])))

    def render() -> dict[str, Any]:
        t = time.monotonic()
        html = p.report().html(include_library=False)
        text = p.report().text()
        G.expect("Source" in html and len(text) > 0, "the report has no Source tab")
        return {"html_chars": len(html), "seconds": round(time.monotonic() - t, 2)}

    ctx.check("report_renders", render)


def step_lines_cnn(ctx: StepContext) -> None:
    big = ctx.cuda  # a GPU gets work that keeps it busy longer than launching it takes (sync_line's waits)
    size = "x = torch.randn(256, 3, 64, 64, device=dev); y = torch.randint(0, 10, (256,), device=dev)" if big else \
        "x = torch.randn(4, 3, 16, 16, device=dev); y = torch.randint(0, 10, (4,), device=dev)"
    width = 128 if big else 8  # on a GPU ~2 TFLOP a step: ~10 ms, where launching it takes ~3 ms
    model = (f"model = torch.nn.Sequential(torch.nn.Conv2d(3, {width}, 3, padding=1), torch.nn.ReLU(),\n"
             f"    torch.nn.Conv2d({width}, {width}, 3, padding=1), torch.nn.BatchNorm2d({width}), torch.nn.ReLU(),\n"
             f"    torch.nn.Conv2d({width}, {width}, 3, padding=1), torch.nn.ReLU(),\n"
             f"    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear({width}, 10)).to(dev)\n"
             f"opt = torch.optim.SGD(model.parameters(), lr=0.01)\n{size}\n")
    _lines_step(ctx, "cnn_lines", model, 5, f"CNN 3 conv blocks ({width} channels), 5 SGD steps, .item() each step")


def step_lines_transformer(ctx: StepContext) -> None:
    d, layers, batch, seq = (512, 4, 64, 256) if ctx.cuda else (32, 2, 2, 16)  # GPU: ~1.3 TFLOP a step
    model = (f"enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer({d}, 8, {4 * d}, batch_first=True), "
             f"{layers})\n"
             f"model = torch.nn.Sequential(enc, torch.nn.Flatten(), torch.nn.Linear({seq * d}, 10)).to(dev)\n"
             "opt = torch.optim.Adam(model.parameters(), lr=1e-4)\n"
             f"x = torch.randn({batch}, {seq}, {d}, device=dev); y = torch.randint(0, 10, ({batch},), device=dev)\n")
    _lines_step(ctx, "transformer_lines", model, 4,
                f"TransformerEncoder {layers} layers d={d}, batch {batch} x {seq}, 4 Adam steps, .item() each step")


REPEAT_CELL = ("%%torchprof --cuda -q -o r{k}\n"
               "for i in range(8):\n"
               "    h = torch.relu(a @ b)\n"
               "    c = F.conv2d(img, kern, padding=1)\n"
               "    s = (h.sum() + c.sum())\n"
               "    sync()\n"
               "    time.sleep(0.002)\n")
REPEATS = 5


def step_repeat(ctx: StepContext) -> None:
    """Five ``%%torchprof --cuda`` cells of the same code in one process: nbprof numbers them;
    each later profile's kernel times against the first's; torch's repeat-profile bug (shows or
    not, from each trace's JSON) against the ``clock_skew`` finding, per profile: the verdict."""
    from tests import gpu_checks as G

    n = 1024 if ctx.cuda else 64
    ctx.run(_device_setup(ctx) + f"a = torch.randn({n}, {n}, device=dev); b = torch.randn({n}, {n}, device=dev)\n"
            f"img = torch.randn(8, 16, {n // 16}, {n // 16}, device=dev); kern = torch.randn(16, 16, 3, 3, device=dev)\n"
            "t = time.time()\nwhile time.time() - t < 0.5:  # the GPU's clocks up before the first profile\n"
            "    torch.relu(a @ b); F.conv2d(img, kern, padding=1); sync()\n")
    docs, fired, numbers = [], [], []
    for k in range(1, REPEATS + 1):
        ctx.run(REPEAT_CELL.format(k=k))
        p = ctx.ns(f"r{k}")
        docs.append(ctx.keep(f"repeat/cell{k}", p, {"workload": f"the same cell, run {k} of {REPEATS} in one process",
                                                     "repeat": k, "clock_skew_fired": G.fired(p)}))
        fired.append(G.fired(p))
        numbers.append(p.meta.cuda_profile)
        ctx.note(f"cell {k}: cuda_profile {p.meta.cuda_profile}, clock_skew {'fired' if fired[-1] else 'quiet'}, "
                 f"{G.device_kinds_count(p)} device records")
    verdict = ctx.check("clock_skew_fires_exactly_when_the_bug_shows", G.check_repeat, docs, fired,
                        numbers if ctx.cuda else None)
    if verdict is None:  # failed: the verdict is still wanted, made without the agreement asked of it
        facts = [G.clock_facts(d) for d in docs]
        verdict = {"profiles": [{"profile": i + 1, "bug_shows": bool(G.bug_reasons(f, facts[0] if i else None)),
                                 "reasons": G.bug_reasons(f, facts[0] if i else None), "clock_skew_fired": fired[i],
                                 "cuda_profile": numbers[i], "min_delay_us": f["min_delay_us"]}
                                for i, f in enumerate(facts)]}
    ctx.record["repeat"] = verdict
    ctx.save()
    if ctx.cuda:
        ctx.check("kernel_times_against_the_first_profile", G.check_kernel_times, docs)
    else:
        ctx.not_applicable("kernel_times_against_the_first_profile", "no CUDA")


def step_memory(ctx: StepContext) -> None:
    """``--memory``: the CUDA curve (a point per memory record of torch's trace) and its peak, the
    trace's largest Total Allocated and ``torch.cuda.max_memory_allocated()``."""
    from tests import gpu_checks as G

    ctx.run(_device_setup(ctx) + "model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),"
            " torch.nn.Linear(4096, 10)).to(dev)\nopt = torch.optim.Adam(model.parameters())\n"
            "x = torch.randn(256, 1024, device=dev); y = torch.randint(0, 10, (256,), device=dev)\n"
            "F.cross_entropy(model(x), y).backward(); opt.step(); opt.zero_grad(); sync()\n"
            "if dev == 'cuda':\n    torch.cuda.reset_peak_memory_stats()\n")
    ctx.run("%%torchprof --cuda --memory -q -o m\nfor _ in range(3):\n"
            "    F.cross_entropy(model(x), y).backward(); opt.step(); opt.zero_grad()\n"
            "big = torch.empty(64 << 20, device=dev)\ndel big\nsync()\n")
    p = ctx.ns("m")
    oracle = torch_oracle(p.profiler, shapes=False)
    ctx.check("key_averages_equal_torchs", G.check_key_averages, p, oracle)
    if ctx.cuda:
        import torch

        peak = int(torch.cuda.max_memory_allocated())
        doc = ctx.keep("memory", p, {"workload": "MLP, 3 Adam steps and a 256 MiB tensor freed, --memory",
                                     "memory": True, "max_memory_allocated": peak})
        ctx.check("cuda_peak_is_max_memory_allocated", G.check_memory_peak, p, doc, peak)
    else:
        doc = ctx.keep("memory", p, {"workload": "MLP, 3 Adam steps and a 256 MiB tensor freed, --memory"})
        ctx.not_applicable("cuda_peak_is_max_memory_allocated", "no CUDA")

        def cpu_peak() -> dict[str, Any]:
            peak = p.summary.peak_allocated_bytes.get("cpu")
            G.expect(peak is not None and peak >= 256 << 20, f"the CPU peak {peak} B, under the 256 MiB tensor")
            return {"peak_bytes": peak}

        ctx.check("cpu_peak_holds_the_big_tensor", cpu_peak)


WORK = "def work():\n    for _ in range(4):\n        torch.relu(a @ a)\n    sync()\n"


def step_toggle(ctx: StepContext) -> None:
    """CUDA collection off and on: the controls panel's toggle, then the flags (which win over the
    panel), then ``nbprof.cuda_collection`` inside a cell."""
    from tests import gpu_checks as G

    n = 1024 if ctx.cuda else 64
    ctx.run(_device_setup(ctx) + f"a = torch.randn({n}, {n}, device=dev)\n" + WORK + "work()\n"
            "panel = nbprof.controls()\n")
    panel = ctx.ns("panel")
    profiles = {}
    for label, value, flag in (("panel_off", False, ""), ("panel_on", True, ""),
                               ("flag_off", True, "--no-cuda"), ("flag_on", False, "--cuda")):
        panel.toggles["cuda"].value = value  # as a click does: the panel's observer sets the defaults
        ctx.run(f"%%torchprof {flag} -q -o {label}\nwork()\n")
        profiles[label] = ctx.ns(label)
    panel.toggles["cuda"].value = True
    state = panel.state()
    if ctx.cuda:
        ctx.check("panel_toggle_off_then_on", G.check_toggle, profiles["panel_off"], profiles["panel_on"],
                  _torch_trace(profiles["panel_off"]), _torch_trace(profiles["panel_on"]))
        ctx.check("flags_win_over_the_panel", G.check_toggle, profiles["flag_off"], profiles["flag_on"],
                  _torch_trace(profiles["flag_off"]), _torch_trace(profiles["flag_on"]))
    else:
        def all_off() -> dict[str, Any]:
            G.expect(not state["cuda"] and panel.toggles["cuda"].disabled, f"the panel offers CUDA: {state}")
            for label, p in profiles.items():
                G.expect(G.device_kinds_count(p) == 0 and not p.collected["cuda"], f"{label}: device records")
            G.expect(any("CUDA is not available" in n for n in profiles["flag_on"].meta.notes),
                     f"--cuda without CUDA: notes {profiles['flag_on'].meta.notes}")
            return {"profiles": len(profiles)}

        ctx.check("without_cuda_every_toggle_records_the_cpu", all_off)
    ctx.run("%%torchprof --cuda -q -o inner\n"
            "with torch.profiler.record_function('on_1'):\n    work()\n"
            "nbprof.cuda_collection(False)\n"
            "with torch.profiler.record_function('off'):\n    work()\n"
            "nbprof.cuda_collection(True)\n"
            "with torch.profiler.record_function('on_2'):\n    work()\n")
    p = ctx.ns("inner")
    if ctx.cuda:
        from nbprof.collect.torch_live import cuda_profiles_read

        doc = _torch_trace(p)
        windows = G.annotation_windows(doc, ["on_1", "off", "on_2"])
        ctx.keep("toggle/in_cell", p, {"workload": "work() three times, CUDA paused for the second",
                                        "cuda_profiles_before": cuda_profiles_read() - 1, "windows": windows,
                                        "paused": "off"})
        ctx.check("cuda_collection_pauses_inside_a_cell", G.check_in_cell_toggle, p, doc, windows)
    else:
        ctx.not_applicable("cuda_collection_pauses_inside_a_cell", "no CUDA")


MiB = 1 << 20
SNAPSHOT_CELL = ("%%torchprof --snapshot -q -o snap_p\n"
                 "keep = []\n"
                 "for _ in range(4):\n"
                 "    keep.append(torch.empty(1024, 1024, device=dev))\n"
                 "tmp = torch.empty(8 << 20, dtype=torch.uint8, device=dev)\n"
                 "del tmp\n"
                 "sync()\n")


def step_snapshot(ctx: StepContext) -> None:
    """``--snapshot``: the allocator's history of a cell whose allocations are counted by hand (four
    4 MiB tensors kept, an 8 MiB one freed), saved as torch's pickle, loaded with
    ``nbprof.load_snapshot`` and compared with torch's ``_memory_viz``."""
    from tests import gpu_checks as G

    ctx.run(_device_setup(ctx))
    ctx.run(SNAPSHOT_CELL)
    p = ctx.ns("snap_p")
    if not ctx.cuda:
        ctx.check("without_cuda_a_note", lambda: G.holds(any("--snapshot" in n for n in p.meta.notes),
                                                         f"notes {p.meta.notes}", {"notes": p.meta.notes}))
        ctx.not_applicable("snapshot_against_memory_viz", "no CUDA")
        return
    import re

    import torch

    snap = p.snapshot()
    name = re.sub(r"[^a-z0-9]+", "_", torch.cuda.get_device_name().lower()).strip("_")
    path = ctx.data / f"snapshot_{name}.pickle"
    path.parent.mkdir(parents=True, exist_ok=True)
    snap.save(path)

    def by_hand() -> dict[str, Any]:
        m = snap.active_memory()
        dev = f"cuda:{torch.cuda.current_device()}"
        start = snap._replay.initial[torch.cuda.current_device()]
        mine = m[m["device"] == dev]
        most, last = int(mine["active_bytes"].max()) - start, int(mine["active_bytes"].iloc[-1]) - start
        G.expect(most == 24 * MiB and last == 16 * MiB, f"active above the start: most {most} B, at the end {last} B; "
                 "the cell's four 4 MiB tensors and an 8 MiB one freed make 24 MiB and 16 MiB")
        return {"most_bytes": most, "end_bytes": last}

    ctx.check("the_cells_allocations_counted_by_hand", by_hand)
    ctx.check("snapshot_against_memory_viz", G.check_snapshot, path)
    def history_off() -> dict[str, Any]:
        enabled = getattr(torch._C, "_cuda_isHistoryEnabled", None)  # as nbprof asks: not in every build
        if enabled is None:
            raise G.NotApplicable(f"torch {torch.__version__} cannot say whether the history is on")
        G.expect(not enabled(), "the allocator's history is still on after the cell")
        return {}

    ctx.check("history_off_after_the_cell", history_off)


def step_dataloader(ctx: StepContext) -> None:
    """A DataLoader with two workers and ``pin_memory`` under ``--cuda``: ``p.data_loading()``
    (issue 41) has each batch from its worker, and torch's trace a copy from pinned memory per batch."""
    from tests import gpu_checks as G

    batches, workers = 8, 2
    ctx.run(_device_setup(ctx) + "from torch.utils.data import DataLoader, TensorDataset\n"
            f"data = TensorDataset(torch.randn({batches * 16}, 3, 32, 32), torch.randint(0, 10, ({batches * 16},)))\n"
            f"loader = DataLoader(data, batch_size=16, num_workers={workers}, pin_memory=(dev == 'cuda'))\n"
            "model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),"
            " torch.nn.Linear(8 * 30 * 30, 10)).to(dev)\n")
    ctx.run("%%torchprof --cuda -q -o dl\nfor xb, yb in loader:\n"
            "    xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)\n"
            "    F.cross_entropy(model(xb), yb).backward()\nsync()\n")
    p = ctx.ns("dl")
    doc = ctx.keep("dataloader_pinned", p, {"workload": f"DataLoader, {workers} workers, pin_memory, {batches} batches",
                                            "batches": batches, "workers": workers, "pinned": ctx.cuda},
                   nbprof_copy=True)
    ctx.check("data_loading_with_pinned_memory", G.check_data_loading, p, batches, workers, doc, ctx.cuda)


def _gpu_test_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                  if "pytest.mark.gpu" in p.read_text(encoding="utf-8"))


def _pytest(ctx: StepContext, args: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    from tests.gpu_checks import expect

    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", *args]
    ctx.note("running " + " ".join(cmd[1:]))
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    tail = (out.stdout + out.stderr).strip().splitlines()
    ctx.record["pytest_output"] = "\n".join(tail[-60:])
    ctx.save()
    for line in tail[-60:]:
        print("    " + line, flush=True)
    summary = tail[-1] if tail else ""
    expect(out.returncode == 0, f"pytest exit {out.returncode}: {summary}")
    return {"summary": summary}


def step_pytest_gpu(ctx: StepContext) -> None:
    """``python -m pytest -m gpu`` on the test files with GPU tests; torch's snapshot of
    tests/test_gpu_snapshot.py's cell kept (NBPROF_KEEP_GPU_DATA=1) in tests/data/snapshots."""
    env = dict(os.environ, NBPROF_KEEP_GPU_DATA="1", PYTHONDONTWRITEBYTECODE="1")
    budget = float(os.environ.get("GPU_CHECK_STEP_TIMEOUT", "170")) - 10
    ctx.check("pytest_m_gpu", _pytest, ctx, ["-m", "gpu", *_gpu_test_files()], env, budget)


RECORDED_TESTS = ["tests/test_gpu_recorded.py", "tests/test_trace_oracles.py", "tests/test_gpu_snapshot.py"]


def step_recorded_tests(ctx: StepContext) -> None:
    """The tests on recorded GPU data (tests/test_gpu_recorded.py, the trace oracles, the kept
    snapshots) on what this run recorded (NBPROF_GPU_DATA)."""
    env = dict(os.environ, NBPROF_GPU_DATA=str(ctx.data), PYTHONDONTWRITEBYTECODE="1")
    budget = float(os.environ.get("GPU_CHECK_STEP_TIMEOUT", "120")) - 10
    ctx.check("recorded_data_tests", _pytest, ctx, ["-m", "not gpu", *RECORDED_TESTS], env, budget)


# ------------------------------------------------------------------------------- the dry run


def _h100(name: str) -> tuple[Any, dict, dict]:
    import nbprof

    from tests.gpu_checks import read_trace

    path = ROOT / "tests" / "data" / f"{name}.trace.json.gz"
    oracle = json.loads((ROOT / "tests" / "data" / f"{name}.oracle.json").read_text())
    return nbprof.load_trace(path), read_trace(path), oracle


H100 = ("cnn_train_cuda", "transformer_infer_stack", "cnn_cuda_toggled", "two_streams")


def _dry_keep(ctx: StepContext, name: str, source: str, extra: dict[str, Any]) -> None:
    """A recorded H100 trace and its oracle, kept as a GPU run keeps its recordings."""
    shutil.copyfile(ROOT / "tests" / "data" / f"{source}.trace.json.gz", ctx.data / f"{name}.trace.json.gz")
    oracle = json.loads((ROOT / "tests" / "data" / f"{source}.oracle.json").read_text())
    oracle["gpu_check"] = dict(extra, device="cuda", cuda_profile=None)
    (ctx.data / f"{name}.oracle.json").write_text(json.dumps(oracle, indent=1))


def dry_lines(ctx: StepContext) -> None:
    """The line checks: on the H100 transformer (with_stack: its lines are function entries) the
    per-line device sum; on a hand-made CUDA loop with line data, the .item() line and sync_line;
    key_averages against torch's oracle on all four H100 traces."""
    from tests import gpu_checks as G

    ctx.data.mkdir(parents=True, exist_ok=True)
    for name in H100:
        p, doc, oracle = _h100(name)
        ctx.check(f"key_averages_equal_torchs[{name}]", G.check_key_averages, p, oracle)
        _dry_keep(ctx, name, name, {"workload": oracle.get("workload", name)})
    p, doc, _ = _h100("transformer_infer_stack")
    ctx.check("lines_device_time_sums_to_the_kernels[transformer_infer_stack]", G.check_lines_device_sum, p, doc)
    with tempfile.TemporaryDirectory() as tmp:
        p, doc, item, reads = G.synthetic_lines_profile(tmp)
        ctx.check("lines_device_time_sums_to_the_kernels[synthetic_loop]", G.check_lines_device_sum, p, doc)
        ctx.check("item_on_its_line[synthetic_loop]", G.check_item_line, p, item, reads, reads)
        ctx.check("sync_line_names_the_item_line[synthetic_loop]", G.check_sync_line, p, item)
        p.save(ctx.data / "synthetic_loop.nbprof.json.gz")
        (ctx.data / "synthetic_loop.oracle.json").write_text(json.dumps({"workload": "tests/synthetic.py's loop with "
            "line data (hand-made: no torch oracle)", "gpu_check": {"device": "cuda", "item_source": item,
            "item_calls": reads, "item_reads": reads, "lines": True, "sync_line": True, "nbprof": "synthetic_loop.nbprof.json.gz"}}, indent=1))


def dry_memory(ctx: StepContext) -> None:
    from tests import gpu_checks as G

    p, doc, _ = _h100("cnn_train_cuda")
    ctx.check("cuda_peak_is_the_traces[cnn_train_cuda]", G.check_memory_peak, p, doc)
    _dry_keep(ctx, "memory", "cnn_train_cuda", {"workload": "the H100 CNN (--memory)", "memory": True})


def dry_repeat(ctx: StepContext) -> None:
    """Five profiles made of the H100 CNN trace: the first two as recorded, the next three with their
    device records moved 2, 4 and 6 ms later (the bug's drift); each loaded by nbprof, its finding
    against the bug as the JSON shows it."""
    import nbprof

    from tests import gpu_checks as G

    _, first, _ = _h100("cnn_train_cuda")
    docs = [first, first] + [G.shifted_trace(first, ms * 1000.0) for ms in (2, 4, 6)]
    fired = []
    (ctx.data / "repeat").mkdir(parents=True, exist_ok=True)
    oracle = json.loads((ROOT / "tests" / "data" / "cnn_train_cuda.oracle.json").read_text())
    for k, doc in enumerate(docs, start=1):
        path = ctx.data / "repeat" / f"cell{k}.trace.json.gz"
        with gzip.open(path, "wt") as f:
            json.dump(doc, f)
        fired.append(G.fired(nbprof.load_trace(path)))
        (ctx.data / "repeat" / f"cell{k}.oracle.json").write_text(json.dumps(dict(oracle, gpu_check={
            "device": "cuda", "repeat": k, "clock_skew_fired": fired[-1], "cuda_profile": None}), indent=1))
    ctx.record["repeat"] = ctx.check("clock_skew_fires_exactly_when_the_bug_shows", G.check_repeat, docs, fired)
    ctx.save()
    ctx.check("kernel_times_against_the_first_profile", G.check_kernel_times, docs)


def dry_toggle(ctx: StepContext) -> None:
    """Off: a CPU-only trace (a rank of tests/data/cluster_views); on: the H100 CNN; in a cell: the
    H100 trace with CUDA collection paused for the second of three passes (its windows: the passes'
    convolutions, four each)."""
    import nbprof

    from tests import gpu_checks as G

    off_path = sorted((ROOT / "tests" / "data" / "cluster_views" / "ranks").glob("*.json.gz"))[0]
    on, on_doc, _ = _h100("cnn_train_cuda")
    ctx.check("panel_toggle_off_then_on", G.check_toggle, nbprof.load_trace(off_path), on,
              G.read_trace(off_path), on_doc)
    p, doc, _ = _h100("cnn_cuda_toggled")
    convs = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in doc["traceEvents"]
                   if e.get("ph") == "X" and e.get("name") == "aten::cudnn_convolution")
    windows = {f"pass_{i + 1}": (convs[4 * i][0], max(end for _, end in convs[4 * i:4 * i + 4])) for i in range(3)}
    ctx.check("cuda_collection_pauses_inside_a_cell", G.check_in_cell_toggle, p, doc, windows, off="pass_2")
    (ctx.data / "toggle").mkdir(parents=True, exist_ok=True)
    _dry_keep(ctx, "toggle/in_cell", "cnn_cuda_toggled", {"workload": "the H100 CNN, CUDA paused for its 2nd pass",
                                                          "cuda_profiles_before": None, "windows": windows,
                                                          "paused": "pass_2"})


def dry_snapshot(ctx: StepContext) -> None:
    """Snapshots in torch's format (no real one is recorded yet): tests/snapshots.py's hand-made one,
    the same with a free pending on another stream, and a simulated allocator's on two devices with
    the history's oldest entries dropped."""
    from tests import gpu_checks as G
    from tests.snapshots import hand_snapshot, simulated, write

    path = ctx.data / "snapshot_hand_made.pickle"
    write(hand_snapshot(), path)
    ctx.check("snapshot_against_memory_viz[hand_made]", G.check_snapshot, path)
    with tempfile.TemporaryDirectory() as tmp:
        ctx.check("snapshot_against_memory_viz[pending_free]", G.check_snapshot,
                  write(G.pending_free_snapshot(), Path(tmp) / "pending.pickle"))
        ctx.check("snapshot_against_memory_viz[simulated]", G.check_snapshot,
                  write(simulated(3000, devices=2, dropped=200), Path(tmp) / "simulated.pickle"))


def dry_dataloader(ctx: StepContext) -> None:
    """A CUDA loop copying each batch from pinned memory (hand-made: no recorded CUDA trace has a
    DataLoader) with a DataLoader's records written for it, two workers, eight batches; kept, saved
    with its records, as a GPU run keeps its DataLoader recording."""
    from tests import gpu_checks as G

    p, doc = G.synthetic_data_loading_profile(ctx.data)
    ctx.check("data_loading_with_pinned_memory[synthetic]", G.check_data_loading, p, 8, 2, doc, True)
    p.save(ctx.data / "synthetic_loader.nbprof.json.gz")
    (ctx.data / "synthetic_loader.trace.json").unlink()
    (ctx.data / "synthetic_loader.oracle.json").write_text(json.dumps({
        "workload": "tests/synthetic.py's loop with a DataLoader's records written by hand (no torch oracle)",
        "gpu_check": {"device": "cuda", "batches": 8, "workers": 2, "pinned": True,
                      "nbprof": "synthetic_loader.nbprof.json.gz"}}, indent=1))


def selftest_hang(ctx: StepContext) -> None:
    """A step that never ends, having started a process of its own (as a DataLoader starts its
    workers): how tests/test_gpu_check.py sees a hang killed at its timeout, with that process.
    In no list of steps."""
    child = subprocess.Popen(["sleep", "600"])
    Path(os.environ["GPU_CHECK_SELFTEST_PID"]).write_text(str(child.pid))
    ctx.check("before_the_hang", lambda: {"child": child.pid})
    time.sleep(600)


@dataclass
class Step:
    name: str
    run: Callable[[StepContext], None]
    timeout_s: float
    dry: bool = False  # a step of the dry run


LIVE = [Step("env", step_env, 90), Step("lines_cnn", step_lines_cnn, 120), Step("repeat", step_repeat, 120),
        Step("memory", step_memory, 90), Step("toggle", step_toggle, 120), Step("snapshot", step_snapshot, 90),
        Step("lines_transformer", step_lines_transformer, 150), Step("dataloader", step_dataloader, 120),
        Step("pytest_gpu", step_pytest_gpu, 170), Step("recorded_tests", step_recorded_tests, 120)]
DRY = [Step("dry_lines", dry_lines, 120, True), Step("dry_memory", dry_memory, 60, True),
       Step("dry_repeat", dry_repeat, 120, True), Step("dry_toggle", dry_toggle, 60, True),
       Step("dry_snapshot", dry_snapshot, 60, True), Step("dry_dataloader", dry_dataloader, 60, True),
       Step("recorded_tests", step_recorded_tests, 240, True)]
STEPS = {s.name: s for s in LIVE + DRY + [Step("selftest_hang", selftest_hang, 600)]}


def run_step(name: str, device: str, data: Path, record: Path) -> int:
    ctx = StepContext(name, device, data, record)
    try:
        STEPS[name].run(ctx)
    except Exception as e:
        ctx.record["error"] = f"{type(e).__name__}: {e}"[:3000]
        ctx.record["traceback"] = traceback.format_exc()[-3000:]
        ctx.save()
        log(f"{name}: ERROR {ctx.record['error'][:1000]}")
        return 1
    return 0


# ================================================================== the run: steps, results, files


def _step_status(rec: dict[str, Any]) -> str:
    if rec.get("status") in ("timeout", "crashed", "not run"):
        return rec["status"]
    if rec.get("error"):
        return "error"
    if rec.get("skipped"):
        return "skipped"
    checks = rec.get("checks", [])
    if any(c.get("ok") is False for c in checks):
        return "failed"
    return "passed"


class Results:
    """results.json and RESULTS.md, written after every step into the recordings' folder and $OUT;
    a run of some steps (``--only``, a rerun of what failed) writes results.only.json and
    RESULTS.only.md, so that its recordings unpacked over a full run's leave that run's results."""

    def __init__(self, mode: str, data: Path, out: Path | None, some_steps: bool = False) -> None:
        self.data, self.out = data, out
        self.names = ("results.only.json", "RESULTS.only.md") if some_steps else ("results.json", "RESULTS.md")
        self.doc: dict[str, Any] = {"check": "nbprof GPU check (scripts/gpu-check.sh)", "mode": mode,
                                    "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                                    "environment": {}, "steps": []}

    def add(self, rec: dict[str, Any]) -> None:
        rec["status"] = _step_status(rec)
        if rec["step"] == "env":
            self.doc["environment"] = rec.get("environment", {})
        self.doc["steps"].append(rec)
        self.write()

    def write(self, finished: bool = False) -> None:
        if finished:
            self.doc["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            self.doc["seconds"] = round(time.monotonic() - T0, 1)
        text = json.dumps(self.doc, indent=1, default=str)
        md = self.markdown()
        for folder in filter(None, (self.data, self.out)):
            folder.mkdir(parents=True, exist_ok=True)
            for name, body in zip(self.names, (text, md)):
                tmp = folder / (name + ".tmp")
                tmp.write_text(body)
                tmp.replace(folder / name)
        if self.out is not None:
            pack(self.data, self.out / "gpu-data.tar.gz")

    def markdown(self) -> str:
        env, d = self.doc["environment"], self.doc
        lines = [f"# nbprof GPU check, {d['started'][:10]}", ""]
        if d["mode"] == "cuda":
            lines.append(f"GPU: {env.get('gpu', '?')} ({env.get('capability', '?')}, {env.get('gpu_memory_gib', '?')} GiB), "
                         f"driver {env.get('driver', '?')}")
        else:
            lines.append({"cpu": "No CUDA here: the steps ran on the CPU; the CUDA checks did not run.",
                          "dry-run": "Dry run: the CUDA checks on the recorded H100 traces (tests/data), no GPU."}[d["mode"]])
        lines += [f"torch {env.get('torch', '?')}, CUDA {env.get('cuda_runtime', '?')}, cuDNN {env.get('cudnn', '-')}, "
                  f"Python {env.get('python', '?')}, nbprof {env.get('nbprof', '?')} {env.get('commit', '')}".rstrip(),
                  f"Started {d['started']}" + (f", finished {d['finished']} ({d['seconds']} s)" if "finished" in d else
                                              " (running, or cut short)"),
                  "", "| step | status | s | checks passed | not applicable | failed |", "|---|---|---|---|---|---|"]
        for s in d["steps"]:
            checks = s.get("checks", [])
            ok = sum(1 for c in checks if c.get("ok") is True)
            na = [c["check"] for c in checks if c.get("ok") is None]
            bad = [c["check"] for c in checks if c.get("ok") is False]
            lines.append(f"| {s['step']} | {s['status']} | {s.get('seconds', '')} | {ok} | {', '.join(na)} | "
                         f"{', '.join(bad)} |")
        problems = []
        for s in d["steps"]:
            for c in s.get("checks", []):
                if c.get("ok") is False:
                    problems.append(f"- {s['step']} / {c['check']}: {c.get('message', '')[:600]}")
            for key in ("error", "skipped"):
                if s.get(key):
                    problems.append(f"- {s['step']} ({key}): {str(s[key])[:600]}")
        if problems:
            lines += ["", "## Not passed, or skipped", "", *problems]
        for s in d["steps"]:
            if s.get("repeat"):
                lines += ["", f"## Repeat profiles ({s['step']})", "",
                          s["repeat"].get("verdict", "(no verdict: the check broke)"), "",
                          "| profile | cuda_profile | least launch delay µs | bug shows | clock_skew |", "|---|---|---|---|---|"]
                for r in s["repeat"].get("profiles", []):
                    delay = r.get("min_delay_us")
                    lines.append(f"| {r['profile']} | {r.get('cuda_profile')} | "
                                 f"{'' if delay is None else f'{delay:.2f}'} | "
                                 f"{'yes: ' + '; '.join(r['reasons']) if r['bug_shows'] else 'no'} | "
                                 f"{'fired' if r['clock_skew_fired'] else 'quiet'} |")
        return "\n".join(lines) + "\n"


def pack(data: Path, dest: Path) -> None:
    """tests/data/gpu (and tests/data/snapshots, where test_gpu_snapshot.py keeps torch's dump) as
    one archive: $OUT takes 8 files, and `tar xzf gpu-data.tar.gz -C tests/data` puts them back."""
    tmp = dest.with_suffix(".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(data, arcname="gpu")
        snapshots = ROOT / "tests" / "data" / "snapshots"
        if snapshots.is_dir():
            tar.add(snapshots, arcname="snapshots")
    tmp.replace(dest)


def _run_child(step: Step, device: str, data: Path, work: Path, timeout: float) -> dict[str, Any]:
    record = work / f"{step.name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--step", step.name, "--device", device,
           "--data", str(data), "--record", str(record)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", GPU_CHECK_STEP_TIMEOUT=str(int(timeout)))
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
    status = None
    try:
        rc = proc.wait(timeout=timeout)
        if rc != 0 and rc != 1:
            status = "crashed"
    except subprocess.TimeoutExpired:
        status = "timeout"
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the step's process group: its DataLoader workers too
        except ProcessLookupError:
            pass
        proc.wait()
    try:
        rec = json.loads(record.read_text())
    except (OSError, ValueError):
        rec = {"step": step.name, "checks": []}
    rec["seconds"] = round(time.monotonic() - started, 1)
    if status:
        rec["status"] = status
        rec["error"] = rec.get("error") or (f"killed at its timeout of {timeout:.0f} s" if status == "timeout"
                                            else f"the step's process ended with exit status {proc.returncode}")
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="the CUDA checks on the recorded H100 traces, no GPU")
    ap.add_argument("--out", help="results and the packed recordings (default: $OUT when set)")
    ap.add_argument("--data", help="where recordings go (default: tests/data/gpu on a GPU, else a temporary folder)")
    ap.add_argument("--budget-s", type=float, default=BUDGET_S, help="the steps' time in all (s)")
    ap.add_argument("--only", help="these steps (comma-separated), after env")
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--device", help=argparse.SUPPRESS)
    ap.add_argument("--record", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.step:
        return run_step(args.step, args.device, Path(args.data), Path(args.record))

    only = set(args.only.split(",")) if args.only else None
    names = [s.name for s in (DRY if args.dry_run else LIVE[1:])]
    unknown = sorted(only - set(names)) if only is not None else []
    if unknown:  # a misspelt rerun would run nothing and say all passed
        print(f"gpu-check: no step {', '.join(unknown)} in this mode; its steps: {', '.join(names)}", flush=True)
        return 2
    out = Path(args.out) if args.out else (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    work = Path(tempfile.mkdtemp(prefix="nbprof-gpu-check-"))
    try:
        return _run(args, out, only, work)
    finally:
        # the steps' records, and the recordings where no --data was given (packed into out's archive):
        # kept only where the results are, when neither --out nor $OUT said where they go
        if not (out is None and (work / "results").exists()):
            shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, out: Path | None, only: set[str] | None, work: Path) -> int:
    deadline = T0 + args.budget_s

    if args.dry_run:
        mode, device = "dry-run", "cuda"
        data = Path(args.data) if args.data else work / "gpu"
        steps = DRY
    else:
        data = Path(args.data) if args.data else work / "gpu"  # until env says CUDA
        env = _run_child(STEPS["env"], "cpu", data, work, STEPS["env"].timeout_s)
        cuda = bool(env.get("environment", {}).get("cuda"))
        mode, device = ("cuda", "cuda") if cuda else ("cpu", "cpu")
        if cuda and not args.data:
            data = ROOT / "tests" / "data" / "gpu"
        steps = LIVE[1:]
    if out is None and mode != "cuda":
        out = work / "results"
    data.mkdir(parents=True, exist_ok=True)
    results = Results(mode, data, out, some_steps=only is not None)
    packed = out is not None and data.is_relative_to(work)  # removed at the end: the archive keeps them
    log(f"gpu-check: {mode}; recordings in {out / 'gpu-data.tar.gz' if packed and out else data}; "
        f"results in {out or data}")
    if args.dry_run:
        results.doc["environment"] = _light_environment()
    else:
        results.add(env)
        _say(env)
        if env["status"] != "passed":  # without its packages (or torch) no step could run: said, not guessed at
            results.write(finished=True)
            problem = env.get("error") or "; ".join(c.get("message", "") for c in env.get("checks", []) if not c.get("ok"))
            print(f"gpu-check: the environment is not ready, nothing else was run: {problem}", flush=True)
            return 1
    for step in steps:
        if only is not None and step.name not in only:
            continue
        left = deadline - time.monotonic()
        if left < MIN_STEP_S:
            results.add({"step": step.name, "status": "not run", "error": f"out of time ({left:.0f} s left)"})
            log(f"{step.name}: not run, out of time")
            continue
        log(f"{step.name}: start (timeout {min(step.timeout_s, left):.0f} s)")
        rec = _run_child(step, device, data, work, min(step.timeout_s, left))
        results.add(rec)
        _say(rec)
    results.write(finished=True)
    statuses = [s["status"] for s in results.doc["steps"]]
    failed = [s["step"] for s in results.doc["steps"] if s["status"] not in ("passed", "skipped")]
    log(f"gpu-check: {statuses.count('passed')} of {len(statuses)} steps passed"
        + (f"; not passed: {', '.join(failed)}" if failed else "") + f"; results: {(out or data) / results.names[1]}")
    if mode == "cpu":
        print("gpu-check: no CUDA here (torch sees no CUDA device): the CPU parts ran"
              + (" and passed" if not failed else f", {len(failed)} failed") + "; the CUDA checks need a GPU", flush=True)
    return 1 if failed else 0


def _light_environment() -> dict[str, Any]:
    """The dry run's versions, read without importing torch."""
    import importlib.metadata
    import platform

    import nbprof

    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "not installed"
    return {"python": platform.python_version(), "torch": torch_version, "nbprof": nbprof.__version__,
            "commit": os.environ.get("GPU_CHECK_COMMIT", ""), "cuda_runtime": "-"}


def _say(rec: dict[str, Any]) -> None:
    checks = rec.get("checks", [])
    ok = sum(1 for c in checks if c.get("ok") is True)
    na = sum(1 for c in checks if c.get("ok") is None)
    log(f"{rec['step']}: {_step_status(rec)} ({ok} checks passed, {na} not applicable, "
        f"{len(checks) - ok - na} failed; {rec.get('seconds', '?')} s)")


if __name__ == "__main__":
    sys.exit(main())
