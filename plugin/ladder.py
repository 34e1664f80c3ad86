"""The temperature ladder of a parallel-tempering run: ``--temperatures 300:450:8`` (a geometric ladder) or
``--temperatures 300,320,345`` (an explicit, increasing list), in kelvin; and the names its files use (a rung's
trajectory, :func:`rung_name`; ``exchanges.csv``'s columns, :data:`EXCHANGE_COLUMNS`).

Below both the ensemble that writes those files (:mod:`flashschnet.openmm.ensemble`) and the readers of run
directories (:mod:`flashschnet.openmm.run_reader`, :mod:`flashschnet.openmm.run_checks`), which import it and
never the ensemble."""
from __future__ import annotations

import math
from typing import List, Sequence, Tuple, Union

from ..errors import InputError

#: ``exchanges.csv``'s columns: one row per tried swap of rungs ``pair`` and ``pair + 1`` (written by
#: :mod:`flashschnet.openmm.ensemble.records`)
EXCHANGE_COLUMNS = ["step", "pair", "T_lo_K", "T_hi_K", "walker_lo", "walker_hi", "probability", "accepted"]

#: fewest rungs a ladder may have (one temperature exchanges with nobody)
MIN_RUNGS = 2


def geometric_ladder(t_min: float, t_max: float, n: int, option: str = "--temperatures") -> List[float]:
    """``n`` temperatures from ``t_min`` to ``t_max`` (K) with a constant ratio between neighbours (equal
    acceptance between neighbours when the heat capacity does not change with the temperature)."""
    if n < MIN_RUNGS:
        raise InputError(f"{option}: a ladder needs at least {MIN_RUNGS} temperatures, got {n}")
    ratio = (t_max / t_min) ** (1.0 / (n - 1))
    temps = [t_min * ratio ** k for k in range(n)]
    temps[-1] = float(t_max)               # exactly the top, whatever the rounding of the powers
    return temps


def check_ladder(temps: Sequence[float], option: str = "--temperatures") -> List[float]:
    """``temps`` as floats, or a one-line :class:`InputError`: at least two, every one finite and positive,
    strictly increasing."""
    temps = [float(t) for t in temps]
    if len(temps) < MIN_RUNGS:
        raise InputError(f"{option}: a ladder needs at least {MIN_RUNGS} temperatures (one temperature exchanges "
                         f"with nobody; run without {option} for that), got {len(temps)}")
    for t in temps:
        if not math.isfinite(t) or t <= 0.0:
            raise InputError(f"{option}: every temperature must be a positive finite number of kelvin, got {t:g}")
    for a, b in zip(temps, temps[1:]):
        if not b > a:
            raise InputError(f"{option}: temperatures must be strictly increasing, got {a:g} then {b:g}")
    return temps


def split_temperatures(text: str, skip_empty: bool = True) -> Union[Tuple[float, float, int], List[float]]:
    """``"TMIN:TMAX:N"`` -> ``(TMIN, TMAX, N)``; ``"T1,T2,..."`` -> ``[T1, T2, ...]`` (kelvin, unchecked; empty
    items skipped, or with ``skip_empty=False`` refused). Raises ValueError on anything else (the caller says what
    its option wants)."""
    text = str(text).strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise ValueError(text)
        return float(parts[0]), float(parts[1]), int(parts[2])
    return [float(t) for t in text.split(",") if t.strip() or not skip_empty]


def parse_temperatures(text: str, option: str = "--temperatures") -> List[float]:
    """``"300:450:8"`` -> 8 geometric rungs from 300 to 450 K; ``"300,320,345"`` -> that list (checked by
    :func:`check_ladder`). Raises :class:`InputError` (one line) on anything else."""
    text = str(text).strip()
    try:
        spec = split_temperatures(text)
    except ValueError:
        raise InputError(f"{option} {text!r}: give TMIN:TMAX:N (a geometric ladder of N temperatures, K) or a "
                         "comma-separated increasing list, e.g. 300:450:8 or 300,320,345") from None
    if isinstance(spec, tuple):
        t_min, t_max, n = spec
        check_ladder([t_min, t_max], option)
        return check_ladder(geometric_ladder(t_min, t_max, n, option), option)
    return check_ladder(spec, option)


def rung_name(t_kelvin: float) -> str:
    """The file stem of one rung's demultiplexed trajectory, e.g. ``T300.0`` (one decimal; 0.1 K apart at
    least, :func:`check_names` makes sure)."""
    return f"T{t_kelvin:.1f}"


def check_names(temps: Sequence[float], option: str = "--temperatures") -> None:
    """Every rung has its own file name (:func:`rung_name`)."""
    names = [rung_name(t) for t in temps]
    for a, b in zip(names, names[1:]):
        if a == b:
            raise InputError(f"{option}: two temperatures share the name {a} (less than 0.1 K apart); spread them out")
