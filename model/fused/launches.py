"""Launches of the triton engine's kernels, and every launch a step can make.

A :class:`Launch` is one kernel call: the ``@triton.jit`` kernel itself (of :mod:`flashschnet.kernels.cfconv`,
:mod:`flashschnet.kernels.nodes` or :mod:`flashschnet.kernels.tiles`), its grid, its arguments in the kernel's
order and its constexprs; its launch options (``num_warps``, ``num_stages``, ``maxnreg``) are
:data:`KERNEL_CONFIGS`' entry for the kernel. One function per kernel builds its launch from plans
(:mod:`flashschnet.fused.plans`, :mod:`flashschnet.fused.node_plans`) and a
:class:`~flashschnet.fused.workspace.Workspace`; :func:`run` runs it -- nothing allocated, nothing read back to
the host. :func:`step_launches` and :func:`table_step_launches` enumerate the launches a step can make;
``tools/device/gpu_fit.py`` compiles exactly these ahead of time, so what is checked offline is what runs.

Grids: the flag kernel one program per replica, the reduce kernel one per destination tile, the CFConv and node
kernels a fixed number of persistent programs (:func:`persistent_programs`: the kernel's ``ctas_per_sm`` per
multiprocessor, never more than the step can have items) -- all fixed by the shapes, so the call is
graph-capturable.

The kernels are imported at the first launch (:func:`kernels`), not with this module: ``TRITON_INTERPRET`` must
be set before triton is imported, and the torch engine never needs triton.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Dict, NamedTuple, Optional, Tuple

import torch

from .node_plans import NodePlan
from .plans import BasisPlan, FilterPlan, TablePlan, pow2
from .workspace import Workspace

#: launch options per kernel, chosen with ``tools/device/gpu_fit.py`` (registers, spills, shared memory, blocks per
#: multiprocessor; sm_80 and sm_90; every basis / envelope / matmul / table variant) and the performance model
#: (docs/benchmarks.md: the calibrated model has the kernels bound by chains of dependent steps, so a chunk should
#: hold as many pairs as the registers allow): ``num_warps``, ``num_stages``, ``maxnreg`` (Triton's), ``JB`` (the
#: CFConv kernels' source beads per chunk, a constexpr), ``NC`` (the node kernels' block width) and ``ctas_per_sm``
#: (the persistent kernels' programs per multiprocessor: what the registers and shared memory let reside), ``groups``
#: (the exact filter's channel groups per tile pair: the backward splits the second layer's output channels in
#: two, each item computing the first layer again, which keeps every basis and envelope variant spill-free). The
#: float32 table kernels run as many small programs per multiprocessor as fit -- 2 warps each, six resident (their
#: 16-bit-table variants fit six, float32 ones up to eight), each an independent chain, 16 x 2 pairs per forward
#: step, 16 x 1 per backward one: of the configurations that compile spill-free on sm_80 and sm_90 the one the
#: calibrated model predicts fastest (one 16-warp program per multiprocessor on whole tile pairs: 1.5x slower at
#: R = 64); the node kernels 8 warps on 64-wide blocks; the exact filter's kernels fit with 16 pairs per
#: product (64-row products spill in Triton 3.6: docs/benchmarks.md)
KERNEL_CONFIGS = {
    "_cfconv_table_fwd_kernel": {"num_warps": 2, "num_stages": 2, "JB": 2, "ctas_per_sm": 6},
    "_cfconv_table_bwd_kernel": {"num_warps": 2, "num_stages": 2, "JB": 1, "ctas_per_sm": 6},
    "_cfconv_fwd_kernel": {"num_warps": 8, "num_stages": 1, "maxnreg": 255, "JB": 1, "groups": 1, "ctas_per_sm": 1},
    "_cfconv_bwd_kernel": {"num_warps": 8, "num_stages": 1, "JB": 1, "groups": 2, "ctas_per_sm": 1},
    "_node_fwd_kernel": {"num_warps": 8, "num_stages": 1, "ctas_per_sm": 2, "NC": 64},
    "_node_bwd_kernel": {"num_warps": 8, "num_stages": 1, "ctas_per_sm": 2, "NC": 64},
    "_tile_reduce_kernel": {"num_warps": 4, "num_stages": 1},
    "_tile_flags_kernel": {"num_warps": 4, "num_stages": 1},
}
#: what a float64 launch changes (float64 values take two registers: fewer warps, smaller chunks)
FLOAT64_CONFIGS = {
    "_cfconv_table_fwd_kernel": {"num_warps": 8, "JB": 8, "ctas_per_sm": 1},
    "_cfconv_table_bwd_kernel": {"num_warps": 8, "JB": 2, "ctas_per_sm": 1},
}
#: what a table kernel with 16-bit table storage changes (its conversions take registers: fewer programs fit)
TABLE16_CONFIGS = {"_cfconv_table_bwd_kernel": {"ctas_per_sm": 4}}
#: what Triton's CPU interpreter runs instead: whole tile pairs per chunk and 128-wide node blocks (registers are
#: no concern there, and every chunk costs interpreter time: this makes the interpreted tests several times
#: faster). The
#: chunked loops as a GPU runs them are tested on small systems with :data:`GPU_CONFIGS_IN_INTERPRETER`
INTERPRETER_CONFIGS = {**{k: {"JB": 16} for k in ("_cfconv_table_fwd_kernel", "_cfconv_table_bwd_kernel",
                                                   "_cfconv_fwd_kernel", "_cfconv_bwd_kernel")},
                       "_node_fwd_kernel": {"NC": 128}, "_node_bwd_kernel": {"NC": 128}}
#: tests set this to run the GPU's configurations (:data:`KERNEL_CONFIGS`) in the interpreter too
GPU_CONFIGS_IN_INTERPRETER = False
#: the launch options Triton takes (the rest of a config is ours)
_TRITON_OPTIONS = ("num_warps", "num_stages", "maxnreg")


def config(kernel: str, dtype=torch.float32, sixteen: bool = False) -> Dict[str, Any]:
    """The configuration of ``kernel`` for a launch in compute ``dtype`` (``sixteen``: of a 16-bit table):
    :data:`KERNEL_CONFIGS` with :data:`FLOAT64_CONFIGS`' changes for float64, :data:`TABLE16_CONFIGS`' for 16-bit
    tables, and :data:`INTERPRETER_CONFIGS`' when interpreting (unless :data:`GPU_CONFIGS_IN_INTERPRETER`). Results
    agree to rounding across configurations, and are bitwise repeatable within one."""
    out = dict(KERNEL_CONFIGS[kernel])
    if dtype == torch.float64:
        out.update(FLOAT64_CONFIGS.get(kernel, {}))
    elif sixteen:
        out.update(TABLE16_CONFIGS.get(kernel, {}))
    if interpreting() and not GPU_CONFIGS_IN_INTERPRETER:
        out.update(INTERPRETER_CONFIGS.get(kernel, {}))
    return out


def chunk(kernel: str, dtype) -> int:
    """Source beads per chunk of the exact filter's items (``config(...)["JB"]``)."""
    return int(config(kernel, dtype)["JB"])


