"""The command-line fuzzer's world (tests/fuzz/test_fuzz_cli.py): the files its path tokens stand for, and the
stubs that keep an accepted command's heavy part short.

The heavy part of an accepted command is kept short, not skipped: the step loop
(``flashschnet.openmm.simulate.integrate``, the same function flashschnet-simulate, -train validate and the
quantization report run) stops after two or three steps; the all-atom MD of ``train md`` minimises for 5
iterations and makes at most 2 steps per call; the MARTINI system is prepared once (martinize2 + insane) and
copied. Where even that is too heavy, a stub marks the point where the work would start
(:class:`~helpers.fuzz_cli.Accepted`): ``train fit``'s force matching, the compare runs, the quantization report's
Langevin runs and frame errors, the benchmark's worker subprocesses. A huge value that must be refused before
anything is allocated (``--replicas 10**30``, ``--frames 10**30``) is refused by the commands themselves
(``flashschnet.limits``).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from tests.conftest import DATA, EXAMPLES, SHARED
from tests.helpers.fuzz_cli import accept

PDB = EXAMPLES / "1L2Y_trpcage.pdb"
MODEL = EXAMPLES / "trpcage_placeholder.pt"
MLCG = DATA / "oracles" / "real" / "model_and_prior_S.pt"
ORACLE = DATA / "oracles" / "mlcg_schnet_A.pt"
M3 = SHARED / "martini" / "m3"
FF_FILES = ("martini_v3.0.0.itp", "martini_v3.0.0_ions_v1.itp", "martini_v3.0.0_solvents_v1.itp")


class Workspace:
    """Files the tokens stand for; per-example paths under a fresh folder."""

    def __init__(self, root: Path):
        self.root = root
        (root / "empty").write_bytes(b"")
        rng = np.random.default_rng(0)
        (root / "random.bin").write_bytes(rng.integers(0, 256, 600, dtype=np.uint8).tobytes())
        (root / "dir").mkdir()
        uni = root / "ünï cödé"
        uni.mkdir()
        shutil.copy(PDB, uni / "trp cage ü.pdb")
        shutil.copy(MODEL, uni / "mödel ö.pt")
        self.pdb_unicode, self.model_unicode = uni / "trp cage ü.pdb", uni / "mödel ö.pt"
        from flashschnet.checkpoint import load_model
        from flashschnet.priors import save_priors

        save_priors(load_model(str(MODEL)).priors, str(root / "priors.pt"))
        fake = root / "fake_ff"                      # the three MARTINI file names, empty (compare's checks)
        fake.mkdir()
        for f in FF_FILES:
            (fake / f).write_text("")
        run = root / "existing_run"                  # looks like a run already made there
        run.mkdir()
        (run / "run.json").write_text("{}")
        (run / "checkpoint.chk").write_bytes(b"not a checkpoint")
        (root / "empty_object.json").write_text("{}")
        self.ref: Optional[Path] = None

    def resolve(self, token: Optional[str], example: Path, suffix: str = "") -> Optional[str]:
        if token is None or not token.startswith("@"):
            return token
        name = token[1:]
        a_file = example / "a_file"
        if name in ("a_file", "under_file") and not a_file.exists():
            a_file.write_text("x")
        fixed = {
            "missing": self.root / "missing.pdb", "dir": self.root / "dir", "empty": self.root / "empty",
            "random": self.root / "random.bin", "blank": "", "pdb": PDB, "pdb_unicode": self.pdb_unicode,
            "model": MODEL, "model_unicode": self.model_unicode, "mlcg": MLCG, "oracle": ORACLE,
            "priors": self.root / "priors.pt", "ff_fake": self.root / "fake_ff", "m3": M3,
            "existing_run": self.root / "existing_run", "empty_object": self.root / "empty_object.json",
            "ref": self.ref, "readonly": "/sys/flashschnet-fuzz/out" + suffix,
            "fresh": example / ("out" + suffix), "fresh_nested": example / "a" / "b" / ("out" + suffix),
            "fresh_unicode": example / "ö u t" / ("rün" + suffix), "a_file": a_file,
            "under_file": a_file / ("out" + suffix),
        }
        return str(fixed[name]) if name in fixed else token      # random text that happens to start with @


class CappedSimulation:
    """``openmm.app.Simulation`` that minimises for at most 5 iterations and steps at most 2 per call."""

    @staticmethod
    def make():
        import openmm.app as app

        class _Capped(app.Simulation):
            def minimizeEnergy(self, tolerance=10, maxIterations=0, reporter=None):
                return super().minimizeEnergy(maxIterations=min(int(maxIterations) or 5, 5))

            def step(self, steps):
                return super().step(min(int(steps), 2))

        return _Capped


def make_workspace(root: Path) -> Workspace:
    """A Workspace in ``root``, with reference data for ``train fit`` and ``validate`` (10 frames, seconds)."""
    w = Workspace(root)
    import openmm.app

    from flashschnet.openmm.reference_md import reference_md

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(openmm.app, "Simulation", CappedSimulation.make())
        w.ref = w.root / "ref.npz"
        reference_md(str(PDB), str(w.ref), frames=10, interval=1, equilibration_steps=0, progress=False,
                     echo=lambda m: None)
    return w


# ------------------------------------------------------------------------------------------------ stubs
def capped_integrate(mp):
    """The step loop of both force fields' run scaffold stops after 2 steps (at least one report interval, so a frame
    is written)."""
    from flashschnet.openmm.runner import job, loop

    real = loop.integrate

    def integrate(simulation, steps, report_interval, *args, **kwargs):
        return real(simulation, min(steps, max(2, report_interval)), report_interval, *args, **kwargs)

    mp.setattr(job, "integrate", integrate)


def prepared_martini(ws: Workspace):
    """martinize2 + insane once for the whole module (the stub copies the result)."""
    from flashschnet.openmm.martini.prepare import prepare_system

    if getattr(ws, "martini", None) is None:
        folder = ws.root / "martini_prepared"
        ws.martini = prepare_system(str(PDB), str(M3), str(folder), name="protein", padding_nm=1.5, salt_molar=0.15,
                                    seed=5, ignore=["HOH"], elastic=True)
    return ws.martini


def martini_stubs(mp, ws):
    import dataclasses

    import flashschnet.openmm.martini.run as mr

    prepared = prepared_martini(ws)

    def prepare(pdb, ff, folder, **kwargs):
        shutil.copytree(prepared.folder, folder, dirs_exist_ok=True)
        return dataclasses.replace(prepared, folder=folder)

    mp.setattr(mr, "prepare_system", prepare)
    capped_integrate(mp)


def compare_stubs(mp, ws):
    import flashschnet.openmm.martini.run as mr
    import flashschnet.openmm.simulate as sim

    mp.setattr(mr, "run_martini", accept)
    mp.setattr(sim, "run", accept)


def benchmark_stubs(mp, ws):
    import flashschnet.scripts.benchmark as bm

    mp.setattr(bm, "_run_worker", lambda cfg: {"status": "error", "error": "not run (test stub)",
                                                "subprocess_wall_s": 0.0})


def quant_stubs(mp, ws):
    import flashschnet.openmm.quantization.accuracy as qa

    mp.setattr(qa, "frame_errors", lambda *a, **k: [])
    mp.setattr(qa, "langevin_check", accept)


def md_stubs(mp, ws):
    import openmm.app

    mp.setattr(openmm.app, "Simulation", CappedSimulation.make())


def fit_stubs(mp, ws):
    import flashschnet.train

    mp.setattr(flashschnet.train, "train_force_matching", accept)
