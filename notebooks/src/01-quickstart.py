# %% [markdown]
# # nbprof quickstart
#
# **nbprof** profiles a notebook cell and shows the report right under it. Two magics:
#
# | magic | profiles with | use it for |
# |---|---|---|
# | `%%torchprof` | `torch.profiler` | PyTorch code: operators, CUDA kernels, memory, input shapes |
# | `%%cprofile` | Python's `cProfile` | any Python code: which functions take the time |
#
# The cell runs exactly as it would without the magic: same variables, same output, same errors.
# You change one line to profile it and remove it when you are done.
#
# In this notebook (about 5 minutes) you will profile a small model and a small Python function,
# learn to read the report, and get the numbers underneath as pandas DataFrames.
# Run the cells from top to bottom with **Shift-Enter**. Everything runs on a CPU.

# %% [markdown]
# ## 1. Load the extension
#
# Once per notebook. It is cheap: it imports neither torch nor plotly.

# %%
%load_ext nbprof

# %% [markdown]
# ## 2. A small model to profile

# %%
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(256, 512),
    torch.nn.ReLU(),
    torch.nn.Linear(512, 10),
)
x = torch.randn(64, 256)  # a batch of 64 inputs

# %% [markdown]
# ## 3. Profile a cell with `%%torchprof`
#
# Put `%%torchprof` on the first line of a cell. The cell's last expression is still displayed
# (here: the shape of the output), and the report appears below it.

# %%
%%torchprof
with torch.no_grad():
    logits = model(x)
logits.shape

# %% [markdown]
# ### How to read the report
#
# - **The summary line**: how many events were recorded, the wall-clock span of the profile and
#   the *self* CPU time (time spent in the operators themselves, not counting their children).
# - **"top by …"**: the operator that costs the most by the column the table is sorted by.
# - **The tabs**:
#   - *Operators*: one row per PyTorch operator (`aten::addmm` is the matrix multiply inside
#     `nn.Linear`). Click a column header to sort by it, type in the search box to filter.
#   - *By input shape*, *Memory*: empty until you ask for them (`--shapes`, `--memory`, below);
#     the tab says which flag fills it.
#   - *Kernels*: CUDA kernels, on a machine with a GPU (notebook 5 shows recorded ones).
#   - *Timeline*: when each operator ran.
#
# Two kinds of time appear in every torch profile:
# **self** time is spent in the operator's own code; **total** time also includes the operators it
# called. `aten::linear` calls `aten::addmm`, so its total includes the matrix multiply and its self
# time is tiny. Notebook 3 is all about this.

# %% [markdown]
# ## 4. Flags
#
# Flags go after the magic. A few useful ones:
#
# - `--shapes` records input shapes (the *By input shape* tab), `--memory` records allocations
#   (the *Memory* tab), `--stack` records Python call stacks;
# - `--sort KEY` sorts the table (`self_cpu_us`, `cpu_total_us`, `count`, `cpu_mem_bytes`, …);
# - `--limit N` shows N rows (0 = all).
#
# `%%torchprof?` lists every flag. Here we profile a whole training step, with shapes and memory:

# %%
%%torchprof --shapes --memory --sort cpu_total_us --limit 8
loss = torch.nn.functional.cross_entropy(model(x), torch.zeros(64, dtype=torch.long))
loss.backward()

# %% [markdown]
# Open the *By input shape* and *Memory* tabs of this report: they are filled now. The backward
# pass shows up as operators whose names end in `Backward0`: autograd's functions, one per operator
# of the forward pass.

# %% [markdown]
# ## 5. The numbers underneath: `-o NAME`
#
# `-o prof` stores the result in the variable `prof`; `-q` hides the report (handy when you only
# want the numbers). The result is an object with pandas DataFrames inside.

# %%
%%torchprof -q -o prof
with torch.no_grad():
    for _ in range(3):
        model(x)

# %%
prof

# %% [markdown]
# `prof.key_averages()` is the operator table as a DataFrame: one row per operator, with the call
# count, times in µs (`self_cpu_us`, `cpu_total_us`, …) and memory in bytes. Units are in the
# column names; the numbers are plain numbers you can compute with.

# %%
ka = prof.key_averages()
ka[["name", "count", "self_cpu_us", "cpu_total_us"]]

# %% [markdown]
# Times change from run to run, call counts do not: three forward passes through two `Linear`
# layers and one `ReLU` make 6 `aten::linear` calls, 6 `aten::addmm` and 3 `aten::relu`.

# %%
# NBVAL_CHECK_OUTPUT
ka.set_index("name").loc[["aten::linear", "aten::addmm", "aten::relu"], "count"]

