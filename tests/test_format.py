"""nbprof.format, value by value: every expected text is written out by hand from the rule in the
function's docstring (units, digits, where a unit changes, what "does not apply" reads)."""

from __future__ import annotations

import math
import re

import pytest

from nbprof import format as F


@pytest.mark.parametrize("us,text", [
    (None, "—"), (math.nan, "—"), (0, "0"), (0.0, "0"),
    (0.04, "0.0 µs"), (812.44, "812.4 µs"), (999.94, "999.9 µs"),
    (1000, "1.00 ms"), (3210, "3.21 ms"), (999_999, "1000.00 ms"),
    (1_000_000, "1.000 s"), (1_842_000, "1.842 s"), (1_000_500.5, "1.001 s"),  # (÷1e6 exactly: 1.0005005)
    (-5, "-5.0 µs"), (-1500, "-1.50 ms"), (-2_000_000, "-2.000 s"),
])
def test_fmt_us(us, text):
    assert F.fmt_us(us) == text


def test_fmt_s_is_fmt_us_of_seconds():
    assert (F.fmt_s(0.5), F.fmt_s(2), F.fmt_s(0.0000123), F.fmt_s(0)) == ("500.00 ms", "2.000 s", "12.3 µs", "0")
    assert F.fmt_s(1.0004995) == "1.000 s"  # x 1e6 exactly (1.0004995 s, not 1.0005005)


@pytest.mark.parametrize("n,number,scale", [
    (1024, "1.00", "K"), (1536, "1.50", "K"), ((1 << 20) - 1, "1024.00", "K"), (1 << 20, "1.00", "M"),
    (4.61 * 2**20, "4.61", "M"), (1 << 30, "1.00", "G"), (-2048, "-2.00", "K"), (-(3 << 30), "-3.00", "G"),
])
def test_fmt_bytes_in_binary_units(n, number, scale):
    """Binary sizes: 1 K = 1,024 bytes (spelled KB or KiB)."""
    assert re.fullmatch(rf"{re.escape(number)} {scale}i?B", F.fmt_bytes(n)), F.fmt_bytes(n)


@pytest.mark.parametrize("n,text", [(None, "—"), (math.nan, "—"), (0, "0 B"), (1, "1 B"), (1023, "1023 B"),
                                    (1023.7, "1023 B"), (-1023, "-1023 B")])
def test_fmt_bytes_below_a_kibibyte(n, text):
    assert F.fmt_bytes(n) == text


def test_fmt_count():
    assert (F.fmt_count(0), F.fmt_count(999), F.fmt_count(1000), F.fmt_count(1_234_567.8)) == (
        "0", "999", "1,000", "1,234,567")


@pytest.mark.parametrize("n,text", [
    (0, "—"), (None, "—"), (1, "1 FLOP"), (999, "999 FLOP"), (1000, "1.00 kFLOP"), (999_999, "1000.00 kFLOP"),
    (1e6, "1.00 MFLOP"), (1e9, "1.00 GFLOP"), (2.5e9, "2.50 GFLOP"), (1e12, "1.00 TFLOP"), (3e12, "3.00 TFLOP"),
    (4.5e15, "4500.00 TFLOP"),
])
def test_fmt_flops(n, text):
    assert F.fmt_flops(n) == text


@pytest.mark.parametrize("share,text", [(None, "—"), (math.nan, "—"), (0, "0.0%"), (0.613, "61.3%"),
                                        (0.0005, "0.1%"), (1, "100.0%"), (1.5, "150.0%")])
def test_fmt_share(share, text):
    assert F.fmt_share(share) == text


@pytest.mark.parametrize("x,text", [(None, "—"), (math.nan, "—"), (math.inf, "gone"), (1e300, "gone"),
                                    (123456.0, "123456.00x"),
                                    (0, "new"), (0.5, "0.50x"), (2.97, "2.97x"), (1, "1.00x")])
def test_fmt_ratio(x, text):
    assert F.fmt_ratio(x) == text


def test_fmt_decimal():
    assert (F.fmt_decimal(0.5), F.fmt_decimal(2), F.fmt_decimal(1.005), F.fmt_decimal(-0.25)) == (
        "0.50", "2.00", "1.00", "-0.25")


def test_signed_puts_the_sign_before_the_magnitude():
    s = F.signed(F.fmt_us)
    assert (s(1200), s(-3), s(0), s(math.nan), s(None)) == ("+1.20 ms", "−3.0 µs", "±0", "—", "—")
    assert F.signed(F.fmt_count)(-1234) == "−1,234"
    assert (F.signed(F.fmt_share)(0.5), F.signed(F.fmt_share)(-0.5)) == ("+50.0%", "−50.0%")  # |v| < 1 too


def test_formatter_by_unit():
    assert F.formatter("time_us")(1500) == "1.50 ms"
    assert F.formatter("time_s")(2) == "2.000 s"
    assert F.formatter("count")(12345) == "12,345"
    assert F.formatter("decimal")(0.125) == "0.12"
    assert F.formatter("flops")(2e9) == "2.00 GFLOP"
    assert F.formatter("share")(0.25) == "25.0%"
    assert F.formatter("ratio")(0) == "new"
    assert F.formatter("text")(42) == "42"
    assert F.formatter("name", width=5)("abcdefgh") == "ab..."
    assert F.formatter("kernel", width=200)("void at::native::k<float>(float*)") == "k<float>"
    assert F.formatter("location")("/a/b/c/d.py:3(f)") == "…/c/d.py:3(f)"
    assert re.fullmatch(r"2\.00 Ki?B", F.formatter("bytes")(2048))


