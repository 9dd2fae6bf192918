# %% [markdown]
# # Profiling a compiled model
#
# `torch.compile` turns a model into fused kernels. Profiling it raises questions the eager
# profile never did: why is the first call so slow, what did compilation spend its time on, why
# does the model compile again, and which of *my* lines became which fused kernel? In this
# notebook you will read the **Compile** tab and `result.compilation()`: compile time by phase,
# graph breaks and recompiles with their source lines, the fused kernels with the ATen ops they
# fused, and the compiled code's time line by line; then compare eager and compiled.
#
# About 5 minutes, CPU only (a C++ compiler compiles the kernels: the first call takes 10-60 s).

# %%
%load_ext nbprof

# %%
import torch
import nbprof

torch.manual_seed(0)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 256)
        self.b = torch.nn.Linear(256, 64)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.a(x))
        h = h * 2 + 1
        return torch.relu(self.b(h))


model = MLP()
compiled = torch.compile(model)
x = torch.randn(32, 64)

# %% [markdown]
# ## The first call compiles
#
# The first call of a compiled model does not run the model so much as *compile* it: Dynamo traces
# the Python code into a graph, AOT autograd derives the backward graph, Inductor lowers the graph
# to loops and generates C++ (Triton on a GPU), and a compiler builds it. The report's first
# finding says how long that took and where; the **Compile** tab has the details.

# %%
%%torchprof -o first
y = compiled(x)

# %% [markdown]
# `first.compilation()` holds the tables behind the tab. `phases` splits the compile time into
# its phases (they add up to the compile time), `frames` has one row per compilation:

# %%
first.compilation().phases

# %% [markdown]
# Most of the time usually goes to generating and compiling the kernels. A second run of the
# same program hits Inductor's **FX graph cache** on disk (the `fx_graph_cache` column says
# `hit` or `miss`) and compiles much faster.
#
# ## The steady state: fused kernels, line by line
#
# Profile a later call to see what the compiled model costs. nbprof turns on Inductor's kernel
# profiling while the cell that compiles runs, so each fused C++ kernel records itself
# (`graph_0_cpp_fused_add_gelu_mul_0`), and it reads which ATen ops and which source lines each
# kernel came from:

# %%
%%torchprof -o steady
for _ in range(20):
    y = compiled(x)

# %%
steady.compilation().kernels[["name", "kind", "count", "total_us", "aten_ops", "sources"]]

# %% [markdown]
# `gelu`, `* 2` and `+ 1` became **one** kernel: the fused kernel reads `h` once and writes it
# once, where eager PyTorch runs three operators over the whole tensor. The matrix multiplies stay
# library calls (`extern`). `lines` adds the time up per source line:

# %%
steady.compilation().lines

# %% [markdown]
# ## Eager vs compiled
#
# `nbprof.compare(eager, compiled)` puts each ATen op's eager time next to the compiled code's
# time spent on it (a fused kernel's time is split among the ops it fused):

# %%
%%torchprof -q -o eager
for _ in range(20):
    y = model(x)

# %%
nbprof.compare(eager, steady)

# %% [markdown]
# ## Graph breaks and recompiles
#
# Two things make compiled models slow. A **graph break**: Dynamo cannot trace a call (a `print`,
# `.item()`, a call into a library it does not know), so the graph is split, Python runs in
# between, and nothing fuses across the break. A **recompile**: a *guard* of the compiled code
# fails (an input's shape or dtype changed, a Python value it read changed) and the function is
# compiled again. The Compile tab lists both with the source line and the reason.

# %%
class Chatty(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = torch.relu(self.a(x))
        scale = h.max().item()  # a Python number: Dynamo breaks the graph here
        return h / scale


chatty = torch.compile(Chatty())

# %%
%%torchprof -o broken
out = chatty(torch.randn(4, 16))

# %%
broken.compilation().graph_breaks[["source", "code", "reason"]]

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: the most expensive line
#
# Which source line of `MLP.forward` became the most compiled-code time in `steady`? Store its
# location as the table shows it (for example `"In [3] line 12"`) in `hottest_line`.
#
# {{solution}}

# %% [task]
hottest_line = None  # TODO: read it from steady.compilation().lines

# %% [solution]
lines = steady.compilation().lines
hottest_line = lines.loc[lines["kernel_us"].idxmax(), "source"]

# %% [check]
# NBVAL_CHECK_OUTPUT
lines = steady.compilation().lines
truth = lines.loc[lines["kernel_us"].idxmax()]
if hottest_line == truth["source"]:
    print("✔ Right: the line with the most compiled-code time.")
else:
    print(f"✘ Not yet: you have hottest_line={hottest_line!r}; sort steady.compilation().lines by kernel_us.")

# %% [markdown]
# ### Exercise 2: no recompiles
#
# `normalize` is compiled and then called with batches of different sizes. Profile the loop and
# look at the Compile tab: the function compiles once for the first size, then **recompiles**
# when the size changes (the failed guard says `size mismatch`). Compile it so that the loop
# below compiles only once, whatever the sizes (hint: the `dynamic` argument of `torch.compile`).
#
# {{solution}}

# %%
def normalize(t):
    return (t - t.mean()) / (t.std() + 1e-5)

# %% [task]
fast_normalize = torch.compile(normalize)  # TODO: compile it once for every size

# %% [solution]
fast_normalize = torch.compile(normalize, dynamic=True)

# %%
%%torchprof -q -o sizes
for n in (5, 7, 9, 11):
    fast_normalize(torch.randn(n))

# %% [check]
# NBVAL_CHECK_OUTPUT
c = sizes.compilation()
compiles = int((c.frames["frame"] == "normalize").sum())
if compiles == 1 and len(c.recompiles) == 0:
    print("✔ Done: normalize compiled once for four sizes.")
else:
    print(f"✘ Not yet: normalize compiled {compiles} times ({len(c.recompiles)} recompiles); "
          "see the failed guard in sizes.compilation().recompiles.")

# %% [markdown]
# ## Takeaways
#
# - Profile a compiled model's **later** calls: the first one measures compilation (the
#   `compile_time` finding says how long, and the Compile tab splits it into phases).
# - The Compile tab lists each fused kernel with the ATen ops it fused and the lines it came
#   from, and adds the compiled code's time up **by source line**.
# - **Graph breaks** (`print`, `.item()`) split the graph; **recompiles** compile again when a
#   guard fails: both are listed with their line and reason; `dynamic=True` or
#   `torch._dynamo.mark_dynamic` stop recompiles for changing shapes.
# - `nbprof.compare(eager, compiled)` says op by op what compiling won or lost.

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
