"""Coarse-graining tables, as data only (no logic): mappings, bead types, masses, residue names.

The bead types and masses are those of mlcg's chignolin models ("OPEPS" 5-bead types; masses as mlcg
stores them, multiplied back by 418.4 to amu).
"""

#: Mapping name -> atom names of the beads of one residue, in bead order (glycine skips ``CB``).
MAPPINGS = {
    "5bead": ("N", "CA", "CB", "C", "O"),
    "ca": ("CA",),
}

#: One-letter codes in the order that defines the residue-specific bead types (1-based index).
ALPHABET = "ACDEFGHIKLMNPQRSTVWY"

#: One-letter code -> residue-specific bead type (CB type in the 5-bead mapping, CA type in the CA mapping).
RESIDUE_TYPE = {
    "A": 1, "C": 2, "D": 3, "E": 4, "F": 5, "G": 6, "H": 7, "I": 8, "K": 9, "L": 10,
    "M": 11, "N": 12, "P": 13, "Q": 14, "R": 15, "S": 16, "T": 17, "V": 18, "W": 19, "Y": 20,
}

#: 5-bead mapping: bead types of the backbone beads (CB uses RESIDUE_TYPE).
BACKBONE_TYPE_5BEAD = {"N": 21, "CA": 22, "C": 23, "O": 24}

#: 5-bead mapping: the CA type of glycine.
GLYCINE_CA_TYPE_5BEAD = 6

#: Bead masses in amu, per mapping and bead (atom) name.
MASSES = {
    "5bead": {"N": 14.0, "CA": 12.0, "CB": 12.0, "C": 12.0, "O": 16.0},
    "ca": {"CA": 12.0},
}

#: Chemical element symbol of each bead (for topologies / PDB output).
BEAD_ELEMENT = {"N": "N", "CA": "C", "CB": "C", "C": "C", "O": "O"}

#: Standard residue names -> one-letter code.
STANDARD_RESIDUES = {
    "ALA": "A", "CYS": "C", "ASP": "D", "GLU": "E", "PHE": "F", "GLY": "G", "HIS": "H", "ILE": "I",
    "LYS": "K", "LEU": "L", "MET": "M", "ASN": "N", "PRO": "P", "GLN": "Q", "ARG": "R", "SER": "S",
    "THR": "T", "VAL": "V", "TRP": "W", "TYR": "Y",
}

#: Accepted variant names (protonation states, force-field names) -> one-letter code.
RESIDUE_ALIASES = {
    "HID": "H", "HIE": "H", "HIP": "H", "HSD": "H", "HSE": "H", "HSP": "H",
    "HISD": "H", "HISE": "H", "HISH": "H", "HISA": "H", "HISB": "H", "HIN": "H",
    "CYX": "C", "CYM": "C", "CYS2": "C",
    "ASH": "D", "GLH": "E", "LYN": "K",
    "MSE": "M",
}

#: Variant names accepted with a note (name -> what the note says it is read as).
NOTED_ALIASES = {"MSE": "MET (selenomethionine)"}

#: Prefixes of Amber terminal residue names (NALA, CALA): stripped when the rest is a known name.
TERMINAL_PREFIXES = ("N", "C")

#: Residue names of waters (ignored with a note).
WATER_NAMES = ("HOH", "WAT", "SOL", "H2O", "DOD", "TIP", "TIP3", "TIP4", "TIP5", "T3P", "T4P", "T5P",
               "SPC", "SPCE", "OPC", "HHO")

#: Residue names of common ions (ignored with a note, also in ATOM records as MD programs write them).
ION_NAMES = ("NA", "CL", "K", "MG", "CA", "ZN", "MN", "FE", "CU", "CO", "NI", "CD", "LI", "RB", "CS",
             "BR", "IOD", "IO", "F", "SOD", "CLA", "POT", "CAL", "NA+", "CL-", "K+", "MG2", "ZN2",
             "SO4", "PO4")

#: Capping groups (ignored with a note, also in ATOM records).
CAP_NAMES = ("ACE", "NME", "NMA", "NHE", "NH2", "FOR")

#: Atom names ignored silently (terminal oxygens other than O).
IGNORED_ATOMS = ("OXT", "OT2", "OC2", "O2")

#: Names of the C-terminal carbonyl oxygen used when a residue has no ``O`` atom (CHARMM, GROMACS).
TERMINAL_O_ALIASES = ("OT1", "OC1", "O1")

#: Hydrogen / deuterium element symbols (atoms ignored silently).
HYDROGEN_ELEMENTS = ("H", "D")

#: Largest C(i)-N(i+1) distance (Angstrom) that still counts as a peptide bond.
MAX_PEPTIDE_BOND = 2.0

#: C(i)-N(i+1) distance (Angstrom) below which a peptide bond is noted as suspiciously short.
MIN_PEPTIDE_BOND = 1.0

#: Largest CA(i)-CA(i+1) distance (Angstrom) that still counts as bonded, used when C or N is absent.
MAX_CA_CA_BOND = 4.3

#: Ideal carbonyl geometry, used to place the O bead of a C-terminal residue written without O.
CO_BOND_LENGTH = 1.23          # Angstrom
CA_C_O_ANGLE = 120.5           # degrees
TERMINAL_O_DEFAULT_DIHEDRAL = 180.0   # N-CA-C-O, degrees, when no previous residue gives one
