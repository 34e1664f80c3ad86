"""flashschnet.openmm.backmap.templates on pdbfixer's own residue templates: the atoms beyond a bond (a side chain from
CB, away from CA), and the six templates of :data:`CHI1` turned rigidly about CA-CB to chi1 = -65 while every other
template, and every atom up to CB, stays where it was."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from flashschnet.openmm.backmap import templates

PDB = str(EXAMPLES / "1L2Y_trpcage.pdb")


def _nm(template):
    import openmm.unit as unit

    return np.array([p.value_in_unit(unit.nanometer) for p in template.positions], dtype=np.float64)


def test_common_chi1_templates_turn_six_side_chains_to_minus_65():
    import warnings

    from pdbfixer import PDBFixer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fixer = PDBFixer(filename=PDB)
    before = {name: _nm(t) for name, t in fixer.templates.items()}
    trp = fixer.templates["TRP"].topology
    names = [a.name for a in trp.atoms()]
    side = {names[i] for i in templates.beyond(trp, "CB", "CA")}
    assert {n for n in side if not n.startswith("H")} == {"CG", "CD1", "CD2", "NE1", "CE2", "CE3", "CZ2", "CZ3", "CH2"}
    assert not side & {"N", "CA", "C", "O", "CB", "HA"}

    templates.common_chi1_templates(fixer)
    assert set(templates.CHI1) <= set(fixer.templates)
    for name, t in fixer.templates.items():
        xyz, old = _nm(t), before[name]
        if name not in templates.CHI1:
            assert np.array_equal(xyz, old), name
            continue
        at = {a.name: a.index for a in t.topology.atoms()}
        gamma, target = templates.CHI1[name]
        chi = lambda p: templates._chi(p[at["N"]], p[at["CA"]], p[at["CB"]], p[at[gamma]])  # noqa: E731
        assert abs((chi(old) - target + 180) % 360 - 180) > 20, name          # a rare chi1 before
        assert chi(xyz) == pytest.approx(target, abs=1e-6), name
        moving = templates.beyond(t.topology, "CB", "CA")
        still = [i for i in range(len(xyz)) if i not in set(moving)]
        assert np.array_equal(xyz[still], old[still]), name
        for anchor in ("CA", "CB"):                   # a rotation about CA-CB: distances to both kept
            np.testing.assert_allclose(np.linalg.norm(xyz[moving] - xyz[at[anchor]], axis=1),
                                       np.linalg.norm(old[moving] - old[at[anchor]], axis=1), atol=1e-12)
