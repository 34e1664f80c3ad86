"""The device checks' record keeping and plans (``python tools/device/device_checks.py``, the GPU run of a lent device
machine, runs the stages of :mod:`.device_main`; this module is what they share and what can be tested without a
device). Nothing here imports OpenMM or torch at import time.

* :class:`Stage` -- what a stage records (``results``, ``skips``, ``errors``), saved as JSON after every item;
  an item runs only if the stage's deadline leaves it the time it needs (else a skip with the reason), and an
  item's exception is recorded as one line (:func:`one_line`), not raised;
* :func:`precision_checks` -- the measured float32 errors against the oracle held to the prediction of
  ``docs/tf32-accuracy.json`` (``tools/device/tf32_accuracy.py``; :mod:`flashschnet.fused.emulation`): pass if
  ``measured <= PREDICTION_FACTOR * predicted + PREDICTION_ABS``;
* the row plans, each in the order its rows run, the most important first: :func:`timing_plan` (``energy_forces``
  of the checkout's tree), :func:`baseline_plan` (the rows the baseline tree repeats, :data:`BASELINE_COMMIT`),
  :func:`openmm_plan` (the OpenMM loop, the do-nothing force, the reference, lysozyme, the R grid);
* :func:`config` -- a plan row as a :mod:`.measure` configuration (what a row worker runs, :mod:`.device_rows`).
"""
from __future__ import annotations

import json
import os
import re
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

__all__ = ["NETWORKS", "DEFAULT_NETWORK", "TORCH", "GRAPH", "PYTHON", "HEADLINE_R", "BASELINE_COMMIT", "STRUCTURES",
           "PREDICTION_FACTOR", "PREDICTION_ABS", "BOOKKEEPING", "log", "write_json", "one_line", "Stage",
           "precision_checks", "pair_of", "row", "timing_plan", "baseline_plan", "openmm_plan", "row_key",
           "row_label", "openmm_steps", "config", "structure_path", "ROW_TAGS"]

#: the networks of the timing rows (float32 weights): name -> the model options. "float32 tables" is the default
#: network (flashschnet-simulate's: float32 filter tables); "/graph": the model's own CUDA graph
#: (``CGSchNet(cuda_graph=True)``: the whole fused step captured once and replayed); "tf32" / "bf16 products": the
#: exact filter network with tf32 or bf16 matrix products; "exact": the reference backend as it comes
NETWORKS = {"float32 tables": dict(compress="float32", matmul="auto", quantize="none", cuda_graph=False),
            "float32 tables/graph": dict(compress="float32", matmul="auto", quantize="none", cuda_graph=True),
            "tf32": dict(compress="none", matmul="auto", quantize="none", cuda_graph=False),
            "bf16 products": dict(compress="none", matmul="bf16", quantize="none", cuda_graph=False),
            "exact": dict(compress="none", matmul="auto", quantize="none", cuda_graph=False)}
DEFAULT_NETWORK = "float32 tables"
#: the OpenMM network forces: a TorchForce, the same with openmm-torch's CUDA graph, an openmm.PythonForce
TORCH, GRAPH, PYTHON = "TorchForce", "TorchForce+CUDA graph", "PythonForce"
#: the headline R of the rows (the targets' R; the R of the parallel-tempering row); the largest R if not measured
HEADLINE_R = 64
#: the baseline of the side-by-side rows: the last commit before the kernel rewrite
#: (tools/device/fetch_device_baseline.sh)
BASELINE_COMMIT = "f4fff81"
#: the structures of the rows: name -> its file under the checkout (None: the benchmark's packaged BPTI)
STRUCTURES = {"bpti": None, "lysozyme": "tests/data/structures/1HEL_lysozyme.pdb"}
#: the precision check's rule (the prediction: docs/tf32-accuracy.json's "prediction"): pass if
#: measured <= PREDICTION_FACTOR * predicted + PREDICTION_ABS, for the energy and the forces
PREDICTION_FACTOR, PREDICTION_ABS = 2.0, 1e-6
#: the fields of a record that are not measurements
BOOKKEEPING = ("item", "status", "seq", "wall_s")
#: the fields of a plan row a record carries (with the configuration's backend options)
ROW_TAGS = ("kind", "tree", "structure", "variant", "backend", "replicas", "force")


