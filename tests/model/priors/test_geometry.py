"""flashschnet.priors.geometry: the differentiable geometry of the prior terms; the dihedral is mlcg's (mdtraj's,
IUPAC) sign convention."""

import numpy as np
import torch

from flashschnet.priors import compute_torsions

from tests.conftest import needs_prior_oracle


@needs_prior_oracle
def test_dihedral_sign_convention(prior_oracle, oracle_priors):
    """mlcg's phi is mdtraj's (IUPAC) dihedral; sin terms would expose a sign flip."""
    import mdtraj as md
    idx = torch.cat([t.indices for t in oracle_priors.terms_of_kind("dihedral_fourier")])
    phi = compute_torsions(prior_oracle["positions_A"], idx)
    top = md.Topology()
    r = top.add_residue("X", top.add_chain())
    for _ in range(49):
        top.add_atom("C", md.element.carbon, r)
    traj = md.Trajectory(prior_oracle["positions_A"].numpy() / 10.0, top)
    ref = md.compute_dihedrals(traj, idx.numpy())
    assert np.abs(np.angle(np.exp(1j * (ref - phi.numpy())))).max() < 1e-4
    assert (phi < 0).any() and (phi > 0).any()