#: persistent programs under TRITON_INTERPRET=1 (several, so the interpreted tests run a real persistent loop)
INTERPRETER_PROGRAMS = 3
#: rows of replicas the final node kernel's program 0 sums per step (times the tiles per replica, padded)
ENERGY_ROWS = 4096


def interpreting() -> bool:
    """True under ``TRITON_INTERPRET=1`` (the kernels run on CPU tensors in Triton's interpreter: no GPU, slowly)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def triton_available() -> bool:
    """True when Triton imports and kernels can run: on a CUDA device, or anywhere under TRITON_INTERPRET=1."""
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return interpreting() or torch.cuda.is_available()


def check_device(t: torch.Tensor) -> None:
    """Raise unless kernels can run on ``t``'s device here."""
    if not triton_available():
        raise RuntimeError("flashschnet: Triton kernels need triton and a CUDA device (or TRITON_INTERPRET=1)")
    if not t.is_cuda and not interpreting():
        raise RuntimeError("flashschnet: Triton kernels run on CUDA tensors (CPU only under TRITON_INTERPRET=1)")


def compute_dtype(pos: torch.Tensor) -> torch.dtype:
    """The kernels' compute dtype: that of the positions (float32 or float64; else a TypeError)."""
    if pos.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"flashschnet: positions must be float32 or float64, got {pos.dtype}")
    return pos.dtype


