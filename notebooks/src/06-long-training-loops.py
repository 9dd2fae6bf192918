# %% [markdown]
# # Long training loops: profile a few steps, export the trace
#
# A real training loop runs thousands of steps. Profiling all of them is slow (the profiler adds
# overhead to every operator) and gives traces too big to open. It is also misleading: the first
# steps pay one-time costs (memory allocation, library initialization) that later steps do not.
#
# The answer is a **schedule**: skip some steps, warm up the profiler on one, record a few. In this
# notebook you will profile a loop with `--schedule` and `nbprof.step()`, compare the recorded
# steps, and export traces for Perfetto and TensorBoard.
#
# About 5 minutes, CPU only. Files are written to `traces/` next to this notebook.

# %%
%load_ext nbprof

# %%
import os

import torch
from torch.profiler import record_function

import nbprof

os.makedirs("traces", exist_ok=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(64, 128), torch.randint(0, 10, (64,))) for _ in range(12)]


def train_step(x, y):
    with record_function("forward"):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer"):
        optimizer.step()
        optimizer.zero_grad()
    return loss

# %% [markdown]
# ## `--schedule wait,warmup,active[,repeat]` and `nbprof.step()`
#
# Call `nbprof.step()` once at the end of every iteration: it tells the profiler that a step ended.
# The schedule counts those steps:
#
# - **wait**: steps run without the profiler;
# - **warmup**: steps run with the profiler on, but their events are thrown away (the profiler's own
#   start-up cost lands there);
# - **active**: steps recorded;
# - **repeat** (optional): how many wait-warmup-active cycles to run (default 1).
#
# `--schedule 2,1,3` skips steps 0 and 1, warms up on step 2, and records steps 3, 4 and 5. The loop
# still runs all 12 steps; `nbprof.step()` is a no-op when no profile is running, so it can stay in
# your code.

# %%
%%torchprof --schedule 2,1,3 -o sched
for x, y in data:
    train_step(x, y)
    nbprof.step()

# %% [markdown]
# The recorded steps show up as `ProfilerStep#N` ranges (the *Ranges* tab), and as a table:

# %%
sched.steps()[["step", "dur_us", "self_cpu_us", "ops", "top_op"]]

# %% [markdown]
# Which steps and how many operators each is fixed by the schedule and the code, not by the machine:

# %%
# NBVAL_CHECK_OUTPUT
sched.steps()[["step", "ops"]]

# %% [markdown]
# `step_breakdown()` puts the steps side by side, one row per operator (or per `record_function`
# label with `by="range"`): a step that is slower than the others stands out, and so does the
# operator that made it slower.

# %%
sched.step_breakdown(by="range")

# %% [markdown]
# ### Forgot `nbprof.step()`?
#
# Without it, the schedule never reaches its active steps and nothing is recorded; the report says
# what to do instead of showing an empty table:

# %%
%%torchprof --schedule 1,1,2
for x, y in data[:4]:
    train_step(x, y)

# %% [markdown]
# ## Export a trace
#
# The report is good for tables; for exploring a long timeline, open the trace in a dedicated viewer:
#
# - `--export traces/NAME.json.gz` writes a Chrome trace: open it in **Perfetto**
#   (ui.perfetto.dev, *Open trace file*; the file stays on your machine) or `chrome://tracing`.
#   In JupyterLab, right-click the file in the file browser and *Download* it first.
# - `--tensorboard DIR` writes the trace in the layout TensorBoard's profiler plugin reads
#   (`tensorboard --logdir DIR`; the plugin needs `torch-tb-profiler`).
# - `nbprof.load_trace(path)` reads any of these files (or a folder of them) back into the same
#   result object, with every table and view: that is how notebook 5 shows GPU profiles on a CPU.

# %%
%%torchprof -q --schedule 2,1,3 --export traces/train.trace.json.gz --tensorboard traces/tb -o exported
for x, y in data:
    train_step(x, y)
    nbprof.step()

# %%
print(exported.meta.notes)
sorted(os.listdir("traces"))

# %%
again = nbprof.load_trace("traces/train.trace.json.gz")
again.steps()[["step", "ops"]]

# %% [markdown]
# ### Scripts: `python -m nbprof`
#
# Training usually runs as a script, not in a notebook. The same profiler runs from the command line:
# `python -m nbprof torch [flags] train.py [args]` runs the script, prints the table and writes an
# HTML report; `nbprof.step()` inside the script drives `--schedule` the same way.

# %%
script = """
import torch, nbprof
model = torch.nn.Linear(64, 64)
for step in range(6):
    model(torch.randn(32, 64)).sum().backward()
    nbprof.step()
"""
with open("traces/tiny_train.py", "w") as f:
    f.write(script)

