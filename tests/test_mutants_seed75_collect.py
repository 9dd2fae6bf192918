"""What seed 75's sample of mutants (collect part) showed no test held, each against an answer of its
own: pstats of the same DataLoader loop run without nbprof (the call counts of each edge), a
loader-like object's own attributes, a snapshot's name when none is given (Python's "<string>"
convention), thread names written into each rank's file by hand, Dask's own task stream of a folder read on a
client, and a snapshot recorded on Windows whose frames say by their paths which are the user's."""

from __future__ import annotations

import cProfile
import json
import pstats

import pytest

import nbprof
from nbprof.errors import TraceError

from .conftest import needs_torch
from .snapshots import frame, hand_snapshot, one_block_snapshot, write
from .test_mutants_seed62_collect import ranks_naming_their_threads

# ---------------------------------------------------------------- collect.cprofile.without_own_frames


def _fetch_directly(it, n: int) -> list[int]:
    """The user's own call of the iterator's ``_next_data`` (a second caller of it besides ``__next__``)."""
    sizes = []
    for _ in range(n):  # a loop, not a comprehension: before 3.12 that would be a frame (the caller) of its own
        sizes.append(len(it._next_data()))
    return sizes


def _mixed_loop() -> list[int]:
    from torch.utils.data import DataLoader

    it = iter(DataLoader(list(range(20)), batch_size=4))
    return [len(next(it)) for _ in range(3)] + _fetch_directly(it, 2)


@needs_torch
def test_a_wrapper_with_two_callers_shares_the_originals_calls_between_them_as_pstats_counts_them():
    # kills nbprof.collect.cprofile.x_without_own_frames__mutmut_78
    """A one-process DataLoader's ``_next_data`` called 3 times by ``__next__`` and 2 times by the
    user's own function: with nbprof's DataLoader watch the calls go through its wrapper, spliced out
    by ``without_own_frames``, which splits the wrapper->original edge between the wrapper's two
    callers by their calls. Each caller's edge has the call counts pstats gives the same loop run
    without nbprof (3 and 2, not all 5 twice), and the two shares add up to the original's row."""
    from torch.utils.data import dataloader as dl

    from nbprof.collect.cprofile import raw_stats, without_own_frames
    from nbprof.collect.data_loading import DataLoaderWatch

    code = dl._SingleProcessDataLoaderIter._next_data.__code__
    key = (code.co_filename, code.co_firstlineno, code.co_name)
    plain = cProfile.Profile()
    plain.enable()
    assert _mixed_loop() == [4, 4, 4, 4, 4]
    plain.disable()
    expected = {caller[2]: edge[:2] for caller, edge in pstats.Stats(plain).stats[key][4].items()}
    assert expected == {"__next__": (3, 3), "_fetch_directly": (2, 2)}

    watch = DataLoaderWatch()
    watch.install()
    try:
        prof = cProfile.Profile()
        prof.enable()
        assert _mixed_loop() == [4, 4, 4, 4, 4]
        prof.disable()
    finally:
        watch.remove()
    cc, nc, tt, ct, callers = without_own_frames(raw_stats(prof))[key]
    assert (nc, cc) == (5, 5)
    got = {caller[2]: (round(edge[0], 9), round(edge[1], 9)) for caller, edge in callers.items()}
    assert got == expected
    assert sum(e[2] for e in callers.values()) == pytest.approx(tt, rel=1e-9, abs=1e-12)
    assert sum(e[3] for e in callers.values()) == pytest.approx(ct, rel=1e-9, abs=1e-12)


# ---------------------------------------------------------------- collect.data_loading._loader_info


class _LoaderLike:
    """A loader of the user's own that is no ``DataLoader`` (no ``multiprocessing_context``) but
    hands out torch's one-process iterator over itself: it has what that iterator reads."""

    def __init__(self, data: list[int], batch_size: int) -> None:
        from torch.utils.data import SequentialSampler
        from torch.utils.data._utils.collate import default_collate
        from torch.utils.data.sampler import BatchSampler

        self.dataset = data
        self.batch_size = batch_size
        self.num_workers = 0
        self._dataset_kind = 0
        self._IterableDataset_len_called = None
        self._auto_collation = True
        self.drop_last = False
        self._index_sampler = BatchSampler(SequentialSampler(data), batch_size, False)
        self.pin_memory = False
        self.pin_memory_device = ""
        self.timeout = 0
        self.collate_fn = default_collate
        self.generator = None
        self.persistent_workers = False

    def __iter__(self):
        from torch.utils.data.dataloader import _SingleProcessDataLoaderIter

        return _SingleProcessDataLoaderIter(self)