@functools.lru_cache(maxsize=None)
def kernels():
    """``(cfconv, tiles, nodes)``, the kernel modules, imported (and, when interpreting, the interpreter patched)
    once, at the first launch."""
    from ..kernels import cfconv, nodes, tiles  # imported late: TRITON_INTERPRET must be set before triton is

    if interpreting():
        from ..kernels import interpreter

        interpreter.install()     # Triton 3.6's interpreter under numpy >= 2.4 (that module says why)
    return cfconv, tiles, nodes


@functools.lru_cache(maxsize=None)
def _multiprocessors(device: str) -> int:
    return int(torch.cuda.get_device_properties(torch.device(device)).multi_processor_count)


def persistent_programs(device, items: int, kernel: str, dtype=torch.float32, groups: int = 1,
                        sixteen: bool = False) -> int:
    """A persistent kernel's grid: its ``ctas_per_sm`` (:func:`config`) x the GPU's multiprocessors, at most
    ``items`` (the step's most items), :data:`INTERPRETER_PROGRAMS` when interpreting -- always a multiple of the
    channel ``groups`` (a program keeps its group: the exact kernels stage their group's weights once), at least
    one program per group."""
    groups = max(int(groups), 1)
    if interpreting() or torch.device(device).type != "cuda":
        g = INTERPRETER_PROGRAMS
    else:
        g = config(kernel, dtype, sixteen)["ctas_per_sm"] * _multiprocessors(str(torch.device(device)))
    g = min(g, items)
    return max(groups, g - g % groups)


class Launch(NamedTuple):
    """One kernel call: ``kernel[grid](*args, **meta, **options)``; ``cfg`` its :func:`config` (None: that of its
    kernel and compute dtype, the dtype of its first argument)."""

    kernel: Any
    grid: Tuple[int, ...]
    args: Tuple[Any, ...]
    meta: Dict[str, Any]
    cfg: Optional[Dict[str, Any]] = None

    @property
    def name(self) -> str:
        return self.kernel.__name__

    @property
    def config(self) -> Dict[str, Any]:
        return self.cfg if self.cfg is not None else config(self.name, self.args[0].dtype)

    @property
    def options(self) -> Dict[str, int]:
        """Triton's launch options for this launch (of its configuration)."""
        c = self.config
        return {k: c[k] for k in _TRITON_OPTIONS if c.get(k) is not None}


def run(launch: Launch) -> None:
    """Run ``launch`` with its kernel's launch options."""
    launch.kernel[launch.grid](*launch.args, **launch.meta, **launch.options)


# ------------------------------------------------------------------------------------------ one per kernel


def flags_launch(ws: Workspace, pos: torch.Tensor, cutoff: float, skin: float, length_scale: float = 1.0) -> Launch:
    """Scale ``pos`` into ``ws.pos`` and rebuild stale replicas' flags and work lists."""
    return Launch(kernels()[1]._tile_flags_kernel, (ws.R,),
                  (pos, ws.pos, ws.ref, ws.flags, ws.worklist, ws.counts, ws.builds, float(length_scale),
                   float(cutoff + skin), float((0.5 * skin) ** 2), ws.N, ws.T, ws.S),
                  dict(B=ws.block, TP=pow2(ws.T, 1)))


