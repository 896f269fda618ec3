"""aot/gates/units.py: budget values as written on a command line, and measurements as shown."""
import pytest

from aot.errors import ArgumentError
from aot.gates.units import format_ms, format_percent, format_size, parse_duration_ms, parse_percent, parse_size


@pytest.mark.parametrize("text, expected", [
    ("5MB", 5_000_000), ("5 MB", 5_000_000), ("5mb", 5_000_000), ("1.5KB", 1500), ("2GB", 2_000_000_000),
    ("1KiB", 1024), ("1.5MiB", 1_572_864), ("1GiB", 1 << 30), ("300", 300), ("300B", 300), ("4K", 4096),
    ("0", 0),
])
def test_parses_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("12ms", 12.0), ("12", 12.0), ("0.5s", 500.0), ("250us", 0.25), ("250µs", 0.25), ("1e1ms", 10.0),
])
def test_parses_durations_in_ms(text, expected):
    assert parse_duration_ms(text) == pytest.approx(expected)


def test_a_bare_duration_takes_the_options_unit():
    assert parse_duration_ms("2", bare_unit="s") == 2000.0


@pytest.mark.parametrize("text, expected", [("5%", 5.0), ("5", 5.0), ("0.5 %", 0.5), ("0%", 0.0)])
def test_parses_percentages(text, expected):
    assert parse_percent(text) == expected


@pytest.mark.parametrize("parse, text, says", [
    (parse_size, "5XB", "unknown size unit 'XB'"),
    (parse_size, "MB", "is not a size"),
    (parse_size, "-5MB", "is not a size"),
    (parse_size, "", "is not a size"),
    (parse_size, "5 M B", "is not a size"),
    (parse_duration_ms, "12min", "unknown time unit 'min'"),
    (parse_duration_ms, "fast", "is not a duration"),
    (parse_percent, "5ms", "takes no unit but '%'"),
    (parse_percent, "nan", "is not a percentage"),
])
def test_refuses_bad_values_naming_them(parse, text, says):
    with pytest.raises(ArgumentError, match=says) as err:
        parse(text)
    assert f"'{text}'" in str(err.value)


def test_formats_sizes_in_decimal_units():
    assert format_size(812) == "812 B"
    assert format_size(242_226) == "242.23 KB"
    assert format_size(4_800_000) == "4.80 MB"
    assert format_size(3 * 10 ** 9) == "3.00 GB"
    assert format_size(-1500) == "-1.50 KB"
    assert format_size(None) == "-"


def test_formats_times_and_percentages():
    assert format_ms(0.0523) == "0.052 ms"
    assert format_ms(250.0) == "250.0 ms"
    assert format_percent(4.96) == "+5.0%"
    assert format_percent(-12.34) == "-12.3%"
    assert format_percent(-0.001) == "+0.0%"  # never "-0.0%"
    assert format_percent(None) == "-"
