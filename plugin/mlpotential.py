"""OpenMM-ML potential ``"flashschnet"``: a CGSchNet model (with its priors) for a CG protein topology.

OpenMM-ML finds it through the ``openmmml.potentials`` entry point declared in setup.py::

    import openmm.app as app
    from openmmml import MLPotential

    pdb = app.PDBFile("run/topology.pdb")            # a CG topology: N, CA, CB, C, O beads per residue
    potential = MLPotential("flashschnet", modelPath="examples/trpcage_trained.pt")
    system = potential.createSystem(pdb.topology)     # masses, network (TorchForce) and priors
    # createSystem(..., replicas=R) for a topology of R packed copies (flashschnet.openmm.cg_topology(mol, R))

Options of ``MLPotential("flashschnet", ...)``:

* ``modelPath`` (required): a flashschnet checkpoint, or an mlcg file converted with flashschnet-convert;
* ``precision``: ``"single"`` (default) or ``"double"`` network arithmetic;
* ``backend``: ``"torch"``, ``"triton"`` or ``"reference"`` (default: triton on CUDA, torch otherwise);
* ``quantize``: ``"none"`` (default), ``"fp16"``, ``"bf16"``, ``"fp16-cast"``, ``"bf16-cast"``;
* ``compress``: filter tables, ``"auto"`` (default: float32 tables for the fused backends in single precision,
  the exact filter network otherwise; :func:`flashschnet.options.resolve_compression`), ``"none"`` (the exact
  filter network), ``"float32"``, ``"float16"``, ``"bfloat16"``: every block's filter network replaced by a table
  of the pair distance (applied before ``quantize``; built once per model file and cached, see
  :mod:`flashschnet.tablecache`, :func:`flashschnet.compress` and docs/compression.md);
* ``compressKnots``: knots per table (only with tables; default None: the library's default);
* ``priors``: ``"model"`` (default: the model's own priors), ``None`` (network only), or a prior file path;
* ``matmul``: the triton backend's product precision, ``"auto"`` (default), ``"ieee"``, ``"tf32"``, ``"bf16"``,
  ``"fp16"`` (see :class:`flashschnet.CGSchNet`);
* ``cudaGraph``: ``True`` to replay each network step as a CUDA graph (fused backends on CUDA; default False).

All but ``modelPath`` and ``priors`` are the fields of :class:`flashschnet.options.ModelOptions` (``cudaGraph`` and
``compressKnots`` spelled in camelCase), checked by its ``validate`` and applied by
:func:`flashschnet.options.prepare_model`, as flashschnet-simulate does.

Options of ``createSystem(topology, ...)``: ``replicas`` (default 1), ``positions`` (nm; with them, chains
also break where a peptide bond is too long, as when mapping a PDB), ``device`` (a torch device for the
network; default CUDA when available), ``removeCMMotion`` (OpenMM-ML's own, default True).

The topology must be a CG topology, one atom per bead in the mapping's order (an all-atom topology is
refused with a message saying how to map it). The particle masses are set to the CG bead masses (OpenMM-ML
starts from element masses). ``createMixedSystem`` is refused: the network models a whole CG protein.
Energies are in kJ/mol, distances in nm, as everywhere at the OpenMM boundary; the model's own units are
converted in :mod:`flashschnet.openmm.units`.
"""
from __future__ import annotations

from openmmml.mlpotential import MLPotentialImpl, MLPotentialImplFactory

_OPTIONS = ("precision", "backend", "quantize", "priors", "matmul", "cudaGraph", "compress", "compressKnots")

#: this potential's spelling of the model options (flashschnet.options.ModelOptions) it names differently
_NAMES = {"cuda_graph": "cudaGraph", "compress_knots": "compressKnots"}


class FlashSchNetPotentialImplFactory(MLPotentialImplFactory):
    """Creates :class:`FlashSchNetPotentialImpl` for ``MLPotential("flashschnet", modelPath=...)``."""

    def createImpl(self, name: str, modelPath=None, precision: str = "single", backend=None, quantize: str = "none",
                   priors="model", matmul: str = "auto", cudaGraph: bool = False, compress: str = "auto",
                   compressKnots=None, **args) -> "FlashSchNetPotentialImpl":
        return FlashSchNetPotentialImpl(name, modelPath, precision=precision, backend=backend, quantize=quantize,
                                        priors=priors, matmul=matmul, cudaGraph=cudaGraph, compress=compress,
                                        compressKnots=compressKnots, **args)