def test_formatter_says_what_does_not_apply():
    """Numeric units read NaN and None as "—"; text units show the value as it is."""
    for unit in ("time_us", "time_s", "bytes", "count", "decimal", "flops", "share"):
        assert F.formatter(unit)(math.nan) == "—", unit
        assert F.formatter(unit)(None) == "—", unit
    assert F.formatter("text")(math.nan) == "nan"
    assert F.formatter("name")(None) == "None"


def test_formatter_with_sign_and_unknown_units():
    assert F.formatter("time_us", sign=True)(-1500) == "−1.50 ms"
    assert F.formatter("count", sign=True)(3) == "+3"
    assert F.formatter("count", sign=True)(math.nan) == "—"
    assert F.formatter("time_us", sign=False)(-1500) == "-1.50 ms"
    with pytest.raises(ValueError, match=r"^unknown unit 'bogus'; one of text, name, kernel, location, time_us"):
        F.formatter("bogus")
    assert set(F.UNITS) == {"text", "name", "kernel", "location", "time_us", "time_s", "bytes", "count",
                            "decimal", "flops", "share", "ratio", "ncalls"}


@pytest.mark.parametrize("column,unit", [
    ("self_cpu_us", "time_us"), ("dur_us", "time_us"), ("tottime_s", "time_s"), ("cpu_mem_bytes", "bytes"),
    ("flops", "flops"), ("count", "count"), ("bus", "count"), ("calls", "count"), ("total_flops", "count"),
])
def test_unit_of(column, unit):
    assert F.unit_of(column) == unit


@pytest.mark.parametrize("text,width,short", [
    ("abc", 3, "abc"), ("abcd", 3, "a..."), ("abcdefgh", 6, "abc..."), ("abcdefgh", 8, "abcdefgh"),
    ("abcdefgh", 7, "abcd..."), ("ab", 1, "ab"[:1] + "..."), (12345, 4, "1..."),
])
def test_shorten(text, width, short):
    assert F.shorten(text, width) == short


@pytest.mark.parametrize("name,short", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
     "vectorized_elementwise_kernel<4, FillFunctor<float>, Array<char*, 1> >"),
    ("void (anonymous namespace)::softmax_warp_forward<float>(float*, int)", "softmax_warp_forward<float>"),
    ("void f<(int)3>(float)", "f<(int)3>"),  # a "(" inside the template's brackets is not the argument list
    ("void a>b(c)", "a>b"),  # a stray ">" does not make the depth negative
    ("void (x)", "(x)"),  # a "(" first is not an argument list
    ("void a(x)", "a"),  # ... the second is
    ("void f<a<b>(c)>(x)", "f<a<b>(c)>"),  # nested brackets: the depth counts each one
    ("Memset (Device)", "Memset (Device)"),  # not a C++ signature: its parentheses stay
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ("std::vector<c10::Half> ns1::ns_2::op", "vector<Half> op"),
])
def test_short_kernel_name(name, short):
    assert F.short_kernel_name(name, 200) == short


def test_short_kernel_name_cuts_at_the_width_with_an_ellipsis():
    assert F.short_kernel_name("void k<int>(int)", 4) == "k<i…"
    assert F.short_kernel_name("void k<int>(int)", 6) == "k<int>"
    assert F.short_kernel_name("x" * 61) == "x" * 59 + "…"  # 60 by default
    assert F.short_kernel_name("x" * 60) == "x" * 60


@pytest.mark.parametrize("path,keep,short", [
    ("", 2, ""), ("<string>", 2, "<string>"), ("<frozen a/b/c/d>", 2, "<frozen a/b/c/d>"), ("~", 2, "~"),
    ("/a/b", 2, "/a/b"), ("a/b/c", 2, "a/b/c"),
    ("/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", 2, "…/modules/module.py"),
    ("/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", 1, "…/module.py"),
    ("/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", 3, "…/nn/modules/module.py"),
    ("C:\\work\\proj\\train.py", 2, "…/proj/train.py"), ("w/x/y/z.py", 2, "…/y/z.py"),
])
def test_short_path(path, keep, short):
    assert F.short_path(path, keep) == short


@pytest.mark.parametrize("location,short", [
    ("/usr/lib/python3.11/site-packages/torch/nn/modules/module.py:1501(_call_impl)",
     "…/modules/module.py:1501(_call_impl)"),
    ("main.py:1(<module>)", "main.py:1(<module>)"),
    ("{built-in method time.sleep}", "{built-in method time.sleep}"),
    ("/a/b/c.py:12(f(x))", "…/b/c.py:12(f(x))"),
    ("/a/b/c.py:x(f)", "/a/b/c.py:x(f)"),  # not "file:line(function)": as it is
])
def test_short_location(location, short):
    assert F.short_location(location) == short


def test_esc_escapes_markup_and_both_quotes():
    assert F.esc('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    assert F.esc(3) == "3" and F.esc(None) == "None"
