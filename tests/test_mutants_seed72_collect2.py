"""What seed 72's sample of mutants (docs/testing.md) showed no test held in the collectors (second
part): the end of a DataLoader watch whose workers' folder something else already removed (a cell
or a cleaner emptying the temporary folder), and whether torch can profile CUDA in an environment
where torch is not installed at all. The answers are the test's own: the batches the loop received
(counted by the test), the watch's folder removed by the test, and a real Python environment
built without torch (this one's packages, torch's left out)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

from .conftest import needs_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------------------------ DataLoader workers


@needs_torch
def test_a_watch_whose_folder_was_removed_away_still_collects_the_loops_waits():
    """A loader of 10 samples, 4 a batch (3 batches), one forked worker, iterated while the watch is
    installed; then the watch's folder of the workers' files is removed by something else (a cleaner
    of the temporary folder). ``collect()`` does not raise: the loader and the loop's 3 batches and its
    end are there, no worker's functions (their files are gone). (The test does not point
    ``tempfile.tempdir`` at a folder of its own: a forked DataLoader worker under pytest-xdist then
    never answers.)"""
    import torch
    from torch.utils.data import DataLoader, Dataset

    from nbprof.collect.data_loading import DataLoaderWatch

    class Ten(Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return torch.tensor([i])

    loader = DataLoader(Ten(), batch_size=4, num_workers=1, multiprocessing_context="fork")
    watch = DataLoaderWatch()
    watch.install()
    try:
        seen = [b[:, 0].tolist() for b in loader]
    finally:
        watch.remove()
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    folder = watch._folder  # the workers wrote their files there
    assert folder is not None and os.listdir(folder)
    shutil.rmtree(folder)  # a cleaner empties the temporary folder

    record = watch.collect()

    assert [(x.num_workers, x.batch_size) for x in record.loaders] == [(1, 4)]
    assert sorted((w[2], w[6]) for w in record.waits) == [(-1, "stop"), (0, "ok"), (1, "ok"), (2, "ok")]
    assert record.workers == []
    assert not os.path.exists(folder)


# ------------------------------------------------------------------------------ CUDA without torch


def test_without_torch_installed_torch_cannot_profile_cuda(tmp_path):
    """A real environment where torch is not installed: this Python without its site (``-S``), the
    packages of this environment on its path but torch's (torch, functorch, torchgen and those that
    need torch). There, torch cannot profile CUDA, and asking did not import anything named torch."""
    torchy = ("torch", "functorch", "torchgen", "pytorch_lightning", "lightning", "torchmetrics", "torchvision",
              "torchaudio", "triton", "nvidia")
    packages = tmp_path / "packages"
    packages.mkdir()
    for where in dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]):
        for name in os.listdir(where):
            top = name.split("-")[0].split(".")[0].lower()
            if top in torchy or name.endswith(".pth") or (packages / name).exists():
                continue
            os.symlink(os.path.join(where, name), packages / name)
    code = ("import importlib.util, sys\n"
            "assert importlib.util.find_spec('torch') is None, 'torch is there'\n"
            "from nbprof.collect.torch_live import cuda_available\n"
            "print(cuda_available(), sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(packages)]))
    env.pop("VIRTUAL_ENV", None)
    # cwd: the project's root, where a mutation run's trampolines find their configuration
    out = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "[]"]

