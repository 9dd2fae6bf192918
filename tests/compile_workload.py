"""One torch.compile workload, run in a fresh process in a real IPython shell under ``%%torchprof``
with ``TORCH_TRACE`` on, and what torch and tlparse say about that very run.

The cell compiles a small MLP (its first call), calls a model whose ``forward`` prints (a graph
break), calls a function with a changing input size (a recompile), then the MLP again (its fused
kernels, steady state). :func:`record` writes into a folder:

- ``trace.json``: torch's own chrome trace of the cell (``p.profiler.export_chrome_trace``);
- ``run.json``: ``compile_log`` (nbprof's collected log), ``code_names``, ``nbprof`` (what nbprof
  reported: graph breaks, recompiles, compilations, kernels), and torch's own answers from the
  same process: ``key_averages`` rows, ``compile_inner_s`` (``compilation_time_metrics``' frame
  compile times recorded during the cell), ``torch_version``;
- ``explain.json``: ``torch._dynamo.explain`` of the printing model (another process: explain
  compiles too, which would add to the trace);
- ``tlparse.json``: tlparse's report of the ``TORCH_TRACE`` (graph breaks and recompile reasons
  from its compile directory, kernels' source lines from its provenance artifacts), when tlparse
  is installed.

``tests/data/compile_cpu/`` holds one such recording (``python -m tests.compile_workload DIR``).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

SETUP = '''import torch, torch.nn as nn
torch.manual_seed(0)
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 32)
    def forward(self, x):
        h = torch.nn.functional.gelu(self.a(x))
        h = h * 2 + 1
        return torch.relu(self.b(h))
class Chatty(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)
    def forward(self, x):
        h = torch.relu(self.a(x))
        print("shape", h.shape)
        return self.b(h).sum()
def scale(x):
    return (x * 2).sin()
mlp = torch.compile(MLP())
chatty = torch.compile(Chatty())
cscale = torch.compile(scale)
x = torch.randn(8, 32)
'''

# the profiled cell (In [2])
CELL = '''y = mlp(x)
out = chatty(torch.randn(4, 16))
for n in range(3, 7):
    cscale(torch.randn(n))
y = mlp(x)'''



def line_of(code: str) -> int:
    """The line of the setup cell (In [1]) that holds ``code``."""
    return next(i for i, line in enumerate(SETUP.splitlines(), 1) if code in line)

_RUN = '''
import json, sys, os
import torch
from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
ip.run_line_magic("load_ext", "nbprof")
setup, cell, out = sys.argv[1], sys.argv[2], sys.argv[3]
r = ip.run_cell(setup, store_history=True)
assert r.error_in_exec is None, r.error_in_exec
import torch._dynamo.utils as du
before = {k: len(v) for k, v in du.compilation_time_metrics.items()}
r = ip.run_cell("%%torchprof -q -o p\\n" + cell, store_history=True)
assert r.error_in_exec is None, r.error_in_exec
p = ip.user_ns["p"]
inner = [k for k in du.compilation_time_metrics if k.endswith("compile_inner")]
compile_inner_s = [t for k in inner for t in du.compilation_time_metrics[k][before.get(k, 0):]]
p.profiler.export_chrome_trace(os.path.join(out, "trace.json"))
rows = [dict(key=a.key, count=a.count, cpu_time_total=a.cpu_time_total, self_cpu_time_total=a.self_cpu_time_total)
        for a in p.profiler.key_averages()]
c = p.compilation()
import torch._inductor.config as cfg
after = {"enable_kernel_profile": cfg.cpp.enable_kernel_profile,
         "env": os.environ.get("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"),
         "trace_handlers": len(__import__("logging").getLogger("torch.__trace").handlers)}
def records(frame):
    return json.loads(frame.to_json(orient="records"))
json.dump({"compile_log": p.meta.compile_log, "code_names": p.meta.code_names,
           "torch_version": str(torch.__version__), "key_averages": rows, "after_cell": after, "compile_inner_s": compile_inner_s,
           "nbprof": {"graph_breaks": records(c.graph_breaks), "recompiles": records(c.recompiles)}},
          open(os.path.join(out, "run.json"), "w"))
'''

_EXPLAIN = '''
import json, sys, torch
exec(sys.argv[1])
e = torch._dynamo.explain(Chatty())(torch.randn(4, 16))
breaks = [{"reason": str(b.reason), "line": b.user_stack[-1].lineno if b.user_stack else None}
          for b in e.break_reasons]
json.dump({"graph_break_count": e.graph_break_count, "graph_count": e.graph_count, "break_reasons": breaks},
          open(sys.argv[2], "w"))
'''


def _env(tmp: Path, trace_dir: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp / "inductor-cache")  # a fresh cache: the FX graph cache misses
    env.pop("TORCH_TRACE", None)
    if trace_dir is not None:
        env["TORCH_TRACE"] = str(trace_dir)
    return env


def tlparse_summary(trace_dir: Path, out: Path) -> dict | None:
    """tlparse's report of a TORCH_TRACE folder: per compile id, its graph break reasons and
    recompile reasons (artifact texts), and each kernel's provenance (source lines)."""
    exe = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
    if not Path(exe).exists():
        return None
    logs = sorted(trace_dir.glob("*.log"))
    if not logs:
        return None
    subprocess.run([exe, str(logs[0]), "-o", str(out), "--no-browser", "--overwrite"], check=True,
                   capture_output=True, timeout=300)
    directory = json.loads((out / "compile_directory.json").read_text())
    summary: dict = {"graph_breaks": [], "recompiles": [], "provenance": {}, "restarts": []}
    # failures_and_restarts.html: one row per failed or restarted compilation ("RestartAnalysis":
    # a graph break; torch 2.4 logs breaks only this way)
    page = (out / "failures_and_restarts.html").read_text()
    for cid, kind, text in re.findall(r"<tr>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>", page, re.S):
        # tlparse writes the reason as it is (a "<class ...>" in it too): only its own tags go
        tags = r"</?(?:pre|a|br|code|span)\b[^>]*>"
        summary["restarts"].append({"compile_id": re.sub(tags, "", cid).strip(), "type": kind.strip(),
                                    "text": html.unescape(re.sub(tags, "", text)).strip()})
    for cid, entry in directory.items():
        for a in entry.get("artifacts", []):
            name, path = a["name"], out / a["url"]
            if name.startswith("dynamo_graph_break_reason"):
                summary["graph_breaks"].append({"compile_id": cid, "text": path.read_text()})
            elif name.startswith("recompile_reasons"):
                summary["recompiles"].append({"compile_id": cid, "text": path.read_text()})
            elif name.startswith("inductor_provenance_tracking_kernel_stack_traces") and path.stat().st_size:
                summary["provenance"].update(json.loads(path.read_text()))
    return summary


def record(out: Path) -> None:
    """Run the workload in fresh processes and write its files into ``out`` (see the module doc)."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        trace_dir = tmp / "torch_trace"
        for script, args, trace in ((_RUN, [SETUP, CELL, str(out)], trace_dir),
                                    (_EXPLAIN, [SETUP, str(out / "explain.json")], None)):
            done = subprocess.run([sys.executable, "-c", script, *args], env=_env(tmp, trace),
                                  capture_output=True, text=True, timeout=900)
            if done.returncode:
                raise RuntimeError(f"the workload failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
        summary = tlparse_summary(trace_dir, tmp / "tl_out")
        if summary is not None:
            (out / "tlparse.json").write_text(json.dumps(summary))


if __name__ == "__main__":
    record(Path(sys.argv[1]))
    print(textwrap.dedent(f"recorded into {sys.argv[1]}"))