class FlashSchNetPotentialImpl(MLPotentialImpl):
    """Adds the network (an openmm-torch TorchForce) and the model's priors to an OpenMM-ML System.

    Parameters
    ----------
    name : str
        The potential's name (``"flashschnet"``).
    modelPath : str or path-like
        The model file (read with ``weights_only=True``; no code in it runs).
    precision, backend, quantize, priors, matmul, cudaGraph, compress, compressKnots
        See the module docstring.
    """

    def __init__(self, name: str, modelPath, precision: str = "single", backend=None, quantize: str = "none",
                 priors="model", matmul: str = "auto", cudaGraph: bool = False, compress: str = "auto",
                 compressKnots=None, **args):
        from flashschnet.errors import InputError
        from flashschnet.options import ModelOptions

        if args:
            raise InputError(f"MLPotential({name!r}): unknown option(s) {', '.join(sorted(args))}; known: modelPath, "
                             + ", ".join(_OPTIONS))
        if modelPath is None:
            raise InputError(f"MLPotential({name!r}) needs modelPath=, the model file (a flashschnet checkpoint, e.g. "
                             "examples/trpcage_trained.pt, or an mlcg file converted with flashschnet-convert)")
        self.options = ModelOptions(backend=backend, precision=precision, quantize=quantize, compress=compress,
                                    compress_knots=compressKnots, matmul=matmul, cuda_graph=bool(cudaGraph))
        try:
            self.options.validate(names=_NAMES)
        except InputError as exc:
            raise InputError(f"MLPotential({name!r}): {exc}") from None
        self.name, self.model_path, self.priors = name, modelPath, priors

    def addForces(self, topology, system, atoms, forceGroup: int, replicas: int = 1, positions=None, **args):
        """Set the CG masses of ``system``'s particles and add the network and prior forces in ``forceGroup``.

        ``replicas``: copies packed in ``topology``; ``positions`` (optional, nm): used for chain breaks only.
        """
        from flashschnet.errors import InputError
        from flashschnet.options import prepare_model

        from .system import NO_PRIORS_NOTE, USE_MODEL_PRIORS, add_model_forces, resolve_priors
        from .topology import cg_molecule_from_topology

        n_particles = system.getNumParticles()
        if atoms is not None and sorted(int(a) for a in atoms) != list(range(n_particles)):
            raise InputError(f"MLPotential({self.name!r}) models a whole CG protein; createMixedSystem with a subset "
                             "of the atoms is not supported: use createSystem on a CG topology")
        unknown = set(args) - {"device"}
        if unknown:
            raise InputError(f"MLPotential({self.name!r}).createSystem: unknown option(s) {', '.join(sorted(unknown))}; "
                             "known: replicas, positions, device, removeCMMotion")
        try:
            replicas = int(replicas)
        except (TypeError, ValueError):
            raise InputError(f"replicas must be a positive integer, got {replicas!r}") from None
        model = prepare_model(self.model_path, self.options, self._getTorchDevice(args), names=_NAMES)
        mapping = model.config.get("cg_mapping") or "5bead"
        mol = cg_molecule_from_topology(topology, positions=positions, replicas=replicas, mapping=mapping)
        if mol.n_beads * replicas != n_particles:
            raise InputError(f"the System has {n_particles} particles, the topology {mol.n_beads * replicas}")
        for r in range(replicas):
            for i, m in enumerate(mol.masses):
                system.setParticleMass(r * mol.n_beads + i, float(m))
        priors = resolve_priors(model, self.priors, mol)
        if priors is None and isinstance(self.priors, str) and self.priors == USE_MODEL_PRIORS:
            import warnings     # as flashschnet-simulate's note says

            warnings.warn(f"MLPotential({self.name!r}): {NO_PRIORS_NOTE}; pass priors= a prior file to add some, "
                          "or priors=None to say the network runs alone", UserWarning, stacklevel=2)
        try:
            add_model_forces(system, mol, model, replicas, priors=priors, network_group=forceGroup,
                             prior_group=forceGroup)
        except InputError as exc:
            copies = _identical_copies(topology) if replicas == 1 else 1
            if copies > 1:
                raise InputError(f"{exc}; the topology holds {copies} identical copies of one molecule: if they are "
                                 f"packed replicas, pass replicas={copies} to createSystem") from None
            raise


def _identical_copies(topology) -> int:
    """The largest k such that ``topology`` is k identical blocks of whole chains (atom and residue names)."""
    atoms = [(a.name, a.residue.name) for a in topology.atoms()]
    starts = {first.index for first in (next(c.atoms(), None) for c in topology.chains()) if first is not None}
    n = len(atoms)
    for k in range(n, 1, -1):
        if n % k == 0 and all(i * (n // k) in starts for i in range(k)) and atoms == atoms[: n // k] * k:
            return k
    return 1
