"""flashschnet.openmm.ladder: a parallel-tempering run's temperature ladder (``TMIN:TMAX:N`` geometric, or an
increasing list) parsed and checked in one line naming the option, and the names of its rungs' files."""
from __future__ import annotations

import math

import pytest

from flashschnet.errors import InputError
from flashschnet.openmm.ladder import (check_ladder, check_names, geometric_ladder, parse_temperatures, rung_name,
                                       split_temperatures)


def test_a_geometric_ladder_has_a_constant_ratio_and_ends_exactly_at_the_top():
    temps = parse_temperatures("300:450:8")
    assert len(temps) == 8 and temps[0] == 300.0 and temps[-1] == 450.0
    ratios = [b / a for a, b in zip(temps, temps[1:])]
    assert ratios == pytest.approx([(450.0 / 300.0) ** (1 / 7)] * 7, rel=1e-12)
    assert geometric_ladder(300.0, 400.0, 3) == pytest.approx([300.0, math.sqrt(300.0 * 400.0), 400.0], rel=1e-12)
    assert [rung_name(t) for t in parse_temperatures("300:400:3")] == ["T300.0", "T346.4", "T400.0"]


def test_an_explicit_list_is_taken_as_given():
    assert parse_temperatures(" 300, 320,345 ") == [300.0, 320.0, 345.0]
    assert split_temperatures("300,,320") == [300.0, 320.0]
    assert split_temperatures("300:450:8") == (300.0, 450.0, 8)
    with pytest.raises(ValueError):
        split_temperatures("300,,320", skip_empty=False)
    with pytest.raises(ValueError):
        split_temperatures("300:450")


@pytest.mark.parametrize("text, needle", [
    ("hot", "give TMIN:TMAX:N"),
    ("300:450", "give TMIN:TMAX:N"),
    ("300:450:2.5", "give TMIN:TMAX:N"),
    ("300:450:1", "a ladder needs at least 2 temperatures, got 1"),
    ("300", "a ladder needs at least 2 temperatures (one temperature exchanges with nobody"),
    ("300,300", "strictly increasing, got 300 then 300"),
    ("450:300:3", "strictly increasing, got 450 then 300"),
    ("0,300", "positive finite number of kelvin, got 0"),
    ("300,nan", "positive finite number of kelvin, got nan"),
])
def test_a_bad_ladder_is_one_line_naming_the_option(text, needle):
    with pytest.raises(InputError) as exc:
        parse_temperatures(text, "--ladder")
    message = str(exc.value)
    assert message.startswith("--ladder") and needle in message and "\n" not in message, message


def test_rungs_closer_than_the_file_names_tell_apart_are_refused():
    check_names([300.0, 300.1, 301.0])
    assert check_ladder([300, 300.04]) == [300.0, 300.04]                  # a ladder, but not one of files
    with pytest.raises(InputError, match="two temperatures share the name T300.0"):
        check_names([300.0, 300.04])