# %% [markdown]
# `prof.events` has one row per recorded event (start and duration in µs, the parent event, …)
# and `prof.findings` what nbprof noticed (the top operator, idle GPU, memory peaks, …).

# %%
prof.events[["name", "kind", "start_us", "dur_us", "parent"]].head()

# %%
prof.findings[["kind", "severity", "message"]]

# %% [markdown]
# ## 6. Plain Python: `%%cprofile`
#
# For code that is not PyTorch (data loading, parsing, your own loops) use `%%cprofile`. The report
# is the table `pstats` prints, sortable: `ncalls` (calls), `tottime` (time in the function itself)
# and `cumtime` (time including the functions it called). Notebook 2 goes deeper.

# %%
import re

TEXT = " ".join(["The quick brown fox jumps over the lazy dog."] * 400)


def normalize(word):
    return re.sub(r"[^a-z]", "", word.lower())


def word_counts(text):
    counts = {}
    for word in text.split():
        w = normalize(word)
        counts[w] = counts.get(w, 0) + 1
    return counts

# %%
%%cprofile
counts = word_counts(TEXT)
len(counts)

# %% [markdown]
# ## 7. Line magics, saving, the controls panel
#
# Both magics also work on one line: `%torchprof model(x)` or `%cprofile -o wc word_counts(TEXT)`.
# A torch profile saves to a trace file that `nbprof.load_trace` (and Perfetto, and
# `chrome://tracing`) opens again: that is how notebook 5 shows GPU profiles on a CPU.

# %%
%cprofile -q -o wc word_counts(TEXT)
wc

# %%
import os

import nbprof

os.makedirs("traces", exist_ok=True)  # next to this notebook
prof.save("traces/forward.trace.json.gz")
again = nbprof.load_trace("traces/forward.trace.json.gz")
again

# %% [markdown]
# `nbprof.controls()` shows toggles that set the defaults of the next `%%torchprof` runs (flags you
# type still win). CUDA is greyed out on a machine without a GPU.

# %%
nbprof.controls()

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: profile a training step
#
# Complete the cell below so that it profiles one **training** step of `model` — the forward pass,
# a loss, and `loss.backward()` — and stores the result as `train_prof`. Right now it only runs the
# forward pass under `torch.no_grad()`.
#
# {{solution}}

# %% [task]
%%torchprof -o train_prof
# TODO: compute a loss from the output and call loss.backward() (and drop torch.no_grad)
with torch.no_grad():
    out = model(x)

# %% [solution]
%%torchprof -o train_prof
out = model(x)
loss = torch.nn.functional.cross_entropy(out, torch.zeros(64, dtype=torch.long))
loss.backward()

# %% [markdown]
# Run the check. It reads your profile's operator table and looks for autograd's backward
# operators (names ending in `Backward0`).

# %% [check]
# NBVAL_CHECK_OUTPUT
names = train_prof.key_averages()["name"]
backward_ops = sorted(n for n in names if n.endswith("Backward0") and "::" not in n)
if backward_ops:
    print(f"✔ Done: your profile has {len(backward_ops)} backward operators: {', '.join(backward_ops)}")
else:
    print(f"✘ Not yet: none of the {len(names)} operators in train_prof is a backward operator "
          "(a name ending in 'Backward0'). Call loss.backward() inside the profiled cell.")

# %% [markdown]
# ### Exercise 2: read a number from the DataFrame
#
# In the `%cprofile -o wc` run above, how many times was `normalize` called? Do not count words by
# hand: read it from `wc.stats` (a DataFrame with columns `function`, `ncalls`, `tottime_s`,
# `cumtime_s`, …) and store it in `calls`.
#
# {{solution}}

# %% [task]
calls = None  # TODO: read it from wc.stats

# %% [solution]
stats = wc.stats
calls = int(stats.loc[stats["function"] == "normalize", "ncalls"].iloc[0])

# %% [check]
# NBVAL_CHECK_OUTPUT
st = wc.stats
truth = int(st.loc[st["function"] == "normalize", "ncalls"].iloc[0])
if calls == truth:
    print(f"✔ Right: normalize was called {truth:,} times (the ncalls column), once per word.")
elif calls is None:
    print("✘ Not yet: set calls to the number in the ncalls column of normalize's row.")
else:
    print(f"✘ Not quite: you have {calls!r}; look again at normalize's row in wc.stats.")

# %% [markdown]
# ## What next
#
# - `02-find-the-bottleneck.ipynb`: make a slow Python pipeline fast with `%%cprofile`.
# - `03-pytorch-profiler-basics.ipynb`: operators, self vs total, labels, input shapes.
# - `04-memory.ipynb`, `05-gpu-and-the-timeline.ipynb`, `06-long-training-loops.ipynb`.

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
