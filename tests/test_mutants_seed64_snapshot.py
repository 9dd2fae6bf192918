"""What seed 64's sample of mutants (docs/testing.md) showed no test held in the memory snapshot's
reading and tables: the blocks held at the end named by their address (and, found on the way, the
columns of ``blocks`` in the order it documents), a reading failure with no message of its own
still one line, and sizes that no 64-bit sum can hold refused in one line (not a traceback, nor
active bytes wrapped negative). Each against a snapshot built and counted by hand
(tests/snapshots.py) or a file object that fails as a disk can."""

from __future__ import annotations

import io

import pytest

import nbprof
from nbprof.errors import TraceError

from .snapshots import KiB, MiB, SEG_A, SEG_B, block, entry, hand_snapshot, segment, stack, write


def test_the_blocks_at_the_end_are_named_by_their_address(tmp_path):
    """hand_snapshot() holds at the end a2 (1 MiB at SEG_A + 512 KiB), a3 (256 KiB at SEG_A, a1's
    address again) and y (100 KiB asked, SEG_B): biggest first, those three addresses, counted by hand."""
    end = nbprof.load_snapshot(write(hand_snapshot(), tmp_path / "hand.pickle")).blocks("end")
    assert end["address"].tolist() == [SEG_A + 512 * KiB, SEG_A, SEG_B]
    assert end["requested_bytes"].tolist() == [MiB, 256 * KiB, 100 * KiB]


@pytest.mark.parametrize("at", ["end", "peak", 140])
def test_the_blocks_columns_are_in_the_order_blocks_documents(tmp_path, at):
    """``SnapshotProfile.blocks`` documents its columns in this order (``device, address,
    requested_bytes, size_bytes, state, alloc_us, free_us, cell, file, line, function, frames``),
    whichever moment is asked."""
    table = nbprof.load_snapshot(write(hand_snapshot(), tmp_path / "hand.pickle")).blocks(at)
    assert list(table.columns) == ["device", "address", "requested_bytes", "size_bytes", "state", "alloc_us",
                                   "free_us", "cell", "file", "line", "function", "frames"]


class _FailingDisk(io.RawIOBase):
    """A file whose every read fails with a bare ``OSError()`` (no errno, no text)."""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        raise OSError()


def test_a_read_that_fails_without_a_message_is_one_line_naming_the_error():
    """``load_data_only`` promises one TraceError line whatever goes wrong: a read failing with an
    exception that has no text of its own is named by its type, ``(OSError)``."""
    from nbprof.collect.snapshot import load_data_only

    with pytest.raises(TraceError) as e:
        load_data_only(io.BufferedReader(_FailingDisk()), "disk.pickle")
    assert str(e.value) == "disk.pickle: not a readable pickle (OSError)"


def _past_64_bits_before_the_history() -> dict:
    """A block held from before the history (1 byte asked) and an entry freeing what was
    allocated before it (2**63 - 1 bytes, the largest int64): 2**63 bytes at the start, one past
    what int64 holds."""
    seg = segment(SEG_B, 2 * MiB, [block(SEG_B, 512, 1, "active_allocated")])
    return {"segments": [seg], "device_traces": [[entry("free_completed", SEG_B + MiB, (1 << 63) - 1, 10)]]}


def _past_64_bits_in_the_history() -> dict:
    """Two allocations of 3 * 2**61 bytes each (each an int64): 3 * 2**62 bytes active after the
    second, past 2**63; int64 arithmetic would wrap it negative."""
    big = 3 << 61
    trace = [entry("alloc", SEG_A, big, 10, stack(3)), entry("alloc", SEG_A + big, big, 20, stack(4))]
    return {"segments": [], "device_traces": [trace]}


@pytest.mark.parametrize("build", [_past_64_bits_before_the_history, _past_64_bits_in_the_history])
def test_sizes_past_what_64_bits_can_sum_are_one_line(tmp_path, build):
    """Each size fits int64 but their sum does not (see each snapshot's docstring): the file is
    refused when read, in one TraceError line, as a single number past 64 bits is, not by a
    traceback when the report is drawn nor by active bytes wrapped negative."""
    path = write(build(), tmp_path / "big.pickle")
    with pytest.raises(TraceError) as e:
        nbprof.load_snapshot(path)
    text = str(e.value)
    assert "\n" not in text and path in text and "64 bits" in text


def test_sizes_a_64_bit_sum_holds_are_read(tmp_path):
    """The first shape a little smaller: a free of 2**61 bytes allocated before the history and a
    held block of 1 byte: 2**61 + 1 bytes at the start, 1 byte (the block) after the free."""
    seg = segment(SEG_B, 2 * MiB, [block(SEG_B, 512, 1, "active_allocated")])
    snap = {"segments": [seg], "device_traces": [[entry("free_completed", SEG_B + MiB, 1 << 61, 10)]]}
    p = nbprof.load_snapshot(write(snap, tmp_path / "s.pickle"))
    assert p.active_memory()["active_bytes"].tolist() == [1]
    assert sorted(p.blocks(5)["requested_bytes"].tolist()) == [1, 1 << 61]  # before the free: both alive