def log(msg: str) -> None:
    """A progress line (unbuffered)."""
    print(f"[device-checks {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_json(obj: Any, path: Path) -> None:
    """Write ``obj`` atomically: a JSON file at ``path`` is always complete."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def one_line(text: str, limit: int = 400) -> str:
    """``text`` as one line of at most ``limit`` characters: whitespace runs become one space; a longer text keeps
    its start and its end (where a TorchScript traceback says what failed)."""
    flat = re.sub(r"\s+", " ", str(text)).strip()
    if len(flat) <= limit:
        return flat
    head = limit // 3
    return flat[:head] + " ... " + flat[-(limit - head - 5):]


class Stage:
    """What a stage records (``results``, ``skips``, ``errors``; each entry tagged with its ``item`` name,
    ``status`` ok|skipped|error and ``seq``, its place in the stage's order), saved to ``path`` after every item."""

    def __init__(self, path: str, deadline: float):
        self.path, self.deadline = Path(path), deadline
        self.data: Dict[str, Any] = {"results": [], "skips": [], "errors": []}

    def left(self) -> float:
        """Seconds to the stage's deadline."""
        return self.deadline - time.time()

    def add(self, kind: str, entry: Dict[str, Any]) -> Dict[str, Any]:
        """Append ``entry`` to ``results``, ``skips`` or ``errors`` and save."""
        entry["seq"] = sum(len(v) for k, v in self.data.items() if k in ("results", "skips", "errors"))
        self.data[kind].append(entry)
        write_json(self.data, self.path)
        return entry

    def skip(self, item: str, reason: str, **tags) -> None:
        """Record ``item`` as not run, and why."""
        self.add("skips", dict(tags, item=item, status="skipped", reason=reason))
        log(f"{item}: skipped: {reason}")

    def run(self, item: str, fn: Callable[[], Dict[str, Any]], need_s: float = 0.0, **tags) -> Optional[Dict]:
        """Run ``fn`` (it returns a JSON-able dict) as ``item``; record its result, its error (one line, not raised;
        an exception's ``details`` dict, if any, joins the record; a ``bare`` exception's message is its own one line,
        without its type) or, when the deadline leaves less than
        ``need_s`` seconds, a skip; ``tags`` are fields of the record.

        Returns
        -------
        dict or None
            The result's record (``tags``, ``item``, ``status``, ``seq``, ``wall_s`` and ``fn``'s dict), or None.
        """
        if self.left() < need_s:
            self.skip(item, f"stage deadline: {max(self.left(), 0):.0f} s left, {need_s:.0f} s wanted", **tags)
            return None
        log(f"{item} ...")
        t0 = time.perf_counter()
        try:
            got = {k: v for k, v in fn().items() if k not in BOOKKEEPING}
            out = dict(tags, item=item, status="ok", **got)
        except Exception as exc:  # recorded; the stage goes on
            error = one_line(str(exc) if getattr(exc, "bare", False) else f"{type(exc).__name__}: {exc}")
            self.add("errors", dict(tags, item=item, status="error", error=error,
                                    traceback=traceback.format_exc()[-2000:], **getattr(exc, "details", {}),
                                    wall_s=round(time.perf_counter() - t0, 3)))
            log(f"{item}: FAILED: {error}")
            return None
        out["wall_s"] = round(time.perf_counter() - t0, 3)
        shown = {k: v for k, v in out.items() if k not in tags and k not in BOOKKEEPING + ("times_ms",)}
        log(f"{item}: ok ({out['wall_s']:.1f} s) " + json.dumps(shown, default=str)[:400])
        return self.add("results", out)


def precision_checks(args, st: Stage) -> None:
    """The measured float32 errors vs the oracle (this stage's rows) against ``--prediction``'s ``prediction``
    (docs/tf32-accuracy.json: per product precision, ``energy_rel_err_vs_float64`` and
    ``forces_rel_err_vs_float64``, :func:`~flashschnet.fused.emulation.rel` of float32 output vs the oracle's
    float64; ``args``: ``prediction`` (its path) and ``kernel_backend``): pass if
    ``measured <= PREDICTION_FACTOR * predicted + PREDICTION_ABS`` for both. triton (CUDA): ``tf32`` (float32
    weights, matmul auto), ``ieee`` and ``bf16`` (matmul ieee / bf16) where predicted; another kernel backend
    (a CPU): ``ieee`` (it computes exact float32 products), tf32 and bf16 skipped with the reason. A record per
    check (predicted, measured, rule, ``passed``); a failed check adds an error; no file: a skip."""
    from flashschnet.fused.emulation import ORACLE

    path = Path(args.prediction)
    if st.left() < 0:
        st.skip("tf32 check", f"stage deadline: {max(st.left(), 0):.0f} s left", check="tf32")
        return
    if not path.exists():
        st.skip("tf32 check", f"no prediction: {path} does not exist (yet)", check="tf32")
        return
    try:
        doc = json.loads(path.read_text())
        pred = doc["prediction"]
    except Exception as exc:  # an unreadable prediction is a failure of the check
        st.add("errors", {"item": "tf32 check", "status": "error", "check": "tf32",
                          "error": one_line(f"cannot read {path}: {type(exc).__name__}: {exc}")})
        return
    oracle = ORACLE
    if pred.get("oracle") and Path(pred["oracle"]).name != Path(ORACLE).name:
        st.add("errors", {"item": "tf32 check", "status": "error", "check": "tf32",
                          "error": f"{path} predicts for {pred['oracle']}, not {oracle}"})
        return
    rows = {(r["backend"], r.get("matmul", "auto")): r for r in st.data["results"]
            if "energy_rel_err_vs_oracle" in r and r["quantize"] == "none" and r.get("compress", "none") == "none"
            and not r.get("cuda_graph")}
    k = args.kernel_backend
    if k == "triton":
        measured = {"tf32": ("triton", "auto"), "ieee": ("triton", "ieee"), "bf16": ("triton", "bf16")}
    else:
        measured = {"ieee": (k, "auto")}
    rule = f"measured <= {PREDICTION_FACTOR:g} x predicted + {PREDICTION_ABS:g} (energy and forces)"
    for key in ("tf32", "ieee", "bf16"):
        item = f"{key} check vs {path.name}"
        if key not in measured:
            if key == "tf32" or key in pred:
                st.skip(item, f"backend {k} computes exact float32 products (tf32 / bf16 products: the triton "
                              "backend on CUDA)", check=key)
            continue
        if key not in pred:
            if key == "tf32":
                st.skip(item, f"{path.name} predicts no tf32 errors", check=key)
            continue
        row_ = rows.get(measured[key])
        if row_ is None:
            st.skip(item, f"no measured row for {measured[key][0]} matmul {measured[key][1]} (failed or skipped)",
                    check=key)
            continue
        p = pred[key]
        out = {"check": key, "backend": measured[key][0], "matmul": measured[key][1], "rule": rule,
               "prediction_file": str(path), "oracle": oracle}
        passed = True
        for q in ("energy", "forces"):
            predicted, got = float(p[f"{q}_rel_err_vs_float64"]), float(row_[f"{q}_rel_err_vs_oracle"])
            limit = PREDICTION_FACTOR * predicted + PREDICTION_ABS
            out.update({f"{q}_predicted": predicted, f"{q}_measured": got, f"{q}_limit": limit})
            passed = passed and got <= limit
        out["passed"] = passed
        if key == "tf32" and "tf32_rz" in pred:  # diagnostic: within the rule on truncated (round-to-zero) tf32?
            rz = pred["tf32_rz"]
            out["within_tf32_rz_rule"] = all(
                float(row_[f"{q}_rel_err_vs_oracle"]) <= PREDICTION_FACTOR * float(rz[f"{q}_rel_err_vs_float64"])
                + PREDICTION_ABS for q in ("energy", "forces"))
        st.run(item, lambda: out)
        if not passed:
            log(f"{item}: FAIL")
            st.add("errors", {"item": item, "status": "error", "check": key,
                              "error": (f"FAIL: measured E {out['energy_measured']:.2e} F {out['forces_measured']:.2e}"
                                        f" vs predicted E {out['energy_predicted']:.2e} F "
                                        f"{out['forces_predicted']:.2e}: not {rule}")})


# ------------------------------------------------------------------------------------------------ the plans
def pair_of(Rs: List[int]) -> List[int]:
    """The two R of the headline rows: the smallest R and :data:`HEADLINE_R` (the largest R if 64 is not among
    ``Rs``), once each."""
    head = HEADLINE_R if HEADLINE_R in Rs else max(Rs)
    return sorted({min(Rs), head})


def row(kind: str, variant: str, R: int, force: Optional[str] = None, tree: str = "current",
        structure: str = "bpti", backend: Optional[str] = None) -> Dict[str, Any]:
    """A plan row: ``kind`` energy_forces | openmm | overhead (the do-nothing force) | tempering, the network
    ``variant`` (:data:`NETWORKS`), R, the OpenMM ``force`` (:data:`TORCH`, :data:`GRAPH`, :data:`PYTHON`), the
    source ``tree`` (current | baseline), the ``structure`` (:data:`STRUCTURES`) and the ``backend`` (None: the
    kernel backend; "reference" for the exact variant)."""
    out = dict(kind=kind, tree=tree, structure=structure, variant=variant, replicas=int(R),
               backend=backend or ("reference" if variant == "exact" else None))
    if kind != "energy_forces":
        out["force"] = force or TORCH
    return out


def _unique(plan: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    seen, out = set(), []
    for r in plan:
        key = json.dumps(r, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _reference_rs(args, Rs: List[int]) -> List[int]:
    """The reference's R among ``Rs``, the headline R first (else the headline R alone)."""
    head = pair_of(Rs)[-1]
    refs = [R for R in args.reference_replicas if R in Rs] or [head]
    return sorted(refs, key=lambda R: R != head)


def timing_plan(args) -> List[Dict[str, Any]]:
    """The ``energy_forces`` rows of the checkout's tree, most important first: the rows the baseline repeats
    (float32 tables with and without the model's CUDA graph, tf32 products, at the smallest and the headline R),
    the reference (``--reference-replicas``, the headline R first: the speed and memory ratios), bf16 products,
    the R grid (``--replicas``) of the default network with and without the graph, then lysozyme (float32 tables
    with and without the graph at the two headline R: how the cost grows with size)."""
    Rs, k = args.replicas, args.kernel_backend
    pair = pair_of(Rs)
    plan = [row("energy_forces", v, R) for v in ("float32 tables/graph", "float32 tables", "tf32") for R in pair]
    if "reference" in args.backends and k != "reference":
        plan += [row("energy_forces", "exact", R) for R in sorted(args.reference_replicas,
                                                                   key=lambda R: R != pair[-1])]
    plan += [row("energy_forces", "bf16 products", R) for R in pair]
    plan += [row("energy_forces", v, R) for R in Rs for v in ("float32 tables/graph", "float32 tables")]
    plan += [row("energy_forces", v, R, structure="lysozyme") for v in ("float32 tables/graph", "float32 tables")
             for R in pair]
    return _unique(plan)


def baseline_plan(args) -> List[Dict[str, Any]]:
    """The rows the baseline tree (:data:`BASELINE_COMMIT`) repeats for the side-by-side ratios, most important
    first: ``energy_forces`` of float32 tables + the model's graph and of tf32 products, the OpenMM loop of float32
    tables with openmm-torch's CUDA graph and of tf32 products as a TorchForce, at the two headline R; then
    float32 tables as a plain TorchForce and in ``energy_forces`` without the graph."""
    pair, opair = pair_of(args.replicas), pair_of(args.openmm_replicas)
    plan = [row("energy_forces", v, R, tree="baseline") for v in ("float32 tables/graph", "tf32") for R in pair]
    plan += [row("openmm", "float32 tables", R, GRAPH, tree="baseline") for R in opair]
    plan += [row("openmm", "tf32", R, TORCH, tree="baseline") for R in opair]
    plan += [row("openmm", "float32 tables", R, TORCH, tree="baseline") for R in opair]
    plan += [row("energy_forces", "float32 tables", R, tree="baseline") for R in pair]
    return _unique(plan)


def openmm_plan(args, torch_ok: bool) -> List[Dict[str, Any]]:
    """The OpenMM rows of the checkout's tree in the order they run, most important first: the default network
    (float32 tables) as a TorchForce at the smallest R (the probe of a platform) and at the headline R, the same
    with openmm-torch's CUDA graph; the do-nothing force (:mod:`.overhead`) at those R with and without the graph
    (OpenMM's share of a step); the reference's TorchForce at ``--reference-replicas`` (the speed ratio); tf32
    products with and without the graph (the baseline's rows); the model's own CUDA graph inside the TorchForce;
    the PythonForce (the network, and the do-nothing one) at the smallest R; lysozyme; then the R grid
    (``--openmm-replicas``) of the default network and the do-nothing force, bf16 products, and a
    parallel-tempering run of R = headline walkers. Without openmm-torch (``torch_ok`` False) every TorchForce row
    is a PythonForce row (the fallback; the CUDA-graph rows stay, to be skipped)."""
    Rs = args.openmm_replicas
    pair = pair_of(Rs)
    low, head = pair[0], pair[-1]
    main = TORCH if torch_ok else PYTHON
    t = "float32 tables"
    plan = [row("openmm", t, low, main), row("openmm", t, head, main)]
    plan += [row("openmm", t, R, GRAPH) for R in pair]
    plan += [row("overhead", "none", R, f) for f in (main, GRAPH) for R in pair]
    if "reference" in args.backends and args.kernel_backend != "reference":
        plan += [row("openmm", "exact", R, main) for R in _reference_rs(args, Rs)]
    plan += [row("openmm", "tf32", R, f) for f in (main, GRAPH) for R in pair]
    plan += [row("openmm", "float32 tables/graph", R, main) for R in pair]
    plan += [row("openmm", t, low, PYTHON), row("overhead", "none", low, PYTHON)]
    plan += [row("openmm", t, R, f, structure="lysozyme") for f in (GRAPH, main) for R in pair]
    plan += [row(kind, v, R, f) for R in Rs for kind, v in (("openmm", t), ("overhead", "none")) for f in (main, GRAPH)]
    plan += [row("openmm", "bf16 products", R, f) for f in (main, GRAPH) for R in pair]
    plan.append(row("tempering", t, head, main))
    return _unique(plan)


def row_key(r: Dict[str, Any]) -> tuple:
    """What makes two rows the same configuration at another R (a record's fields or a plan row's)."""
    return (r.get("kind"), r.get("tree", "current"), r.get("structure", "bpti"), r.get("variant"), r.get("backend"),
            r.get("force") or r.get("openmm_force"))


def row_label(r: Dict[str, Any], kernel_backend: str) -> str:
    """A row's name in the log and its record's ``item``."""
    net = NETWORKS.get(r["variant"], {})
    backend = r.get("backend") or kernel_backend
    from .report import label

    what = "do-nothing force" if r["kind"] == "overhead" else label(
        backend, net.get("quantize", "none"), net.get("matmul", "auto"), net.get("cuda_graph", False),
        net.get("compress", "none"))
    force = f" [{r['force']}]" if r.get("force") else ""
    pt = " parallel tempering" if r["kind"] == "tempering" else ""
    return f"{r['tree']} {what}{force}{pt} {r['structure']} R={r['replicas']}"


def openmm_steps(args, R: int) -> int:
    """Timed steps of an OpenMM row at R: ``--openmm-steps``, more at small R (``--openmm-steps-r1`` / R), so that
    a fast step still times a loop long enough to read."""
    return max(int(args.openmm_steps), int(getattr(args, "openmm_steps_r1", 0) or 0) // max(int(R), 1))


def structure_path(args, name: str) -> str:
    """The absolute path of structure ``name`` (:data:`STRUCTURES`; ``--pdb`` replaces BPTI)."""
    if name == "bpti":
        if getattr(args, "pdb", None):
            return str(Path(args.pdb).resolve())
        from .defaults import DEFAULT_PDB_NAME
        from flashschnet.examples import example_path

        return str(Path(example_path(DEFAULT_PDB_NAME)).resolve())
    return str((Path(args.root) / STRUCTURES[name]).resolve())


def config(args, r: Dict[str, Any], platform: Optional[str] = None) -> Dict[str, Any]:
    """The :mod:`.measure` configuration of plan row ``r`` (JSON-able; the built-in model, float32): energy_forces
    with ``--warmup`` and ``--repeats``; the OpenMM kinds with :func:`openmm_steps`, the ``platform``, the network
    force and openmm-torch's CUDA graph; the do-nothing force through ``call`` (:func:`.overhead.null_loop`)."""
    net = NETWORKS.get(r["variant"], NETWORKS["exact"])
    cfg = dict(net, pdb=structure_path(args, r["structure"]), model=None, device=args.device, dtype="float32",
               threads=int(args.threads or os.cpu_count() or 1), warmup=int(args.warmup),
               backend=r.get("backend") or args.kernel_backend, replicas=int(r["replicas"]),
               kind="openmm" if r["kind"] == "overhead" else r["kind"])
    if r["kind"] == "energy_forces":
        cfg["repeats"] = int(args.repeats)
        return cfg
    steps = openmm_steps(args, r["replicas"])
    cfg.update(steps=steps, platform=platform, network_force="python" if r["force"] == PYTHON else "torch",
               torch_cuda_graph=r["force"] == GRAPH)
    if r["kind"] == "overhead":
        cfg["call"] = "flashschnet.openmm.benchmark.overhead:null_loop"
    if r["kind"] == "tempering":
        cfg["exchange_interval"] = min(10, steps)
    return cfg