@needs_torch
def test_a_loader_like_object_without_a_multiprocessing_context_is_described_from_its_own_attributes():
    # kills nbprof.collect.data_loading.x__loader_info__mutmut_19
    """A run iterates a loader-like object (10 items, 4 a batch) that is not a DataLoader and has no
    ``multiprocessing_context``: the watch's record describes it from what it has (a list of 10,
    4 a batch, no workers, so no start method) instead of failing at the end of the run."""
    from nbprof.collect.data_loading import DataLoaderWatch

    loader = _LoaderLike(list(range(10)), 4)
    assert not hasattr(loader, "multiprocessing_context")
    watch = DataLoaderWatch()
    watch.install()
    try:
        assert [len(b) for b in loader] == [4, 4, 2]
    finally:
        watch.remove()
    record = watch.collect()
    [info] = record.loaders
    assert (info.number, info.name, info.dataset, info.iterable, info.num_workers, info.batch_size,
            info.prefetch_factor, info.persistent_workers, info.pin_memory, info.start_method) == \
        (1, "DataLoader 1", "list", False, 0, 4, None, False, False, "")


# ---------------------------------------------------------------- collect.snapshot.parse_snapshot


def test_a_snapshot_given_without_a_source_is_named_snapshot_in_angle_brackets():
    # kills nbprof.collect.snapshot.x_parse_snapshot__mutmut_2
    """A snapshot object parsed with no file behind it is called ``<snapshot>`` (as Python calls
    code with no file ``<string>``): its data's source, and the start of the one-line error about an
    object that is no snapshot."""
    from nbprof.collect.snapshot import parse_snapshot

    assert parse_snapshot(hand_snapshot()).source == "<snapshot>"
    with pytest.raises(TraceError) as e:
        parse_snapshot(42)
    assert str(e.value).startswith("<snapshot>: not a CUDA memory snapshot")


# ---------------------------------------------------------------- collect.trace_ranks._part_fields


def test_a_saved_folder_read_back_keeps_each_ranks_thread_names(tmp_path):
    # kills nbprof.collect.trace_ranks.x__part_fields__mutmut_9
    """Two ranks whose files name their threads 1000 and 2000 (thread_name metadata events, names
    chosen here), merged and saved; the saved file read back has both ranks, and each rank's part
    names its threads as its own file did (thread ids as integers)."""
    folder, names = ranks_naming_their_threads(tmp_path)
    out = nbprof.load_trace(folder, workers=0, progress=False).save(tmp_path / "merged.json")
    with open(out) as f:
        written = json.load(f)["nbprofRanks"]["parts"]
    assert [p["thread_names"] for p in written] == [{str(t): n for t, n in names[r].items()} for r in (0, 1)]
    back = nbprof.load_trace(out, progress=False)
    assert sorted(back.events["rank"].unique().tolist()) == [0, 1]
    assert [(p.rank, p.thread_names) for p in back.meta.parts] == [(r, names[r]) for r in (0, 1)]


# ---------------------------------------------------------------- cluster.loading.load_folder


def test_a_folder_loaded_with_a_dask_client_reads_its_ranks_on_that_client(tmp_path):
    # kills nbprof.cluster.loading.x_load_folder__mutmut_17
    """``load_trace(folder, client=...)`` reads each rank on the user's Dask cluster: Dask's own
    task stream (distributed.get_task_stream) records one ``rank_summary`` task per rank file, and
    the tables equal the folder read in this process. An in-process cluster (threads), so the test
    stays in the fast tier; the slow tier's test_workers_and_dask_give_the_same_tables runs one of
    worker processes."""
    distributed = pytest.importorskip("distributed")
    folder, _ = ranks_naming_their_threads(tmp_path)
    local = nbprof.load_trace(folder, workers=0, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as stream:
            on_dask = nbprof.load_trace(folder, client=client, progress=False)
    ran = [str(t["key"]) for t in stream.data]
    assert sum(k.startswith("rank_summary-") for k in ran) == 2, ran
    assert on_dask.key_averages().equals(local.key_averages())


# ---------------------------------------------------------------- collect.user_code.is_recorded_user_file


def test_a_snapshot_recorded_on_windows_puts_a_block_on_the_users_line_not_site_packages(tmp_path):
    # kills nbprof.collect.user_code.xǁUserCodeǁis_recorded_user_file__mutmut_23
    """A snapshot recorded on Windows (backslashed paths, not on this machine): the block's stack is
    a library's frame under ``Lib\\site-packages`` (innermost) called from the user's ``train.py``
    line 7. The block belongs to the user's line, the first frame that is not a library's."""
    lib = "C:\\Users\\me\\venv\\Lib\\site-packages\\transformers\\models\\bert.py"
    mine = "C:\\Users\\me\\project\\train.py"
    stack = [frame(lib, 120, "forward"), frame(mine, 7, "train_step")]
    snap = one_block_snapshot(stack)
    blocks = nbprof.load_snapshot(write(snap, tmp_path / "s.pickle")).blocks()
    assert len(blocks) == 1
    row = blocks.iloc[0]
    assert (row["file"], int(row["line"]), row["function"]) == (mine, 7, "train_step")
