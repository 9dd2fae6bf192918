"""Numbers as the report shows them, read back (instead of formatting the expected number with
nbprof's own formatter): "117.19 KiB" -> 120,002 bytes ± the last digit, "3.21 ms" -> 3,210 µs."""

from __future__ import annotations

import re

# binary sizes, with or without the "i" ("MB" in torch's tables is 2**20 bytes too)
SIZE = {"B": 1, "KB": 1 << 10, "KiB": 1 << 10, "MB": 1 << 20, "MiB": 1 << 20, "GB": 1 << 30, "GiB": 1 << 30,
        "TB": 1 << 40, "TiB": 1 << 40}
TIME_US = {"µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
_NUMBER = r"[-+−]?[\d,]*\.?\d+"
BYTES = rf"{_NUMBER} (?:{'|'.join(SIZE)})\b"
DURATION = rf"(?:{_NUMBER} (?:µs|us|ms|s)\b|0\b)"


def _split(text: str) -> tuple[float, str, int]:
    number, _, unit = text.strip().partition(" ")
    number = number.replace(",", "").replace("−", "-")
    decimals = len(number.partition(".")[2])
    return float(number), unit, decimals


def shows_bytes(text: str, nbytes: float) -> bool:
    """``text`` ("117.19 KiB", "512 B") is ``nbytes`` rounded to the digits it shows."""
    value, unit, decimals = _split(text)
    size = SIZE[unit]
    return abs(value * size - nbytes) <= 0.5 * 10 ** -decimals * size + 1e-9


def shows_us(text: str, us: float) -> bool:
    """``text`` ("812.4 µs", "3.21 ms", "1.842 s", "0") is ``us`` µs rounded to the digits it shows."""
    if text.strip() == "0":
        return us == 0
    value, unit, decimals = _split(text)
    scale = TIME_US[unit]
    return abs(value * scale - us) <= 0.5 * 10 ** -decimals * scale + 1e-9


def find(pattern: str, text: str) -> str:
    """The first match of ``pattern`` (with one group) in ``text``; fails the test when none."""
    m = re.search(pattern, text)
    assert m, (pattern, text[:300])
    return m.group(1)
