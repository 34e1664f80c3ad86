"""Health check of a packed-replica run: stop (or drop the replica at fault) when energies, forces or positions
become NaN or huge."""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import numpy as np
import openmm.unit as u

from ...errors import SimulationInstabilityError
from ..units import KJ_MOL, KJ_MOL_NM
from ._common import steps_to_next


class HealthReporter:
    """Check energy, forces and positions every ``interval`` steps; raise on NaN/huge values (or drop the
    replica at fault).

    Parameters
    ----------
    interval : int
    replicas, n_beads : int
        Layout of the packed System (to name the replica and bead at fault).
    bead_label : callable(int) -> str, optional
        Names bead ``i`` of a replica in messages (e.g. ``CGMolecule.bead_label``).
    max_force : float
        Largest acceptable force component, kJ/mol/nm.
    max_energy : float
        Largest acceptable |potential energy| per bead, kJ/mol.
    checkpoint_hint : callable() -> str, optional
        Returns where the last good checkpoint is, for the message.
    on_blowup : {"stop", "drop"}
        ``"stop"`` (default): raise :class:`SimulationInstabilityError` at the first problem. ``"drop"``: the
        active replicas whose positions or forces are NaN/infinite or whose largest force component exceeds
        ``max_force`` are marked inactive and handed to ``drop(simulation, [(replica, reason), ...], step)``
        (which should freeze them, e.g. :func:`flashschnet.openmm.runner.freeze_replicas`); inactive replicas
        are not checked again. A NaN or huge *total* energy names no replica and stops the run under both
        policies (with ``"drop"`` it is checked only in reports that dropped nobody: the energy of such a
        report still contains the replicas just dropped).

    Attributes
    ----------
    active : ndarray, bool, [R]
        Replicas still checked.
    last_good : ndarray, float64, [R, N, 3] or None
        Each replica's positions (nm) at its last passed check or :meth:`remember` (NaN before either).
    """

    def __init__(self, interval: int, replicas: int, n_beads: int, bead_label: Optional[Callable[[int], str]] = None,
                 max_force: float = 1.0e5, max_energy: float = 1.0e5, checkpoint_hint: Optional[Callable[[], str]] = None,
                 on_blowup: str = "stop", drop: Optional[Callable[[object, List[Tuple[int, str]], int], None]] = None):
        if on_blowup not in ("stop", "drop"):
            raise ValueError(f"on_blowup must be 'stop' or 'drop', got {on_blowup!r}")
        if on_blowup == "drop" and drop is None:
            raise ValueError("on_blowup='drop' needs a drop callback")
        self.interval = int(interval)
        self.replicas, self.n_beads = int(replicas), int(n_beads)
        self.bead_label = bead_label or (lambda i: f"bead {i}")
        self.max_force, self.max_energy = float(max_force), float(max_energy)
        self.checkpoint_hint = checkpoint_hint or (lambda: "")
        self.on_blowup, self.drop = on_blowup, drop
        self.active = np.ones(self.replicas, dtype=bool)
        self.last_good: Optional[np.ndarray] = None

    def describeNextReport(self, simulation):
        return {"steps": steps_to_next(simulation, self.interval), "periodic": False,
                "include": ["positions", "forces", "energy"]}

    def _fail(self, step: int, what: str):
        hint = self.checkpoint_hint()
        raise SimulationInstabilityError(f"step {step}: {what}; stopping" + (f" ({hint})" if hint else ""))

    def remember(self, positions: np.ndarray) -> None:
        """Take ``positions`` [R*N, 3] (nm) as every active replica's last good positions (e.g. the state a
        resumed run starts from, which no check has seen)."""
        pos = np.array(positions, dtype=float).reshape(self.replicas, self.n_beads, 3)
        if self.last_good is None:
            self.last_good = np.full(pos.shape, np.nan)
        self.last_good[self.active] = pos[self.active]

    def _force_message(self, r: int, i: int, f: float) -> str:
        return (f"replica {r}: force {f:.3g} kJ/mol/nm on {self.bead_label(i)} exceeds {self.max_force:.3g} "
                "(the simulation is blowing up: a smaller --dt or a better model)")

    def check(self, step: int, energy: float, positions: np.ndarray, forces: np.ndarray) -> List[Tuple[int, str]]:
        """The checks themselves (positions nm, forces kJ/mol/nm, both [R*N, 3]; energy kJ/mol).

        Policy ``"stop"``: raises at the first problem, returns ``[]``. Policy ``"drop"``: returns the active
        replicas to drop as ``[(replica, reason)]`` in replica order (one reason each: a NaN position first,
        then a NaN force, then the largest force), without changing :attr:`active`; raises only for a bad
        total energy. Passed replicas' positions become their :attr:`last_good`.
        """
        pos = positions.reshape(self.replicas, self.n_beads, 3)
        frc = forces.reshape(self.replicas, self.n_beads, 3)
        act = self.active
        stop = self.on_blowup == "stop"
        found = {}
        for name, arr in (("position", pos), ("force", frc)):
            bad = ~np.isfinite(arr).all(axis=2) & act[:, None]
            if bad.any():
                if stop:
                    r, i = map(int, np.argwhere(bad)[0])
                    self._fail(step, f"replica {r}: {name} of {self.bead_label(i)} is NaN or infinite")
                for r, i in np.argwhere(bad):
                    found.setdefault(int(r), f"{name} of {self.bead_label(int(i))} is NaN or infinite")
        fmax = np.abs(frc).max(axis=2)
        fmax[~act] = 0.0
        fmax[list(found)] = 0.0
        if (fmax > self.max_force).any():
            if stop:
                r, i = np.unravel_index(int(np.argmax(fmax)), fmax.shape)
                self._fail(step, self._force_message(int(r), int(i), fmax[r, i]))
            for r in np.nonzero((fmax > self.max_force).any(axis=1))[0]:
                i = int(np.argmax(fmax[r]))
                found[int(r)] = self._force_message(int(r), i, fmax[r, i]).split(": ", 1)[1]
        if not found and (not np.isfinite(energy) or abs(energy) > self.max_energy * self.replicas * self.n_beads):
            self._fail(step, f"potential energy {energy:.6g} kJ/mol is NaN or huge")
        ok = act.copy()
        ok[list(found)] = False
        if self.last_good is None:
            self.last_good = np.full(pos.shape, np.nan)
        self.last_good[ok] = pos[ok]
        return sorted(found.items())

    def rescue(self, simulation, error: str) -> bool:
        """After OpenMM refused to go on (``error``, e.g. the CPU platform's "Particle coordinate is NaN"):
        with policy ``"drop"``, drop the active replicas whose positions are NaN or infinite and return True
        (the run can go on); False when the policy is ``"stop"`` or no replica is to blame."""
        if self.on_blowup != "drop":
            return False
        pos = simulation.context.getState(getPositions=True).getPositions(asNumpy=True).value_in_unit(u.nanometer)
        bad = ~np.isfinite(pos.reshape(self.replicas, self.n_beads, 3)).all(axis=2) & self.active[:, None]
        if not bad.any():
            return False
        found = {}
        for r, i in np.argwhere(bad):
            found.setdefault(int(r), f"position of {self.bead_label(int(i))} is NaN or infinite (OpenMM: {error})")
        for r in found:
            self.active[r] = False
        self.drop(simulation, sorted(found.items()), simulation.currentStep)
        return True

    def report(self, simulation, state):
        step = simulation.currentStep
        bad = self.check(step, state.getPotentialEnergy().value_in_unit(KJ_MOL),
                         state.getPositions(asNumpy=True).value_in_unit(u.nanometer),
                         state.getForces(asNumpy=True).value_in_unit(KJ_MOL_NM))
        if bad:
            for r, _ in bad:
                self.active[r] = False
            self.drop(simulation, bad, step)
