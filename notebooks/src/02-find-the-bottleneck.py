# %% [markdown]
# # Find the bottleneck with cProfile
#
# A data pipeline in pure Python is slow. Guessing why is the usual mistake: the slow part is rarely
# where you think. In this notebook you will **measure** with `%%cprofile`, read the profile
# (`tottime` vs `cumtime`, callers and callees, the flame view), fix the real bottlenecks and show
# the speed-up with numbers.
#
# About 5 minutes, CPU only.

# %%
%load_ext nbprof

# %% [markdown]
# ## The pipeline
#
# A log of 10,000 orders, one line each: `date;user;city;amount`. The city names are messy
# (`"  Paris"`, `"LONDON "`). `summarize` counts the distinct users and sums the amounts per city.

# %%
import random
import re


def make_log(n_lines=10_000, seed=0):
    rng = random.Random(seed)
    cities = ["berlin", "  Paris", "LONDON ", "madrid", "Rome", "oslo ", "Lisboa", "WIEN", "praha", " Dublin"]
    return [
        f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d};user{rng.randint(1, 2000)};"
        f"{rng.choice(cities)};{rng.randint(100, 99999) / 100}"
        for _ in range(n_lines)
    ]


LOG = make_log()


def normalize_city(name):
    name = name.strip().lower()
    return "".join(ch for ch in name if ch.isalpha()).title()


def parse(line):
    pattern = re.compile(r"(\d+)-(\d+)-(\d+);(\w+);([^;]*);([\d.]+)")
    year, month, day, user, city, amount = pattern.match(line).groups()
    return user, normalize_city(city), float(amount)


def summarize(lines):
    users = []
    totals = {}
    for line in lines:
        user, city, amount = parse(line)
        if user not in users:
            users.append(user)
        totals[city] = round(totals.get(city, 0.0) + amount, 2)
    return len(users), totals


LOG[:3]

# %% [markdown]
# ## Measure first
#
# `-o slow` keeps the result for later; the report shows the functions sorted by **tottime**.

# %%
%%cprofile -o slow
slow_result = summarize(LOG)

# %% [markdown]
# ### tottime vs cumtime
#
# - **ncalls**: how many times the function was called (`3/1` means 3 calls, 1 of them not
#   recursive).
# - **tottime**: time spent in the function's *own* code, not counting the functions it called.
# - **cumtime**: time from entering the function to leaving it, *including* everything it called.
#
# A function with a large **cumtime** but a small tottime is a *coordinator*: the time is somewhere
# below it. A function with a large **tottime** is where the time is actually spent.
#
# Here `summarize` has both: its cumtime is everything (it is the whole pipeline), and its tottime is
# the biggest too. Yet `summarize` calls nothing expensive itself... except `user not in users`:
# `in` on a **list** compares with every element, and cProfile counts that as the function's own
# time, because `in` is not a function call. With 2,000 users, that is up to 2,000 string
# comparisons per line.
#
# The same table sorted by cumtime (no need to profile again: ask the result for another view):

# %%
slow.report(sort="cumtime")

# %% [markdown]
# ### Who calls whom
#
# `callees(fn)` lists what a function called, `callers(fn)` who called it, each with the number of
# calls and the time of that edge. Pass the function itself: a name can be ambiguous (the `re`
# module has a `parse` function of its own, and it ran here too). What does `parse` spend its time on?

# %%
slow.callees(parse)

# %% [markdown]
# `re.compile` runs 10,000 times: once per line. Python caches compiled patterns, so each call is a
# dictionary look-up, but 10,000 look-ups are not free, and the pattern never changes.
# And `normalize_city` runs once per line to clean up just 10 distinct city names.

# %% [markdown]
# ### The flame view
#
# The same call graph as a picture: each box is a function, its width is its cumulative time, the
# boxes below it are the functions it called. A wide box with nothing below is the time sink
# (its own time). Hover to see the numbers, click a box to zoom in, click the top bar to zoom out.

# %%
slow.flame()

# %% [markdown]
# The tree behind the picture is a DataFrame too (`slow.call_tree()`), and `slow.stats` is the whole
# table: `function, filename, lineno, ncalls, primitive_calls, tottime_s, cumtime_s, …`.

