"""What a DataLoader worker records (nbprof/collect/data_worker.py), driven in this process.

The module runs inside DataLoader worker processes, where mutmut sees nothing. Here torch's own
``_worker_loop`` runs in the test's main thread (as in a worker's), given real multiprocessing
queues and a real Dataset, and a thread of the test plays torch's main process: it puts the tasks
``(idx, indices)``, takes the batches, sends ``_ResumeIteration``/``StopRecording``, then ends
the loop (done event, ``None``). The oracle is what the test made: the tasks it sent, the dataset's
own record of its calls, the batches the loop handed over, its own sleeps (lower bounds only), the
clock read before and after; the batches file is decoded here from its documented layout (six
little-endian int64s a record), the functions with ``marshal``.

Running torch's loop here changes process state a worker may change (its signal handlers, thread
count, seeds, thread name, ``get_worker_info``): the ``worker_state`` fixture puts all of it back.
"""

from __future__ import annotations

import ctypes
import glob
import marshal
import multiprocessing
import os
import queue
import random
import signal
import sys
import threading
import time

import numpy as np
import pytest

from .conftest import needs_torch

pytestmark = [needs_torch, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and fork")]

LOADER, ITERATOR, EPOCH, WORKER = 3, 2, 1, 1  # the numbers WorkerLoop is given (any will do)
_SIGNALS = ("SIGTERM", "SIGSEGV", "SIGBUS", "SIGFPE")  # the C handlers torch's loop installs


@pytest.fixture
def worker_state():
    """Put back what torch's ``_worker_loop`` changes in the process it runs in."""
    import torch
    from torch.utils.data._utils import worker

    libc = ctypes.CDLL(None, use_errno=True)
    raw = {}
    for name in _SIGNALS:  # the C-level actions (torch's are invisible to signal.getsignal)
        buf = ctypes.create_string_buffer(512)  # larger than any platform's struct sigaction
        assert libc.sigaction(getattr(signal, name), None, buf) == 0
        raw[name] = buf
    python_term = signal.getsignal(signal.SIGTERM)
    threads, thread_name = torch.get_num_threads(), torch._C._get_thread_name()
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    profile, trace = sys.getprofile(), sys.gettrace()
    # a worker forked from a process without a SIGTERM handler of its own starts with the default
    # one; this process may have one (mutmut's fork server's, which ends its test run with status 0)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        worker._worker_info = None
        signal.signal(signal.SIGTERM, python_term)
        for name in _SIGNALS:
            libc.sigaction(getattr(signal, name), raw[name], None)
        torch.set_num_threads(threads)
        torch._C._set_thread_name(thread_name)
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        sys.setprofile(profile)
        sys.settrace(trace)


class Numbers:
    """A map-style dataset of ints that keeps its own record of what it was asked for."""

    def __init__(self, n, nap_s=0.0, bad=(), during=None):
        self.n, self.nap_s, self.bad, self.during = n, nap_s, set(bad), during
        self.asked: list[int] = []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.asked.append(i)
        if self.during is not None:
            self.during(i)
        if self.nap_s:
            time.sleep(self.nap_s)
        if i in self.bad:
            raise ValueError(f"sample {i} is broken")
        return i * 10


class Stream:
    """An iterable dataset of ``n`` ints (torch's Iterable kind: the tasks carry no indices)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


def collate(batch):
    return list(batch) if isinstance(batch, list) else batch  # one sample without auto-collation


def run_worker(folder, dataset, script, *, kind="map", auto_collation=True, init_fn=None, target=None):
    """Run torch's loop through nbprof's WorkerLoop here; a thread plays the main process, doing
    ``script``: ("task", idx, index) puts a task and takes its answer, ("resume",) a next epoch of a
    persistent worker (answered too), ("stop",) nbprof's StopRecording. Returns the answers."""
    from torch.utils.data import _DatasetKind
    from torch.utils.data._utils.worker import _ResumeIteration

    from nbprof.collect.data_worker import StopRecording, WorkerLoop

    ctx = multiprocessing.get_context("fork")
    index_q, data_q, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    answers, failures = [], []

    def main_process():
        try:
            for step in script:
                if step[0] == "task":
                    index_q.put((step[1], step[2]))
                elif step[0] == "resume":
                    index_q.put(_ResumeIteration(None))
                else:
                    index_q.put(StopRecording())
                    continue
                answers.append(data_q.get(timeout=20))
        except BaseException as e:  # the loop is stuck or broken: end it anyway, then fail the test
            failures.append(e)
        finally:
            done.set()
            index_q.put(None)

    loop = target or WorkerLoop(str(folder), LOADER, ITERATOR, EPOCH)
    player = threading.Thread(target=main_process)
    player.start()
    try:
        # positional and keyword arguments, as torch's Process(target, args=...) and a later torch may pass them
        loop(_DatasetKind.Map if kind == "map" else _DatasetKind.Iterable, dataset, index_q, data_q, done,
             auto_collation=auto_collation, collate_fn=collate, drop_last=False, base_seed=0, init_fn=init_fn,
             worker_id=WORKER, num_workers=2, persistent_workers=True, shared_seed=None)
    finally:
        player.join(30)
    assert not failures, failures
    return answers


def read_batches(folder):
    """The one batches file in ``folder``: (its name, header row, batch rows) decoded from the
    documented layout, not with the module's own struct."""
    files = glob.glob(os.path.join(str(folder), "*.batches"))
    assert len(files) == 1, files
    rows = np.fromfile(files[0], dtype="<i8")
    assert len(rows) % 6 == 0
    rows = rows.reshape(-1, 6)
    return os.path.basename(files[0]), rows[0].tolist(), rows[1:].tolist()


def read_functions(folder):
    files = glob.glob(os.path.join(str(folder), "*.prof"))
    assert len(files) == 1, files
    with open(files[0], "rb") as f:
        return os.path.basename(files[0]), marshal.load(f)


def calls_of(stats, name):
    """ncalls of the functions called ``name`` defined in this test file (cProfile's stats dict)."""
    return sum(v[1] for (file, _, fn), v in stats.items() if fn == name and file == __file__)


# --------------------------------------------------------------------- the loop, end to end


def test_a_worker_records_each_batch_and_the_functions_that_made_them(tmp_path, worker_state):
    nap = 0.002
    data = Numbers(20, nap_s=nap)
    initialised = []
    tasks = [(0, [3, 4]), (1, [5, 6, 7]), (2, [8])]
    before = time.time_ns()
    answers = run_worker(tmp_path, data, [("task", i, ix) for i, ix in tasks], init_fn=initialised.append)
    after = time.time_ns()

    # the loop got each batch the dataset made, in order (the wrappers pass it through untouched)
    assert answers == [(i, [x * 10 for x in ix]) for i, ix in tasks]
    assert data.asked == [3, 4, 5, 6, 7, 8] and initialised == [WORKER]
    pid = os.getpid()
    stem = f"w{LOADER}-{ITERATOR}-{WORKER}-{pid}"
    assert sorted(os.listdir(tmp_path)) == [stem + ".batches", stem + ".prof"]  # no .tmp left
    assert os.stat(tmp_path / (stem + ".batches")).st_mode & 0o777 == 0o600  # the worker's own file

    name, header, batches = read_batches(tmp_path)
    kind, loader, epoch, started_ns, worker_id, header_pid = header
    assert (kind, loader, epoch, worker_id, header_pid) == (0, LOADER, EPOCH, WORKER, pid)
    assert before <= started_ns <= batches[0][3]
    assert [b[:3] for b in batches] == [[1, EPOCH, i] for i, _ in tasks]  # status ok, epoch, the task's idx
    assert [b[5] for b in batches] == [len(ix) for _, ix in tasks]
    for (_, _, _, start, end, samples), prev in zip(batches, [None] + batches[:-1]):
        assert before <= start <= end <= after
        assert end - start >= 0.9 * nap * samples * 1e9  # its own sleeps, at least
        if prev is not None:
            assert start >= prev[4]  # one batch after another

    prof, payload = read_functions(tmp_path)
    assert prof == stem + ".prof"
    assert set(payload) == {"stats", "batches", "why", "worker", "pid"}
    assert (payload["batches"], payload["why"], payload["worker"], payload["pid"]) == (3, "exit", WORKER, pid)
    stats = payload["stats"]
    assert calls_of(stats, "__getitem__") == 6 and calls_of(stats, "collate") == 3  # exactly the batches' work
    assert not any(fn == "append" and "initialised" in str(k) for k in stats for fn in [k[2]])
    assert calls_of(stats, "main_process") == 0 and calls_of(stats, "__len__") == 0


def test_without_auto_collation_each_task_is_one_sample(tmp_path, worker_state):
    """batch_size=None: a task's index is one int, and the batch is one sample."""
    data = Numbers(10)
    answers = run_worker(tmp_path, data, [("task", 0, 7), ("task", 1, 2)], auto_collation=False)
    assert answers == [(0, 70), (1, 20)]
    _, _, batches = read_batches(tmp_path)
    assert [(b[0], b[2], b[5]) for b in batches] == [(1, 0, 1), (1, 1, 1)]


def test_a_batch_that_raises_is_an_error_record_and_the_worker_goes_on(tmp_path, worker_state):
    data = Numbers(10, bad={4})
    answers = run_worker(tmp_path, data, [("task", 0, [1, 2]), ("task", 1, [3, 4]), ("task", 2, [5])])
    assert [type(a[1]).__name__ for a in answers] == ["list", "ExceptionWrapper", "list"]  # torch's own wrapper
    _, _, batches = read_batches(tmp_path)
    assert [(b[0], b[2], b[5]) for b in batches] == [(1, 0, 2), (2, 1, 2), (1, 2, 1)]
    assert read_functions(tmp_path)[1]["batches"] == 3


def test_an_iterable_worker_that_runs_out_ends_with_an_end_record(tmp_path, worker_state):
    """Six items, batches of two: three batches, then torch's "ran out" for the fourth task; the
    fifth, given after it, the loop skips (no batch comes of it: no record)."""
    script = [("task", i, [None, None]) for i in range(4)]
    answers = run_worker(tmp_path, Stream(6), script, kind="iterable")
    assert [a[1] for a in answers[:3]] == [[0, 1], [2, 3], [4, 5]]
    assert type(answers[3][1]).__name__ == "_IterableDatasetStopIteration"
    _, _, batches = read_batches(tmp_path)
    assert [(b[0], b[2]) for b in batches] == [(1, 0), (1, 1), (1, 2), (3, 3)]
    assert [b[5] for b in batches[:3]] == [2, 2, 2]


def test_a_persistent_worker_counts_its_epochs(tmp_path, worker_state):
    """_ResumeIteration starts the next epoch: torch numbers its tasks from 0 again."""
    data = Numbers(10)
    script = [("task", 0, [0, 1]), ("task", 1, [2]), ("resume",), ("task", 0, [3]), ("resume",), ("task", 0, [4])]
    answers = run_worker(tmp_path, data, script)
    assert [type(a[0]).__name__ for a in answers].count("_ResumeIteration") == 2  # torch's acknowledgement
    _, header, batches = read_batches(tmp_path)
    assert header[2] == EPOCH
    assert [(b[1], b[2], b[5]) for b in batches] == [(EPOCH, 0, 2), (EPOCH, 1, 1), (EPOCH + 1, 0, 1), (EPOCH + 2, 0, 1)]
    assert read_functions(tmp_path)[1]["batches"] == 4


def test_stop_recording_writes_the_functions_and_the_loop_goes_on_unrecorded(tmp_path, worker_state):
    data = Numbers(10)
    script = [("task", 0, [0, 1]), ("task", 1, [2]), ("stop",), ("task", 2, [3, 4]), ("resume",), ("task", 0, [5])]
    answers = run_worker(tmp_path, data, script)
    assert answers[2] == (2, [30, 40]) and answers[4] == (0, [50])  # the batches still come
    _, _, batches = read_batches(tmp_path)
    assert [b[2] for b in batches] == [0, 1]
    _, payload = read_functions(tmp_path)
    assert (payload["why"], payload["batches"]) == ("stopped", 2)
    assert calls_of(payload["stats"], "__getitem__") == 3  # the three samples before the stop


def test_stop_recording_as_the_last_message_is_not_overwritten_by_the_loops_end(tmp_path, worker_state):
    run_worker(tmp_path, Numbers(4), [("task", 0, [0]), ("stop",)])
    _, payload = read_functions(tmp_path)
    assert (payload["why"], payload["batches"]) == ("stopped", 1)


def test_a_worker_started_after_its_cells_folder_is_gone_records_nothing_and_works(tmp_path, worker_state):
    """The folder is gone (the cell ended before the worker started): no files, the batches still
    come, and the worker leaves the process's hooks as they were (a profile it inherited stays:
    it is not recording; no SIGTERM handler of its own)."""
    import cProfile

    gone = tmp_path / "gone"
    inherited = cProfile.Profile()
    seen = {}

    def during(i):
        seen["profile"], seen["sigterm"] = sys.getprofile(), signal.getsignal(signal.SIGTERM)

    inherited.enable()
    try:
        answers = run_worker(gone, Numbers(4, during=during), [("task", 0, [1]), ("task", 1, [2])])
    finally:
        inherited.disable()
    assert answers == [(0, [10]), (1, [20])]
    assert not gone.exists() and os.listdir(tmp_path) == []
    assert seen["profile"] is inherited and seen["sigterm"] is signal.SIG_DFL


def test_a_batch_file_that_cannot_be_written_stops_the_recording_quietly(tmp_path, worker_state):
    """A write that fails (here: the worker's file descriptor made read-only under it) stops the
    recording: the loop goes on, no functions are written, and the descriptor is not closed."""
    state = {}

    def during(i):
        if i == 2 and "ro" not in state:
            (fd,) = [int(f) for f in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{f}").endswith(".batches")]
            state["ro"] = os.open(glob.glob(os.path.join(str(tmp_path), "*.batches"))[0], os.O_RDONLY)
            os.dup2(state["ro"], fd)
            state["fd"] = fd

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd")
    answers = run_worker(tmp_path, Numbers(6, during=during), [("task", 0, [1]), ("task", 1, [2]), ("task", 2, [3])])
    try:
        assert answers == [(0, [10]), (1, [20]), (2, [30])]
        _, _, batches = read_batches(tmp_path)
        assert [b[2] for b in batches] == [0]
        assert not glob.glob(os.path.join(str(tmp_path), "*.prof"))
        os.fstat(state["fd"])  # still open: nbprof did not close it (no second close of a reused number)
    finally:
        os.close(state["fd"])
        os.close(state["ro"])


# --------------------------------------------------------------------- SIGTERM


def _block_and_call(handler):
    """Call the worker's SIGTERM handler as the signal would, with SIGTERM blocked so that the
    signal it raises stays pending (read back, then discarded) instead of ending the test."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        handler(signal.SIGTERM, None)
        pending = signal.SIGTERM in signal.sigpending()
        disposition = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # discards the pending signal
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    return pending, disposition


def test_sigterm_in_a_batch_writes_the_functions_then_ends_the_worker_by_sigterm(tmp_path, worker_state):
    seen = {}

    def during(i):
        if i == 3:  # the second batch: torch's loop has set its signal handlers by now
            seen["handler"] = signal.getsignal(signal.SIGTERM)
            if getattr(seen["handler"], "__module__", None) == "nbprof.collect.data_worker":  # never another's
                seen["pending"], seen["after"] = _block_and_call(seen["handler"])

    run_worker(tmp_path, Numbers(6, during=during), [("task", 0, [1, 2]), ("task", 1, [3]), ("task", 2, [4])])
    assert getattr(seen["handler"], "__module__", None) == "nbprof.collect.data_worker", seen["handler"]
    assert seen["pending"] and seen["after"] is signal.SIG_DFL  # it dies of SIGTERM, as without nbprof
    _, payload = read_functions(tmp_path)
    assert (payload["why"], payload["batches"], payload["worker"]) == ("terminated", 1, WORKER)
    _, _, batches = read_batches(tmp_path)
    assert [b[2] for b in batches] == [0]  # the batch it was in never ended: no record


def test_a_sigterm_handler_of_the_users_worker_init_fn_is_left_alone(tmp_path, worker_state):
    mine = []
    seen = {}

    def handler(signum, frame):
        mine.append(signum)

    def init(worker_id):
        signal.signal(signal.SIGTERM, handler)

    def during(i):
        seen["handler"] = signal.getsignal(signal.SIGTERM)

    run_worker(tmp_path, Numbers(3, during=during), [("task", 0, [1])], init_fn=init)
    assert seen["handler"] is handler


def _terminated_worker(folder, started):
    """A forked worker running torch's own loop through WorkerLoop, whose first batch takes long."""
    import torch.utils.data._utils.worker  # noqa: F401 (torch's loop, as a worker imports it)
    from torch.utils.data import _DatasetKind

    from nbprof.collect.data_worker import WorkerLoop

    def during(i):
        open(started, "w").close()
        time.sleep(60)  # the main process terminates it before this ends

    q = queue.Queue()
    q.put((0, [0]))
    WorkerLoop(folder, 1, 1, 0)(_DatasetKind.Map, Numbers(2, during=during), q, queue.Queue(), threading.Event(),
                                True, collate, False, 0, None, 0, 1, False, None)


def test_a_worker_terminated_by_its_parent_writes_its_functions_first(tmp_path):
    """torch's loop installs its own C handler for SIGTERM, which exits at once (status 0) when the
    parent sends it: the recorder's handler must be the one that runs (it was set before the loop
    and lost: no functions)."""
    folder, process = _terminate_a_started_worker(tmp_path)
    assert process.exitcode == -signal.SIGTERM
    _, payload = read_functions(folder)
    assert (payload["why"], payload["worker"], payload["pid"], payload["batches"]) == ("terminated", 0, process.pid, 0)


def _terminate_a_started_worker(tmp_path, parents_handler=None):
    """A forked worker (``_terminated_worker``), terminated once its loop has begun; forked while
    this process's SIGTERM handler is ``parents_handler`` (when given). (its folder, the process)"""
    folder, started = str(tmp_path / "rec"), str(tmp_path / "started")
    os.mkdir(folder)
    before = signal.signal(signal.SIGTERM, parents_handler) if parents_handler is not None else None
    try:
        process = multiprocessing.get_context("fork").Process(target=_terminated_worker, args=(folder, started))
        process.start()
    finally:
        if parents_handler is not None:
            signal.signal(signal.SIGTERM, before)
    try:
        deadline = time.time() + 30
        while not os.path.exists(started) and time.time() < deadline:
            time.sleep(0.005)
        assert os.path.exists(started)
        process.terminate()
        process.join(30)
    finally:
        if process.is_alive():
            process.kill()
            process.join(10)
    return folder, process


def test_a_sigterm_handler_inherited_from_the_parent_does_not_stop_the_hand_over(tmp_path):
    """A forked worker inherits its parent's Python SIGTERM handler (Lightning's Trainer sets one),
    which torch's C handler replaces: terminated, the worker still writes its functions first."""
    parents = []
    folder, process = _terminate_a_started_worker(tmp_path, lambda signum, frame: parents.append(signum))
    assert process.exitcode == -signal.SIGTERM
    _, payload = read_functions(folder)
    assert (payload["why"], payload["pid"]) == ("terminated", process.pid)


# --------------------------------------------------------------------- the pieces


def test_torch_worker_loop_is_torchs_loop_in_a_fresh_and_in_a_forked_worker(monkeypatch):
    from torch.utils.data._utils import worker

    from nbprof.collect import data_worker

    torchs = worker._worker_loop
    monkeypatch.setattr(data_worker, "_original_loop", None)  # a spawned worker: the module imported afresh
    assert data_worker.torch_worker_loop() is torchs
    # a forked worker: the main process had put a WorkerLoop in torch's module and kept torch's
    monkeypatch.setattr(data_worker, "_original_loop", torchs)
    monkeypatch.setattr(worker, "_worker_loop", data_worker.WorkerLoop("x", 1, 1, 0))
    assert data_worker.torch_worker_loop() is torchs


def test_a_forked_worker_runs_torchs_loop_not_itself(tmp_path, worker_state, monkeypatch):
    from torch.utils.data._utils import worker

    from nbprof.collect import data_worker

    target = data_worker.WorkerLoop(str(tmp_path), LOADER, ITERATOR, EPOCH)
    monkeypatch.setattr(data_worker, "_original_loop", worker._worker_loop)
    monkeypatch.setattr(worker, "_worker_loop", target)
    assert run_worker(tmp_path, Numbers(3), [("task", 0, [2])], target=target) == [(0, [20])]
    assert [b[2] for b in read_batches(tmp_path)[2]] == [0]


def _recorder(folder):
    from nbprof.collect.data_worker import WorkerLoop, _Recorder

    return _Recorder(WorkerLoop(str(folder), LOADER, ITERATOR, EPOCH), WORKER)


def test_the_index_queue_passes_gets_arguments_and_other_attributes_through(tmp_path, worker_state):
    from nbprof.collect.data_worker import _IndexQueue

    q = queue.Queue()
    iq = _IndexQueue(q, _recorder(tmp_path))
    unblock = threading.Timer(3.0, q.put, args=("unblocked",))  # a get that ignored its timeout returns this
    unblock.start()
    try:
        with pytest.raises(queue.Empty):
            iq.get(timeout=0.01)
        with pytest.raises(queue.Empty):
            iq.get(True, 0.01)
    finally:
        unblock.cancel()
    iq.put((0, [1]))  # not a method of the wrapper: the queue's own
    assert iq.qsize() == 1 and iq.get() == (0, [1]) and q.qsize() == 0
    iq._recorder.finish("exit")


def test_the_data_queue_passes_puts_arguments_and_other_attributes_through(tmp_path, worker_state):
    from nbprof.collect.data_worker import _DataQueue

    q = queue.Queue(maxsize=1)
    dq = _DataQueue(q, _recorder(tmp_path))
    dq.put("first")
    unblock = threading.Timer(3.0, q.get)  # a put that ignored "don't block" goes through after this
    unblock.start()
    try:
        with pytest.raises(queue.Full):
            dq.put("second", block=False)
        with pytest.raises(queue.Full):
            dq.put("second", False)
    finally:
        unblock.cancel()
    assert dq.full() and dq.get() == "first" and dq.empty()
    dq._recorder.finish("exit")


def test_only_the_open_tasks_idx_pair_ends_a_batch(tmp_path, worker_state):
    """torch's loop puts ``(idx, data)``; other shapes (a list, three items), another idx, or
    anything put while no batch is open record nothing; the open one's pair records it."""
    from nbprof.collect.data_worker import _DataQueue, _IndexQueue

    rec = _recorder(tmp_path)
    iq, dq = _IndexQueue(queue.Queue(), rec), _DataQueue(queue.Queue(), rec)
    dq.put((9, "before any task"))
    iq._queue.put((5, [1, 2, 3]))
    assert iq.get() == (5, [1, 2, 3])
    for other in ((6, "another task's"), [5, "a list"], (5, "three", "items"), 5, "not a pair"):
        dq.put(other)
    dq.put((5, "the batch"))
    dq.put((5, "again"))  # the batch has ended
    rec.finish("exit")
    assert [dq._queue.get_nowait() for _ in range(8)][-2:] == [(5, "the batch"), (5, "again")]
    _, _, batches = read_batches(tmp_path)
    assert [(b[0], b[2], b[5]) for b in batches] == [(1, 5, 3)]


# --------------------------------------------------------------------- the inherited profiler


def test_a_profile_inherited_from_the_parent_is_released(worker_state):
    import cProfile

    from nbprof.collect.data_worker import _release_inherited_profiler

    parents = cProfile.Profile()
    parents.enable()
    try:
        assert sys.getprofile() is not None
        _release_inherited_profiler()
        assert sys.getprofile() is None
    finally:
        parents.disable()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+: nbprof's line hook is a sys.monitoring tool")
def test_nbprofs_line_tracer_is_released_and_another_tracer_kept(worker_state):
    from nbprof.collect.data_worker import _release_inherited_profiler
    from nbprof.collect.python_line_recorder import PythonLineRecorder
    from nbprof.collect.user_code import UserCode

    if sys.gettrace() is not None:
        pytest.skip("another tracer runs (a debugger or coverage)")
    recorder = PythonLineRecorder(UserCode(None))
    recorder.start()
    try:
        assert sys.gettrace() is not None  # nbprof's own trace function
        _release_inherited_profiler()
        assert sys.gettrace() is None
    finally:
        recorder.stop()

    def other(frame, event, arg):
        return None

    sys.settrace(other)  # a debugger's, say: not nbprof's, not the worker's to remove
    try:
        _release_inherited_profiler()
        assert sys.gettrace() is other
    finally:
        sys.settrace(None)
