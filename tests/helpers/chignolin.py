"""The hand-built 5-bead chignolin CGMolecule of mlcg's prior oracle (tests/model/priors/)."""
import numpy as np
import torch

ONE_LETTER = "ACDEFGHIKLMNPQRSTVWY"
THREE_LETTER = {"A": "ALA", "C": "CYS", "D": "ASP", "E": "GLU", "F": "PHE", "G": "GLY", "H": "HIS", "I": "ILE",
                "K": "LYS", "L": "LEU", "M": "MET", "N": "ASN", "P": "PRO", "Q": "GLN", "R": "ARG", "S": "SER",
                "T": "THR", "V": "VAL", "W": "TRP", "Y": "TYR"}


def oracle_bonds(oracle):
    t = oracle["terms"]
    return torch.cat([t[n]["atom_indices"] for n in t if t[n]["kind"] == "harmonic_bond"]).numpy()


def cln_molecule(oracle, frame=0, types=None):
    """A 5-bead CGMolecule built by hand from the oracle's bead types, positions and bond list."""
    from flashschnet.cg.molecule import CGMolecule, CGResidue

    types = [int(x) for x in (oracle["bead_types"].tolist() if types is None else types)]
    names, bead_res, residues = [], [], []
    for t in types:
        if t == 21:
            names.append("N")
            residues.append(None)
        elif t in (22, 6) and names[-1] == "N":
            names.append("CA")
            if t == 6:
                residues[-1] = "G"
        elif t == 23:
            names.append("C")
        elif t == 24:
            names.append("O")
        else:
            names.append("CB")
            residues[-1] = ONE_LETTER[t - 1]
        bead_res.append(len(residues) - 1)
    res = [CGResidue(chain="A", resseq=i + 1, icode="", resname=THREE_LETTER[a], one_letter=a)
           for i, a in enumerate(residues)]
    masses = np.array([{"N": 14.0, "O": 16.0}.get(n, 12.0) for n in names])
    return CGMolecule(mapping="5bead", bead_names=names, bead_types=np.array(types, dtype=np.int64),
                      masses=masses, positions=oracle["positions_A"][frame].numpy().copy(),
                      bead_residue=np.array(bead_res, dtype=np.int64), residues=res,
                      chain_of_residue=np.zeros(len(res), dtype=np.int64),
                      bonds=np.sort(oracle_bonds(oracle), axis=1), source="chignolin (mlcg oracle)")