# %%
slow.stats.sort_values("tottime_s", ascending=False).head(8)

# %% [markdown]
# ## Find the slow line: `--lines`
#
# cProfile stops at functions: it told you that `summarize` spends its own time somewhere in its
# body, not where. `%%cprofile --lines` also counts, for every line of **your** code (this cell, the
# functions defined in other cells, your own `.py` files; not the standard library, not installed
# packages), how often it ran (**hits**) and how long it took: **Time** is what line_profiler
# reports (the line and everything it called), **Own time** leaves out the time of the lines of your
# code it called, so the line that does the work stands out rather than the line that called it.
# The report opens on the **Source** tab: your code as a heat map, the hottest line highlighted,
# and the same lines as a table you can sort.

# %%
%%cprofile --lines -o by_line
slow_result = summarize(LOG)

# %% [markdown]
# The numbers are a DataFrame too: one row per line that ran, with the cell (`In [4]`), the line
# number as the cell shows it, the function and the line's text. Hits, like call counts, do not
# depend on the machine:

# %%
# NBVAL_CHECK_OUTPUT
by_line.lines()[["function", "line", "source", "hits"]].query("function == 'summarize'")

# %% [markdown]
# Following lines has a cost: Python calls nbprof's tracer at every line of your code, so tight
# Python loops run a few times slower (about as much as with line_profiler; library code runs at full
# speed). Use `--lines` to find the line, then profile without it to measure the fix.

# %% [markdown]
# Call counts do not depend on the machine, so they make good facts to check. What `summarize`
# called, and how often (sorted by calls: `callees` sorts by time, which varies):

# %%
# NBVAL_CHECK_OUTPUT
calls = slow.callees(summarize)[["function", "ncalls"]]
calls.sort_values(["ncalls", "function"], ascending=[False, True], ignore_index=True)

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: callers
#
# Use `slow.callers(normalize_city)` to find which function calls `normalize_city`, and how many times. Store
# them as `caller` (a function name) and `n_calls`.
#
# {{solution}}

# %% [task]
caller = None  # TODO: the name of the function that calls normalize_city
n_calls = None  # TODO: how many times it calls it

# %% [solution]
edges = slow.callers(normalize_city)
caller = edges["function"].iloc[0]
n_calls = int(edges["ncalls"].iloc[0])

# %% [check]
# NBVAL_CHECK_OUTPUT
edges = slow.callers(normalize_city)
truth = (edges["function"].iloc[0], int(edges["ncalls"].iloc[0]))
if (caller, n_calls) == truth:
    print(f"✔ Right: {truth[0]} calls normalize_city {truth[1]:,} times, for only 10 distinct city names.")
else:
    print(f"✘ Not yet: you have caller={caller!r}, n_calls={n_calls!r}. Look at slow.callers(normalize_city).")

# %% [markdown]
# ### Exercise 2: make it at least 3× faster
#
# Below is a copy of the pipeline, renamed `summarize_fast`. Change it so that it returns **the same
# result** at least **3× faster**. The profile told you where to look:
#
# 1. membership tests on a list (`user not in users`): what data structure answers `in` in constant time?
# 2. a pattern compiled for every line: compile it once, outside the function;
# 3. the same 10 city names normalized 10,000 times: remember the answers
#    (a `dict`, or `functools.lru_cache`).
#
# Then run the two cells after it: the first profiles your version, the second compares.
#
# {{solution}}

# %% [task]
# TODO: make this faster; keep the result identical.


def normalize_city_fast(name):
    name = name.strip().lower()
    return "".join(ch for ch in name if ch.isalpha()).title()


def parse_fast(line):
    pattern = re.compile(r"(\d+)-(\d+)-(\d+);(\w+);([^;]*);([\d.]+)")
    year, month, day, user, city, amount = pattern.match(line).groups()
    return user, normalize_city_fast(city), float(amount)


