"""How well a parallel-tempering run's walkers mixed over the ladder, from its ``exchanges.csv`` and ``walkers.csv``
(:mod:`flashschnet.openmm.ensemble.records`):

* acceptance per neighbour pair: accepted / tried swaps of rungs ``k`` and ``k+1``;
* occupancy: the fraction of report steps (after step 0) each walker spent at each rung (``walkers.csv``: the walker
  at each rung during the segment ending at each report step); a well-mixed run has every entry near 1/rungs;
* round trips: the walkers' rungs replayed through every tried swap (``exchanges.csv`` in order, starting from
  ``walkers.csv``'s step-0 row); a round trip is a walker's way from the lowest rung to the highest and back, timed
  from one arrival at the lowest rung to the next arrival there after a visit to the highest;
* warnings: a pair whose acceptance is below :data:`LOW_ACCEPTANCE`, or no walker that completed a round trip.

:func:`diagnostics` computes them (``exchange_diagnostics.json`` holds its result); :func:`plot` draws
``exchange.png`` (Agg canvas, no pyplot). A file that is not the run's (a wrong header, an unreadable row before the
last) is an :class:`~flashschnet.errors.InputError`; a partial last row (a run cut short) is dropped.
"""
from __future__ import annotations

import csv
import io
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..errors import InputError
from .ladder import rung_name
from .ladder import EXCHANGE_COLUMNS

#: a neighbour pair accepting fewer swaps than this is warned about
LOW_ACCEPTANCE = 0.10
FILE = "exchange_diagnostics.json"
FIGURE = "exchange.png"


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        return float(text)


