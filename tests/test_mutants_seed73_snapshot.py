"""Mutation-testing follow-up (seed 73, snapshot part): the bound on a gzip'd memory snapshot's
decompressed pickle is the same bound as on a plain one: a pickle of exactly ``max_bytes`` bytes is
read, whether or not it was gzip'd; one byte more than the limit is refused."""

from __future__ import annotations

import gzip
import pickle

import pytest

import nbprof
from nbprof.errors import TraceError

from .snapshots import hand_snapshot


def test_a_gzipped_snapshot_whose_pickle_is_exactly_max_bytes_is_read_as_the_plain_one_is(tmp_path):
    data = pickle.dumps(hand_snapshot())
    plain, gz = tmp_path / "s.pickle", tmp_path / "s.pickle.gz"
    plain.write_bytes(data)
    gz.write_bytes(gzip.compress(data))
    expected = nbprof.load_snapshot(plain, max_bytes=len(data)).active_memory()
    got = nbprof.load_snapshot(gz, max_bytes=len(data)).active_memory()
    assert len(got) == len(expected) > 0
    assert got["active_bytes"].tolist() == expected["active_bytes"].tolist()
    with pytest.raises(TraceError, match="decompressed"):  # one byte under the pickle's size: refused
        nbprof.load_snapshot(gz, max_bytes=len(data) - 1)