def summarize_fast(lines):
    users = []
    totals = {}
    for line in lines:
        user, city, amount = parse_fast(line)
        if user not in users:
            users.append(user)
        totals[city] = round(totals.get(city, 0.0) + amount, 2)
    return len(users), totals

# %% [solution]
import functools

PATTERN = re.compile(r"(\d+)-(\d+)-(\d+);(\w+);([^;]*);([\d.]+)")  # compiled once


@functools.lru_cache(maxsize=None)  # 10 distinct names: computed 10 times, then looked up
def normalize_city_fast(name):
    name = name.strip().lower()
    return "".join(ch for ch in name if ch.isalpha()).title()


def parse_fast(line):
    year, month, day, user, city, amount = PATTERN.match(line).groups()
    return user, normalize_city_fast(city), float(amount)


def summarize_fast(lines):
    users = set()  # `in` / add on a set take constant time
    totals = {}
    for line in lines:
        user, city, amount = parse_fast(line)
        users.add(user)
        totals[city] = round(totals.get(city, 0.0) + amount, 2)
    return len(users), totals

# %%
%%cprofile -q -o fast
fast_result = summarize_fast(LOG)

# %% [check]
# NBVAL_CHECK_OUTPUT
speedup = slow.total_s / fast.total_s
calls_before, calls_after = int(slow.stats["ncalls"].sum()), int(fast.stats["ncalls"].sum())
if fast_result != slow_result:
    print("✘ Not yet: summarize_fast returns a different result than summarize.")
elif speedup >= 3:
    print(f"✔ Done: same result, {speedup:.1f}x faster ({slow.total_s * 1e3:.0f} ms → {fast.total_s * 1e3:.0f} ms); "
          f"{calls_before:,} function calls → {calls_after:,}.")
else:
    print(f"✘ Not yet: same result, but only {speedup:.1f}x faster ({slow.total_s * 1e3:.0f} ms → "
          f"{fast.total_s * 1e3:.0f} ms); the goal is 3x. {calls_before:,} function calls → {calls_after:,}.")

# %% [markdown]
# `nbprof.compare` puts the two profiles side by side, function by function: what got faster, what
# disappeared, what is new. Your functions have new names (`parse_fast`, …), so they show up as
# *gone* and *new*; the built-ins they call line up: compare their call counts.

# %%
import nbprof

nbprof.compare(slow, fast)

# %% [markdown]
# ### Exercise 3: find the slow line
#
# In `by_line` (the `--lines` profile of the slow pipeline), which line of `summarize` has the most
# **own time**? Store its text, without the indentation, as `slow_line`. Look at the Source tab above,
# or sort `by_line.lines()` by `self_time_us`.
#
# {{solution}}

# %% [task]
slow_line = None  # TODO: the text of summarize's line with the most own time, e.g. "totals = {}"

# %% [solution]
rows = by_line.lines().query("function == 'summarize'")
slow_line = rows.sort_values("self_time_us", ascending=False)["source"].iloc[0].strip()

# %% [check]
# NBVAL_CHECK_OUTPUT
rows = by_line.lines().query("function == 'summarize'")
top = rows.loc[rows["self_time_us"].idxmax()]
if isinstance(slow_line, str) and slow_line.strip() == top["source"].strip():
    print(f"✔ Right: `{top['source'].strip()}` ran {int(top['hits']):,} times, each time scanning the list of users "
          "seen so far: in a set, that test takes constant time (Exercise 2).")
else:
    print(f"✘ Not yet: you have slow_line={slow_line!r}. Sort by_line.lines() (summarize's rows) by self_time_us.")

# %% [markdown]
# ## Takeaways
#
# - Measure, then fix the top of the **tottime** column; use **cumtime** to find the path to it.
# - `--lines` shows the line inside a function where its own time goes (`in` on a list, arithmetic,
#   loops): the Source tab and `result.lines()`.
# - Work that is not a function call (`in` on a list, arithmetic, loops) is the calling function's
#   own time: read that function's code.
# - Call counts are the most useful facts in a profile: they do not change between runs and they
#   tell you when something runs far more often than it should.
# - cProfile slows down code that makes many small calls, so compare profiles with profiles (as
#   here), not with a run without the profiler.

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