def _table(path: str, columns: Sequence[str], notes: Optional[List[str]] = None) -> Optional[List[List[int]]]:
    """The rows of a CSV file whose header starts with ``columns``, as numbers (int where a field is an integer,
    else float); a partial last row (what follows the last line end: a run cut short) is dropped, with a line in
    ``notes``; with ``notes``, a file without a whole line (empty, cut inside its header) is None with a line there
    too; any other unreadable row, or a file of other columns, is an :class:`InputError`."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        rows = [r for r in csv.reader(io.StringIO(text, newline="")) if r]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: unreadable ({exc}); it should be the file the parallel-tempering run "
                         "wrote") from None
    cut = bool(rows) and not text.endswith(("\n", "\r"))
    if cut and len(rows) > 1:
        rows = rows[:-1]
        if notes is not None:
            notes.append(f"{os.path.basename(path)}: the last row (line {len(rows) + 1}) is incomplete (cut short); it "
                         "is left out, the rows before it are used")
    if (not rows or cut and len(rows) == 1) and notes is not None:
        notes.append(f"{os.path.basename(path)}: {'empty' if not rows else 'cut short inside its header'}; it has no "
                     "rows")
        return None
    if not rows or cut and len(rows) == 1 or [h.strip() for h in rows[0][:len(columns)]] != list(columns):
        raise InputError(f"{path}: " + ("empty" if not rows else "cut short inside its header" if cut else
                                        f"the header is not {','.join(columns)}")
                         + "; it should be the file the parallel-tempering run wrote: restore it, or move it away to "
                           "go on without it")
    out = []
    for n, r in enumerate(rows[1:], 2):
        try:
            if len(r) != len(rows[0]):
                raise ValueError
            out.append([_number(v) for v in r])
        except ValueError:
            if n == len(rows):             # a run cut short mid-row
                if notes is not None:
                    notes.append(f"{os.path.basename(path)}: the last row (line {n}) is incomplete; it is left out, "
                                 "the rows before it are used")
                break
            raise InputError(f"{path}, line {n}: unreadable row {','.join(r)!r}; the file is damaged (restore it, or "
                             "move it away to go on without it)") from None
    return out


def diagnostics(run_dir: str, temperatures_K: Sequence[float], dt_ps: Optional[float] = None,
                damage: Optional[List[str]] = None) -> Dict[str, object]:
    """The mixing diagnostics of the run in ``run_dir`` with this ladder (module docstring).

    Returns
    -------
    dict
        ``pairs`` (per pair: ``T_lo_K``, ``T_hi_K``, ``attempts``, ``accepted``, ``acceptance``),
        ``occupancy`` (``[walker][rung]`` fractions; None without walkers.csv), ``round_trips`` (per walker: the
        times in steps), ``round_trips_total``, ``mean_round_trip_steps`` (and ``_ps`` with ``dt_ps``),
        ``steps`` (the last exchange step), ``warnings`` (one line each), ``notes``; None when exchanges.csv has
        no whole line (a line in ``damage``, default ``notes``: what was wrong with the files).
    """
    temps = [float(t) for t in temperatures_K]
    k = len(temps)
    notes: List[str] = []
    ex_path, w_path = os.path.join(run_dir, "exchanges.csv"), os.path.join(run_dir, "walkers.csv")
    if not os.path.isfile(ex_path):
        raise InputError(f"{ex_path}: missing; the mixing diagnostics of a parallel-tempering run need the "
                         "exchanges.csv it wrote")
    damage = notes if damage is None else damage
    exchanges = _table(ex_path, EXCHANGE_COLUMNS, damage)
    if exchanges is None:                  # empty, or cut inside its header: as if there were none (noted)
        return None
    col = {c: i for i, c in enumerate(EXCHANGE_COLUMNS)}
    for r in exchanges:
        if not (0 <= r[col["pair"]] < k - 1 and 0 <= r[col["walker_lo"]] < k and 0 <= r[col["walker_hi"]] < k):
            raise InputError(f"{ex_path}: a swap of pair {r[col['pair']]} or walkers {r[col['walker_lo']]}, "
                             f"{r[col['walker_hi']]} outside the {k}-rung ladder; it is not this run's file")
    attempts, accepted = np.zeros(k - 1, dtype=int), np.zeros(k - 1, dtype=int)
    for r in exchanges:
        attempts[r[col["pair"]]] += 1
        accepted[r[col["pair"]]] += int(r[col["accepted"]])
    pairs = [{"T_lo_K": temps[p], "T_hi_K": temps[p + 1], "attempts": int(attempts[p]), "accepted": int(accepted[p]),
              "acceptance": float(accepted[p] / attempts[p]) if attempts[p] else None} for p in range(k - 1)]

    # occupancy from walkers.csv; the start of the replay from its step-0 row
    start = np.arange(k)                    # rung_of[walker]: every walker starts at its own rung
    occupancy = None
    if os.path.isfile(w_path):
        names = ["step"] + [rung_name(t) for t in temps]
        walkers = _table(w_path, names, damage)       # (None: empty, noted)
        if walkers:
            at = np.asarray([r[1:1 + k] for r in walkers], dtype=int)          # [rows, rung] -> walker
            if at.min() < 0 or at.max() >= k:
                raise InputError(f"{w_path}: a walker number outside 0-{k - 1}; it is not this run's file")
            if walkers[0][0] == 0:
                start[at[0]] = np.arange(k)
            later = at[1:] if walkers[0][0] == 0 else at
            if len(later):
                counts = np.zeros((k, k))
                for row in later:
                    counts[row, np.arange(k)] += 1
                occupancy = (counts / len(later)).tolist()
    else:
        damage.append("walkers.csv: missing; no occupancy of the rungs (round trips replayed from the start "
                      "assignment)")

    # round trips: replay every tried swap in order
    rung_of = start.copy()
    phase = np.where(rung_of == 0, 1, 0)       # 0: not yet at the bottom; 1: left it; 2: reached the top since
    since = np.zeros(k, dtype=int)
    trips: List[List[int]] = [[] for _ in range(k)]
    trace_steps, trace = [0], [rung_of.copy()]
    for r in sorted(exchanges, key=lambda r: (r[col["step"]], r[col["pair"]])):
        if not r[col["accepted"]]:
            continue
        p, lo, hi, step = r[col["pair"]], r[col["walker_lo"]], r[col["walker_hi"]], r[col["step"]]
        rung_of[lo], rung_of[hi] = p + 1, p
        for w in (lo, hi):
            if rung_of[w] == k - 1 and phase[w] == 1:
                phase[w] = 2
            elif rung_of[w] == 0:
                if phase[w] == 2:
                    trips[w].append(int(step - since[w]))
                phase[w], since[w] = 1, step
        if trace_steps[-1] == step:
            trace[-1] = rung_of.copy()
        else:
            trace_steps.append(step)
            trace.append(rung_of.copy())
    total = sum(len(t) for t in trips)
    flat = [t for ts in trips for t in ts]
    mean_steps = float(np.mean(flat)) if flat else None
    last = max((r[col["step"]] for r in exchanges), default=0)
    if last > trace_steps[-1]:                  # the rungs hold until the last tried swap
        trace_steps.append(last)
        trace.append(rung_of.copy())
    warnings = [f"exchange acceptance {p['acceptance']:.3f} between {p['T_lo_K']:.1f} and {p['T_hi_K']:.1f} K is "
                f"below {LOW_ACCEPTANCE:.0%}: put a temperature between them (more, closer rungs)"
                for p in pairs if p["acceptance"] is not None and p["acceptance"] < LOW_ACCEPTANCE]
    if total == 0:
        warnings.append(f"no walker completed a round trip {temps[0]:.1f} -> {temps[-1]:.1f} -> {temps[0]:.1f} K in "
                        f"{last} steps: the ladder is not mixed yet; run longer (or use more, closer rungs)")
    return {"temperatures_K": temps, "pairs": pairs, "occupancy": occupancy, "round_trips": trips,
            "round_trips_total": total, "mean_round_trip_steps": mean_steps,
            "mean_round_trip_ps": mean_steps * dt_ps if (mean_steps is not None and dt_ps) else None,
            "steps": int(last), "low_acceptance": LOW_ACCEPTANCE, "warnings": warnings, "notes": notes,
            "trace": {"step": trace_steps, "rung_of_walker": [t.tolist() for t in trace]}}


def plot(diag: Dict[str, object], out: str) -> None:
    """``exchange.png``: acceptance per pair, occupancy, each walker's rung over the run."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 4.2))
    fig.subplots_adjust(left=0.05, right=0.98, bottom=0.2, top=0.9, wspace=0.3)
    ax_a, ax_o, ax_t = fig.subplots(1, 3)
    pairs = diag["pairs"]
    acc = [np.nan if p["acceptance"] is None else p["acceptance"] for p in pairs]
    ax_a.bar(range(len(pairs)), acc, color="tab:blue")
    ax_a.axhline(diag["low_acceptance"], color="tab:red", ls=":", lw=1)
    ax_a.set_xticks(range(len(pairs)), [f"{p['T_lo_K']:.0f}-{p['T_hi_K']:.0f}" for p in pairs], rotation=45,
                    fontsize="small")
    ax_a.set_ylim(0, 1)
    ax_a.set_xlabel("neighbour pair (K)")
    ax_a.set_ylabel("exchange acceptance")
    if diag["occupancy"] is not None:
        im = ax_o.imshow(np.asarray(diag["occupancy"]), vmin=0, cmap="viridis", aspect="auto", origin="lower")
        fig.colorbar(im, ax=ax_o, label="fraction of reports")
        ax_o.set_xlabel("rung")
        ax_o.set_ylabel("walker")
        for axis in (ax_o.xaxis, ax_o.yaxis):
            axis.get_major_locator().set_params(integer=True)
    else:
        ax_o.text(0.5, 0.5, "no walkers.csv", ha="center", transform=ax_o.transAxes)
    trace = np.asarray(diag["trace"]["rung_of_walker"])
    for w in range(trace.shape[1]):
        ax_t.step(diag["trace"]["step"], trace[:, w], where="post", lw=1, label=f"walker {w}")
    ax_t.set_xlabel("step")
    ax_t.set_ylabel("rung")
    ax_t.yaxis.get_major_locator().set_params(integer=True)
    ax_t.set_title(f"{diag['round_trips_total']} round trip(s)", fontsize="medium")
    if trace.shape[1] <= 8:
        ax_t.legend(fontsize="x-small")
    fig.savefig(os.path.join(out, FIGURE), dpi=100)
