"""The names users choose among, as plain data (no torch import): backends, 16-bit weight variants,
precisions, CG mappings, network-force kinds, blow-up policies.

The command-line front ends take their ``choices`` from here, and the library checks against the same
tables, so a name is written once.
"""

#: backend name -> one-line description (the implementation of energies and forces; chosen by
#: :func:`flashschnet.backends.resolve_backend`)
BACKENDS = {
    "reference": "mlcg-style PyTorch: materialised edge tensors, scatter-add, autograd forces",
    "torch": "fused algorithm in PyTorch (CPU): half list + Verlet skin, chunked edges, exact hand-written forces",
    "triton": "fused Triton kernels (CUDA; CPU only under TRITON_INTERPRET=1)",
}

#: 16-bit weight variant -> (storage dtype name, per-channel scales), None = unquantized
#: (see :func:`flashschnet.quantize`)
VARIANTS = {
    "none": None,
    "fp16": ("float16", True),
    "bf16": ("bfloat16", True),
    "fp16-cast": ("float16", False),
    "bf16-cast": ("bfloat16", False),
}

#: filter compression: "auto" (the default: :data:`AUTO_TABLES` tables where the fused path computes in float32,
#: else the exact filter networks; decided by :func:`flashschnet.options.resolve_compression`), "none" (the exact
#: filter networks), or every block's filter network a table stored in that dtype (:func:`flashschnet.compress`)
COMPRESSIONS = ("auto", "none", "float32", "float16", "bfloat16")
#: storage dtypes of channel-wise 16-bit weights (:mod:`flashschnet.nn.quant`)
QUANT_DTYPES = ("float16", "bfloat16")
#: storage dtypes of a filter table (:mod:`flashschnet.nn.table`)
TABLE_DTYPES = ("float64", "float32") + QUANT_DTYPES
#: filter-table interpolant -> Q, the derivatives stored per knot (cubic Hermite: value and first; quintic: also
#: the second)
TABLE_ORDERS = {"cubic": 2, "quintic": 3}
#: the table dtype "auto" chooses: its error vs float64 is float32 rounding's (docs/compression.md)
AUTO_TABLES = "float32"
#: knots per filter table unless given (docs/compression.md: the float32 tables' force error is ~5e-7 relative
#: RMS on the oracle frames with these, inside the 1e-5 bound with a margin)
DEFAULT_KNOTS = 256

#: matrix-product precision of the triton backend's filter network -> description
#: (:func:`flashschnet.fused.plans.resolve_dot`; the packed layout stores the position in this table)
MATMULS = {
    "auto": "float64: ieee; channel-wise 16-bit weights: their own type; float32: tf32",
    "ieee": "exact in the compute dtype (on a GPU the triton backend then runs the torch backend's engine)",
    "tf32": "tensor cores, tf32 operands, float32 accumulation",
    "bf16": "tensor cores, bfloat16 operands, float32 accumulation",
    "fp16": "tensor cores, float16 operands, float32 accumulation",
}

#: network arithmetic: precision name -> torch dtype name
PRECISIONS = {"single": "float32", "double": "float64"}

#: CG mappings of an all-atom structure (tables in :mod:`flashschnet.cg.residue_data`)
MAPPINGS = ("5bead", "ca")

#: how the network enters an OpenMM System: an openmm-torch TorchForce or an openmm.PythonForce
NETWORK_FORCES = ("torch", "python")

#: what a replica that blows up does to a run: end it, or freeze that replica and go on
ON_BLOWUP = ("stop", "drop")