def reduce_launch(ws: Workspace, rowpart, colpart, out, W: int, WO: int, NP: int = 1) -> Launch:
    """``out [R, N, WO]`` = the tiles' sums of a partial buffer pair of width ``W`` (``NP`` partials per slot), in
    column blocks of at most 32."""
    return Launch(kernels()[1]._tile_reduce_kernel, (ws.R * ws.T,),
                  (rowpart, colpart, ws.flags, out, ws.N, ws.T, ws.S),
                  dict(B=ws.block, W=W, WO=WO, NP=NP, NPP=pow2(NP, 1), WC=min(W, 32)))


def _rp(ws: Workspace) -> int:
    return pow2(ws.R, 16)


def _sixteen(tp: TablePlan) -> bool:
    return tp.tab.dtype in (torch.float16, torch.bfloat16)


def _table_meta(ws: Workspace, tp: TablePlan, kernel: str) -> dict:
    return dict(B=ws.block, JB=config(kernel, ws.like.dtype, _sixteen(tp))["JB"], FC=tp.FC, FP=tp.FP, NCG=tp.NCG,
                Q=tp.Q, SCALE=tp.scaled, RP=_rp(ws))


def table_fwd_launch(ws: Workspace, tp: TablePlan, h, h_rs: int, programs: Optional[int] = None) -> Launch:
    k = "_cfconv_table_fwd_kernel"
    G = _grid(ws, k, tp.NCG, programs, _sixteen(tp))
    return Launch(kernels()[0]._cfconv_table_fwd_kernel, (G,),
                  (ws.pos, h, ws.worklist, ws.counts, ws.rowpart, ws.colpart, tp.tab, tp.scale, tp.scal, ws.R, ws.N,
                   ws.T, ws.S, int(h_rs), tp.n), _table_meta(ws, tp, k), config(k, ws.like.dtype, _sixteen(tp)))


def table_bwd_launch(ws: Workspace, tp: TablePlan, h, h_rs: int, gm, programs: Optional[int] = None) -> Launch:
    k = "_cfconv_table_bwd_kernel"
    G = _grid(ws, k, tp.NCG, programs, _sixteen(tp))
    return Launch(kernels()[0]._cfconv_table_bwd_kernel, (G,),
                  (ws.pos, h, gm, ws.worklist, ws.counts, ws.rowpart, ws.colpart, ws.prow, ws.pcol, tp.tab, tp.scale,
                   tp.scal, ws.R, ws.N, ws.T, ws.S, int(h_rs), tp.n), _table_meta(ws, tp, k),
                  config(k, ws.like.dtype, _sixteen(tp)))


def exact_groups(kernel: str) -> int:
    """The exact filter kernel's channel groups per tile pair (``groups`` of its configuration)."""
    return int(KERNEL_CONFIGS[kernel]["groups"])


def _meta(ws: Workspace, fp: FilterPlan, bp: BasisPlan, kernel: str) -> dict:
    groups = exact_groups(kernel)
    return dict(B=ws.block, JB=chunk(kernel, ws.like.dtype), KP=bp.KP, FC=fp.FP // groups, FP=fp.FP,
                NCG=groups, BASIS=bp.basis, RBF_ENV=bp.rbf_env, FILT_ENV=bp.filt_env, QUANT=fp.quant, DOT=fp.dot,
                EMU=interpreting(), RP=_rp(ws))


