"""flashschnet.openmm.backmap.minimise: a start with two heavy atoms on top of each other (the minimiser alone
fails with a NaN coordinate or stops far from converged) is rescued by the soft first stage; a clean start does not
need it; the restraints hold the mapped atoms."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.openmm.backmap import BackmapSettings, Rebuilder, build_skeleton, checks


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    from flashschnet.openmm import cg_topology
    from flashschnet.openmm.cleaning import clean_pdb

    cleaned = clean_pdb(str(EXAMPLES / "1L2Y_trpcage.pdb"))
    ref = cleaned.write(str(tmp_path_factory.mktemp("min") / "cleaned.pdb"))
    mol = cleaned.molecule()
    rebuilder = Rebuilder(build_skeleton(cg_topology(mol), ref, "trp-cage beads"), BackmapSettings())
    result = rebuilder.frame(mol.positions / 10.0)
    skel = (mol.positions / 10.0)[rebuilder.skeleton.bead_index]
    where = {(a.residue.index, a.name): a.index for a in rebuilder.topology.atoms()}
    mapped = [where[(a.residue.index, a.name)] for a in rebuilder.skeleton_topology.atoms()]
    return rebuilder, result, mapped, skel


def test_a_clean_start_needs_no_soft_stage(rebuilt):
    import openmm.unit as unit

    rebuilder, result, mapped, skel = rebuilt
    done = rebuilder._minimiser.minimise(rebuilder.topology, result.positions_nm * unit.nanometer, mapped, skel)
    assert done.failed is None and not done.soft and done.rms_force <= rebuilder.settings.tolerance


def test_atoms_on_top_of_each_other_are_pulled_apart(rebuilt):
    import openmm.unit as unit

    rebuilder, result, mapped, skel = rebuilt
    top = rebuilder.topology
    at = {(a.residue.index, a.name): a.index for a in top.atoms()}
    xyz = result.positions_nm.copy()
    # TRP6's ring atom CZ2 exactly on LEU7's CD1 and ARG16's NH1 0.02 A from TYR3's OH: a start no force field can
    # evaluate (a zero distance) next to one it can barely
    xyz[at[(5, "CZ2")]] = xyz[at[(6, "CD1")]]
    xyz[at[(15, "NH1")]] = xyz[at[(2, "OH")]] + 0.002
    done = rebuilder._minimiser.minimise(top, xyz * unit.nanometer, mapped, skel)
    assert done.failed is None and done.soft, done.failed
    assert done.rms_force <= rebuilder.settings.tolerance
    assert checks.clashes(done.positions_nm, top, exclude=rebuilder._minimiser.exclude) == []
    dev = np.linalg.norm(done.positions_nm[mapped] - skel, axis=1)
    assert dev.max() < 0.05, dev.max()                  # the restraints held (nm)


def test_hydrogens_that_cannot_be_placed_are_one_line(rebuilt, monkeypatch):
    """Every heavy atom on one point (and the tries that move them apart left out): Modeller.addHydrogens fails on
    every try; one InputError, and the caller's random state is as it was."""
    import random

    import openmm
    import openmm.unit as unit

    from flashschnet.errors import InputError
    from flashschnet.openmm.backmap import rebuild

    monkeypatch.setattr(rebuild, "HYDROGEN_TRIES", ((1, 0.0), (2, 0.0)))
    rebuilder = rebuilt[0]
    top = rebuilder._heavy[0]
    random.seed(123)
    expected = random.random()
    random.seed(123)
    with pytest.raises(InputError, match=r"hydrogens could not be placed .*2 tries.*--frames") as info:
        rebuilder._add_hydrogens(top, [openmm.Vec3(0.0, 0.0, 0.0)] * top.getNumAtoms() * unit.nanometer)
    assert "\n" not in str(info.value)
    assert random.random() == expected
