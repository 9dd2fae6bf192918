"""Seed 72's survivors in ``nbprof.run.runner``: ``torch_profile`` gives the profile it builds the
``--snapshot`` history the run recorded, so ``TorchProfile.snapshot()`` replays it (checked against a
snapshot built by hand with its numbers counted by hand, tests/snapshots.py)."""

from __future__ import annotations

import pytest

from nbprof.collect.snapshot import parse_snapshot
from nbprof.errors import OptionError
from nbprof.run.runner import torch_profile
from nbprof.settings import TorchOptions

from .snapshots import HAND_ACTIVE_KIB, HAND_RESERVED_MIB, KiB, MiB, hand_snapshot


def test_a_recorded_snapshot_is_the_profiles_snapshot():
    recorded = parse_snapshot(hand_snapshot(), "--snapshot")
    p = torch_profile(None, profiler=None, options=TorchOptions(snapshot=True), notes=[], wall_s=None,
                      snapshot=recorded)
    m = p.snapshot().active_memory()
    assert (m["active_bytes"] // KiB).tolist() == HAND_ACTIVE_KIB
    assert (m["reserved_bytes"] // MiB).tolist() == HAND_RESERVED_MIB


def test_a_profile_without_a_snapshot_says_so():
    p = torch_profile(None, profiler=None, options=TorchOptions(), notes=[], wall_s=None)
    with pytest.raises(OptionError, match="no memory snapshot"):
        p.snapshot()