def _grid(ws: Workspace, kernel: str, groups: int, programs: Optional[int], sixteen: bool = False) -> int:
    """The persistent grid of a CFConv launch: ``programs`` (rounded up to a multiple of the channel ``groups``:
    a program keeps one group) or :func:`persistent_programs`."""
    if programs:
        return -(-int(programs) // groups) * groups
    return persistent_programs(ws.like.device, ws.R * ws.S * groups, kernel, ws.like.dtype, groups, sixteen)


def fwd_launch(ws: Workspace, fp: FilterPlan, bp: BasisPlan, h, h_rs: int, programs: Optional[int] = None) -> Launch:
    G = _grid(ws, "_cfconv_fwd_kernel", exact_groups("_cfconv_fwd_kernel"), programs)
    return Launch(kernels()[0]._cfconv_fwd_kernel, (G,),
                  (ws.pos, h, ws.worklist, ws.counts, ws.rowpart, ws.colpart, fp.A1, fp.a1, fp.A2, fp.s1, fp.s2,
                   bp.mu, bp.cf, bp.scal, ws.R, ws.N, ws.T, ws.S, int(h_rs)), _meta(ws, fp, bp, "_cfconv_fwd_kernel"))


def bwd_launch(ws: Workspace, fp: FilterPlan, bp: BasisPlan, h, h_rs: int, gm,
               programs: Optional[int] = None) -> Launch:
    G = _grid(ws, "_cfconv_bwd_kernel", exact_groups("_cfconv_bwd_kernel"), programs)
    return Launch(kernels()[0]._cfconv_bwd_kernel, (G,),
                  (ws.pos, h, gm, ws.worklist, ws.counts, ws.rowpart, ws.colpart, ws.prow, ws.pcol, fp.A1, fp.a1,
                   fp.A2, fp.s1, fp.s2, bp.mu, bp.cf, bp.scal, ws.R, ws.N, ws.T, ws.S, int(h_rs)),
                  _meta(ws, fp, bp, "_cfconv_bwd_kernel"))


def _mlp_args(plan: NodePlan) -> tuple:
    """The output MLP's pointers in the node kernels' order (``W0T, c0, W1T, c1, W2T, c2, wl, W0, W1, W2``;
    unused layers get the last layer's row as a placeholder)."""
    WT = plan.WT + [plan.wl] * (3 - plan.hidden)
    W = plan.W + [plan.wl] * (3 - plan.hidden)
    c = plan.c + [plan.wl] * (3 - plan.hidden)
    return (WT[0], c[0], WT[1], c[1], WT[2], c[2], plan.wl, W[0], W[1], W[2])


def node_programs(ws: Workspace) -> int:
    """The node kernels' persistent grid (one size for both, so they share the scratch): at most one program per
    destination tile."""
    return persistent_programs(ws.like.device, ws.R * ws.T, "_node_fwd_kernel", ws.like.dtype)


def node_buffers(ws: Workspace, plan: NodePlan) -> dict:
    """The workspace's node-layer buffers for ``plan`` (:meth:`~flashschnet.fused.workspace.Workspace.nodes`): the
    scratch holds :data:`~flashschnet.kernels.nodes.REGIONS` regions of ``B`` rows of the widest node width per
    node program."""
    return ws.nodes(plan.HP, len(plan.blocks), node_programs(ws), NODE_REGIONS * ws.block * plan.widest)


#: scratch regions per node program (``flashschnet.kernels.nodes.REGIONS``)
NODE_REGIONS = 6


def node_fwd_launch(ws: Workspace, plan: NodePlan, t: int, x, x_rs: int) -> Launch:
    """Block ``t``'s reduction and node layers, forward (its input ``x``: rows ``r * x_rs + bead``)."""
    nb, bufs = len(plan.blocks), node_buffers(ws, plan)
    blk = plan.blocks[t]
    last = t == nb - 1
    L1n = blk.L1T if last else plan.blocks[t + 1].L1T
    h_out = bufs["h"][t] if not last else bufs["gm"]       # the last block writes no next input (a placeholder)
    P = plan.widths
    return Launch(kernels()[2]._node_fwd_kernel, (node_programs(ws),),
                  (ws.rowpart, ws.colpart, ws.flags, x, bufs["x"], bufs["a"][t], h_out, bufs["scratch"], blk.L2T,
                   blk.b2, blk.LT, blk.b, L1n, blk.L, blk.L2, *_mlp_args(plan), bufs["epart"], bufs["gx"],
                   bufs["gm"], ws.R, ws.N, ws.T, ws.S, int(x_rs)),
                  dict(B=ws.block, FP=plan.FP, HP=plan.HP, LAST=last, P0=P[0], P1=P[1], P2=P[2],
                       PM=plan.widest_gradient, NH=plan.hidden, PMAX=plan.widest,
                       NC=config("_node_fwd_kernel", ws.like.dtype)["NC"]))


def node_bwd_launch(ws: Workspace, plan: NodePlan, t: int, energies, total, forces, energy_scale: float,
                    force_scale: float) -> Launch:
    """Block ``t``'s reductions and node layers, backward; block 0 writes ``energies [R]``, ``total [1]`` and
    ``forces [R, N, 3]`` (scaled)."""
    nb, bufs = len(plan.blocks), node_buffers(ws, plan)
    blk = plan.blocks[t]
    prev = plan.blocks[t - 1] if t > 0 else blk
    TP = pow2(ws.T, 1)
    return Launch(kernels()[2]._node_bwd_kernel, (node_programs(ws),),
                  (ws.rowpart, ws.colpart, ws.prow, ws.pcol, ws.flags, bufs["gx"], bufs["a"][max(t - 1, 0)],
                   bufs["gm"], bufs["facc"], bufs["scratch"], blk.L1, prev.L, prev.L2, bufs["epart"], energies, total,
                   forces, ws.R, ws.N, ws.T, ws.S, float(energy_scale), float(force_scale)),
                  dict(B=ws.block, FP=plan.FP, HP=plan.HP, NP=ws.NP, NPP=pow2(ws.NP, 1), FIRST=t == nb - 1,
                       LAST=t == 0, TP=TP, RC=max(1, ENERGY_ROWS // TP), PMAX=plan.widest,
                       NC=config("_node_bwd_kernel", ws.like.dtype)["NC"]))


# ------------------------------------------------------------------------------------------ every launch of a step


def step_launches(F: int = 128, K: int = 50, basis: str = "gaussian", rbf_env: bool = True, filt_env: bool = True,
                  N: int = 284, device="cpu"):
    """Every launch a float32 step of the triton engine's exact filter network can make on a GPU, for a model of
    filter width ``F``, ``K`` basis functions, that basis and those envelopes: ``[(variant, launch)]``
    (``tools/device/gpu_fit.py`` compiles them). Variants: matmul tf32 / bf16 / fp16 with float32 weights; channel-wise
    16-bit weights with products of their own type (with tf32 they are dequantized first: the tf32 kernels), and
    exact products are not launched on a GPU (:func:`~flashschnet.fused.plans.exact_on_cuda`). The flag, reduce
    and node kernels' launches are :func:`node_step_launches`, the tabulated filter's :func:`table_step_launches`."""
    from .plans import plan_basis, plan_filter

    dtype = torch.float32
    bp = plan_basis(torch.linspace(0.0, 10.0, K), -torch.ones(K), basis, 1.0, 0.0, 10.0, 10.0, 10.0, rbf_env,
                    filt_env, dtype, device)
    ws = Workspace(1, N, pow2(F, 32), dtype, device, NP=exact_groups("_cfconv_bwd_kernel"))
    h = torch.zeros(1, N, pow2(F, 32), dtype=dtype, device=device)
    A1, a1, A2 = torch.zeros(F, K), torch.zeros(F), torch.zeros(F, F)
    out = []
    cases = [("tf32", None), ("bf16", None), ("fp16", None), ("bf16", torch.bfloat16), ("fp16", torch.float16)]
    for dot, qdt in cases:
        if qdt is None:
            fp, name = plan_filter(A1, a1, A2, bp.KP, dtype, dot), dot
        else:
            fp = plan_filter(A1.to(qdt), a1, A2.to(qdt), bp.KP, dtype, dot, torch.ones(F), torch.ones(F))
            name = f"{dot}-weights"
        out.append((name, fwd_launch(ws, fp, bp, h, N, programs=1)))
        out.append((name, bwd_launch(ws, fp, bp, h, N, h, programs=1)))
    return out


def node_step_launches(F: int = 128, H: int = 128, widths=(128, 64), blocks: int = 3, N: int = 284, device="cpu"):
    """``[(variant, launch)]``: the flag kernel and the unfused path's reductions (widths FP and 4) in float32 and
    float64 (``/f64``: a compressed model also runs in float64 on a GPU), and the node kernels of a float32 step of a
    model with hidden width ``H``, filter width ``F``, output MLP ``widths`` and ``blocks`` interaction blocks (a
    float64 step on a GPU runs its node layers in PyTorch: :meth:`~flashschnet.fused.triton_engine.TritonTileEngine.
    energy_forces`)."""
    from ..nn.layout import NodeWeights
    from .node_plans import plan_nodes

    out = []
    for tag, dt in (("", torch.float32), ("/f64", torch.float64)):
        z = lambda *s: torch.zeros(*s, dtype=dt)        # noqa: E731
        FP = pow2(F, 32)
        blk = [{"L1": z(F, H), "L2": z(H, F), "b2": z(H), "L": z(H, H), "b": z(H)} for _ in range(blocks)]
        outs, n_in = [], H
        for w in widths:
            outs.append((z(w, n_in), z(w)))
            n_in = w
        outs.append((z(1, n_in), None))
        plan = plan_nodes(NodeWeights(embedding=z(25, H), blocks=blk, out=outs), FP, dt, device)
        ws = Workspace(1, N, FP, dt, device, NP=FP // 32)
        pos = torch.zeros(1, N, 3, dtype=dt, device=device)
        x = node_buffers(ws, plan)["x"]
        out += [(f"flags{tag}", flags_launch(ws, pos, 10.0, 1.0)),
                (f"W={FP}{tag}", reduce_launch(ws, ws.rowpart, ws.colpart, x, FP, F)),
                (f"W=4{tag}", reduce_launch(ws, ws.prow, ws.pcol, x, 4, 3, ws.NP))]
        if dt == torch.float64:
            continue
        e, tot, f = torch.zeros(1, dtype=dt), torch.zeros(1, dtype=dt), torch.zeros(1, N, 3, dtype=dt)
        out += [(f"middle{tag}", node_fwd_launch(ws, plan, 0, x, 0)),
                (f"last{tag}", node_fwd_launch(ws, plan, blocks - 1, x, N)),
                (f"first{tag}", node_bwd_launch(ws, plan, blocks - 1, e, tot, f, 1.0, 1.0)),
                (f"middle{tag}", node_bwd_launch(ws, plan, 1, e, tot, f, 1.0, 1.0)),
                (f"last{tag}", node_bwd_launch(ws, plan, 0, e, tot, f, 1.0, 1.0))]
    return out


#: table variants compiled by ``tools/device/gpu_fit.py``: (variant name, Q, storage dtype, compute dtype) -- float32
#: steps, and float64 ones (``/f64``: on a GPU a compressed model runs these kernels in float64 too)
TABLE_VARIANTS = [(f"{kind}-{short}{tag}", Q, tdt, cdt)
                  for tag, cdt in (("", torch.float32), ("/f64", torch.float64))
                  for kind, Q in (("cubic", 2), ("quintic", 3))
                  for short, tdt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16))]


def table_step_launches(F: int = 128, N: int = 284, device="cpu", knots: int = 256):
    """``[(variant, launch)]``: the forward and backward launches of every :data:`TABLE_VARIANTS` entry for a
    model of filter width ``F`` and ``N`` beads (``tools/device/gpu_fit.py`` compiles them, next to
    :func:`step_launches`)."""
    from .plans import plan_table

    out = []
    for name, Q, tdt, cdt in TABLE_VARIANTS:
        hh = torch.zeros(1, N, pow2(F, 32), dtype=cdt, device=device)
        tp = plan_table(torch.zeros(knots, Q, F, dtype=tdt), torch.ones(Q, F), 10.0, F, cdt, device, 10.0)
        w = Workspace(1, N, tp.FP, cdt, device, NP=tp.NCG)
        out.append((name, table_fwd_launch(w, tp, hh, N, programs=1)))
        out.append((name, table_bwd_launch(w, tp, hh, N, hh, programs=1)))
    return out