# %%
import sys

# {sys.executable} is this kernel's Python; in a terminal, type python
!{sys.executable} -m nbprof torch --no-cuda --schedule 1,1,2 --limit 5 --no-html traces/tiny_train.py

# %% [markdown]
# ### Several processes: one trace per rank
#
# Distributed training (`torchrun`, DDP) runs one process per GPU, and each can write its own
# trace with torch's `tensorboard_trace_handler`. `nbprof.load_trace(folder)` reads each rank in a
# worker and brings back that rank's tables, not its events, so hundreds of ranks fit in the
# notebook's memory: the result (a `ClusterProfile`) opens on the **Ranks** tab, with a progress
# bar (ranks loaded / total) while the ranks load. Worker processes of this machine by default
# (`workers=` sets how many; a folder this small is read in the notebook's own process), or a Dask
# cluster (`client=`, with `pip install "dask[distributed]"`).
#
# Below, two CPU processes train the same model with DDP (gloo backend, no GPU needed); rank 1
# takes 20 ms longer to load each batch (`time.sleep` inside a `record_function("load_batch")`).
# At every step, DDP's gradient all-reduce makes the faster rank wait for the slower one.

# %%
ddp_script = """
import time, torch, torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3),
             on_trace_ready=tensorboard_trace_handler("traces/ddp")) as prof:
    for step in range(5):
        with record_function("load_batch"):
            x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
            if rank == 1:
                time.sleep(0.02)  # a slow data loader on one rank
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()
dist.destroy_process_group()
"""
with open("traces/ddp_train.py", "w") as f:
    f.write(ddp_script)

# %%
# two processes on this machine; torchrun (torch.distributed.run) starts them and sets up the group
# (--standalone: on a free local port, so several notebooks can do this at once)
!{sys.executable} -m torch.distributed.run --standalone --nproc_per_node=2 traces/ddp_train.py 2>&1 | grep -v -e USDT -e "^\*" -e OMP_NUM_THREADS

# %%
ddp = nbprof.load_trace("traces/ddp")
ddp

# %% [markdown]
# The report's findings open with it: rank 1 is the slowest, the other rank waits for it in its
# collectives, and `load_batch` differs most. Findings that hold on several ranks are one line
# naming the ranks. The *Ranks* tab compares the ranks; the same numbers are data. `comm_us` is
# time in collectives (the all-reduce): the rank that waits there longest is waiting for the other
# one. `differences` shows why: rank 1's `load_batch` takes about 20 ms per step more.

# %%
table = ddp.ranks().table
diff = ddp.ranks().differences.set_index("name")
print(table[["rank", "comm_us"]].round(0).to_string(index=False))
print(diff.loc[["load_batch"], ["count_rank0", "count_rank1", "time_us_rank0", "time_us_rank1"]].round(0))
waiter = int(table.sort_values("comm_us").iloc[-1]["rank"])
slow_loader = int(diff.loc["load_batch", "slowest_rank"])
print(f"rank {waiter} waits longest in the all-reduce; rank {slow_loader} loads its batches slowest")

# %% [markdown]
# `ddp.rank(r)` is one rank's full profile, read from its file when asked: its events, timeline,
# ranges, every view. (`ddp.events` would merge every rank's events into the notebook: fine for
# two small ranks, not for a cluster.)

# %%
slow = ddp.rank(slow_loader)
ranges = slow.ranges()
print(ranges[ranges["label"] == "load_batch"][["label", "count", "total_us", "mean_us"]].round(0).to_string(index=False))

# %% [markdown]
# The collectives, per rank (the TensorBoard plugin's distributed view): a collective ends on every
# rank together, so the rank that spends longest in it arrived first and waited; the
# `collective_wait` finding says so. `overview()` splits each rank's steps the TensorBoard way.
# On GPU ranks, `ranks().table` also holds HTA's temporal breakdown (`breakdown_compute_us`,
# `breakdown_exposed_comm_us`, ...), `overlap_pct` (communication hidden behind compute) and the
# GPU's idle time by cause (`idle_host_wait_us`, ...), drawn as one bar per rank in the *Ranks*
# tab; `p.launches()` and `p.queue_length()` say whether the CPU runs ahead of the GPU.

# %%
print(ddp.collectives()[["rank", "name", "count", "total_us", "mean_us"]].round(0).to_string(index=False))
steps = ddp.overview()
print(steps[steps["step"] == "all"][["rank", "duration_us", "cpu_exec_us", "other_us"]].round(0).to_string(index=False))

# %% [markdown]
# ### Every rank on one clock
#
# `ddp.timeline()` draws every rank's threads (and, on GPUs, streams) one under the other on one
# clock. The calls of one collective on every rank are joined by a line, and the rank that arrived
# last is marked: the others waited for it. The report's *Timeline* tab is the same view, live:
# drag to zoom, and the window is read again from each rank's file in full detail (in worker
# processes for a big folder: the notebook never holds every rank's events); select a span to list
# what each rank ran in it. `ddp.timeline_view(align="collective")` lines the ranks up on their
# first collective instead of their recorded clocks (`align="ProfilerStep#3"`: on that step).
# `collective_calls()` is the same as data: one row per call and rank, with who was last.

# %%
calls = ddp.collective_calls()
late = calls[calls["last"]]
print(f"{len(late)} collective calls; the last to arrive, by rank:", late["rank"].value_counts().sort_index().to_dict())
ddp.timeline()

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: skip the start-up
#
# The first steps of a loop are not representative. Change the schedule below so that the profile
# skips the first **3** steps (wait), warms up on **1**, and records **3** steps.
#
# {{solution}}

# %% [task]
%%torchprof -q --schedule 1,1,1 -o ex1
# TODO: change the schedule
for x, y in data:
    train_step(x, y)
    nbprof.step()

# %% [solution]
%%torchprof -q --schedule 3,1,3 -o ex1
for x, y in data:
    train_step(x, y)
    nbprof.step()

# %% [check]
# NBVAL_CHECK_OUTPUT
recorded = [int(s) for s in ex1.steps()["step"]]
if recorded == [4, 5, 6]:
    print(f"✔ Done: recorded steps {recorded}: 3 skipped (0-2), 1 warm-up (3), 3 recorded.")
else:
    print(f"✘ Not yet: recorded steps {recorded}; the goal is steps [4, 5, 6] "
          "(3 skipped, 1 warm-up, 3 recorded).")

# %% [markdown]
# ### Exercise 2: export and load back
#
# The first cell below profiles 4 steps of the loop (no schedule this time). Add
# `--export traces/ex2.trace.json.gz` to its flags and run it; then, in the next cell, load the file
# back into `reloaded`. The check compares the operator counts of the live profile and of the file.
#
# {{solution}}

# %% [task]
%%torchprof -q -o ex2
# TODO: add --export traces/ex2.trace.json.gz to the flags above
for x, y in data[:4]:
    train_step(x, y)

# %% [solution]
%%torchprof -q --export traces/ex2.trace.json.gz -o ex2
for x, y in data[:4]:
    train_step(x, y)

# %% [task]
reloaded = None  # TODO: nbprof.load_trace(...)

# %% [solution]
reloaded = nbprof.load_trace("traces/ex2.trace.json.gz")

# %% [check]
# NBVAL_CHECK_OUTPUT
if not os.path.exists("traces/ex2.trace.json.gz"):
    print("✘ Not yet: traces/ex2.trace.json.gz does not exist: add --export to the %%torchprof line.")
elif reloaded is None:
    print("✘ Not yet: the file is there; now load it into reloaded with nbprof.load_trace.")
else:
    live = ex2.key_averages().set_index("name")["count"]
    back = reloaded.key_averages().set_index("name")["count"]
    if live.sort_index().equals(back.sort_index()):
        print(f"✔ Done: the file has the same {len(back)} operators and {int(back.sum())} calls as the live profile "
              f"(e.g. aten::addmm × {back['aten::addmm']}).")
    else:
        print("✘ Not yet: the operator counts of reloaded differ from ex2: did you load the right file?")

# %% [markdown]
# ## Takeaways
#
# - Profile a few representative steps of a long loop: `--schedule wait,warmup,active` plus
#   `nbprof.step()` at the end of each iteration.
# - Compare steps with `steps()` and `step_breakdown()`: a slow step shows which operator slowed it.
# - Export with `--export` (Perfetto, chrome://tracing) or `--tensorboard`, and load any trace back
#   with `nbprof.load_trace`, in a notebook or on another machine.
# - Outside notebooks, `python -m nbprof torch train.py` does the same for a script.

# %% [markdown]
# ## On Binder: free this kernel's memory
#
# Binder gives all your open notebooks about 2 GB together, and a kernel that ran this tutorial
# holds a few hundred MB (torch, pandas, the profiles). When you are done, run the cell below: on
# Binder it shuts this kernel down and frees that memory for the next tutorial (Kernel → Shut Down
# Kernel does the same); anywhere else it does nothing.

# %%
import os

if os.environ.get("BINDER_REPO_URL") or os.environ.get("BINDER_LAUNCH_HOST"):  # set on mybinder.org
    exit()  # the kernel stops; a fresh, empty one may start in its place
