"""The device checks' record keeping and decisions (``python tools/device_checks.py``, the GPU run of a lent
device machine, runs the stages; this module is what they share and what can be tested without a device).

* :class:`Stage` -- what a stage records (``results``, ``skips``, ``errors``), saved as JSON after every item;
  an item runs only if the stage's deadline leaves it the time it needs (else a skip with the reason), and an
  item's exception is recorded, not raised;
* :func:`precision_checks` -- the measured float32 errors against the oracle held to the prediction of
  ``docs/tf32-accuracy.json`` (``tools/tf32_accuracy.py``; :mod:`flashschnet.fused.emulation`): pass if
  ``measured <= PREDICTION_FACTOR * predicted + PREDICTION_ABS``;
* :func:`openmm_plan` -- the OpenMM rows in the order they run, the most important first.
"""
from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from flashschnet.fused.emulation import ORACLE

__all__ = ["OPENMM_VARIANTS", "TORCH", "GRAPH", "PYTHON", "HEADLINE_R", "PREDICTION_FACTOR", "PREDICTION_ABS",
           "BOOKKEEPING", "log", "write_json", "Stage", "precision_checks", "openmm_plan"]

#: the OpenMM rows' variants of the kernel backend (float32 weights unless said): name -> quantize, matmul, compress
OPENMM_VARIANTS = {"tf32": dict(quantize="none", matmul="auto", compress="none"),
                   "bf16 products": dict(quantize="none", matmul="bf16", compress="none"),
                   "bf16 weights": dict(quantize="bf16", matmul="auto", compress="none"),
                   "float32 tables": dict(quantize="none", matmul="auto", compress="float32")}
#: the OpenMM network forces: a TorchForce, the same with openmm-torch's CUDA graph, an openmm.PythonForce
TORCH, GRAPH, PYTHON = "TorchForce", "TorchForce+CUDA graph", "PythonForce"
#: the headline R of the OpenMM rows (and the R of the parallel-tempering row); the largest R if not measured
HEADLINE_R = 64
#: the precision check's rule (the prediction: docs/tf32-accuracy.json's "prediction"): pass if
#: measured <= PREDICTION_FACTOR * predicted + PREDICTION_ABS, for the energy and the forces
PREDICTION_FACTOR, PREDICTION_ABS = 2.0, 1e-6
#: the fields of a record that are not measurements
BOOKKEEPING = ("item", "status", "seq", "wall_s")


def log(msg: str) -> None:
    """A progress line (unbuffered)."""
    print(f"[device-checks {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_json(obj: Any, path: Path) -> None:
    """Write ``obj`` atomically: a JSON file at ``path`` is always complete."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")
    os.replace(tmp, path)


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
        """Run ``fn`` (it returns a JSON-able dict) as ``item``; record its result, its error (not raised) or, when
        the deadline leaves less than ``need_s`` seconds, a skip; ``tags`` are fields of the record.

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
            out = dict(tags, item=item, status="ok", **fn())
        except Exception as exc:  # recorded; the stage goes on
            self.add("errors", dict(tags, item=item, status="error", error=f"{type(exc).__name__}: {exc}"[:500],
                                    traceback=traceback.format_exc()[-2000:]))
            log(f"{item}: FAILED: {type(exc).__name__}: {exc}")
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
                          "error": f"cannot read {path}: {type(exc).__name__}: {exc}"[:500]})
        return
    oracle = ORACLE
    if pred.get("oracle") and Path(pred["oracle"]).name != Path(ORACLE).name:
        st.add("errors", {"item": "tf32 check", "status": "error", "check": "tf32",
                          "error": f"{path} predicts for {pred['oracle']}, not {oracle}"})
        return
    rows = {(r["backend"], r.get("matmul", "auto")): r for r in st.data["results"]
            if "energy_rel_err_vs_oracle" in r and r["quantize"] == "none" and r.get("compress", "none") == "none"}
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
        row = rows.get(measured[key])
        if row is None:
            st.skip(item, f"no measured row for {measured[key][0]} matmul {measured[key][1]} (failed or skipped)",
                    check=key)
            continue
        p = pred[key]
        out = {"check": key, "backend": measured[key][0], "matmul": measured[key][1], "rule": rule,
               "prediction_file": str(path), "oracle": oracle}
        passed = True
        for q in ("energy", "forces"):
            predicted, got = float(p[f"{q}_rel_err_vs_float64"]), float(row[f"{q}_rel_err_vs_oracle"])
            limit = PREDICTION_FACTOR * predicted + PREDICTION_ABS
            out.update({f"{q}_predicted": predicted, f"{q}_measured": got, f"{q}_limit": limit})
            passed = passed and got <= limit
        out["passed"] = passed
        if key == "tf32" and "tf32_rz" in pred:  # diagnostic: within the rule on truncated (round-to-zero) tf32?
            rz = pred["tf32_rz"]
            out["within_tf32_rz_rule"] = all(
                float(row[f"{q}_rel_err_vs_oracle"]) <= PREDICTION_FACTOR * float(rz[f"{q}_rel_err_vs_float64"])
                + PREDICTION_ABS for q in ("energy", "forces"))
        st.run(item, lambda: out)
        if not passed:
            log(f"{item}: FAIL")
            st.add("errors", {"item": item, "status": "error", "check": key,
                              "error": (f"FAIL: measured E {out['energy_measured']:.2e} F {out['forces_measured']:.2e}"
                                        f" vs predicted E {out['energy_predicted']:.2e} F "
                                        f"{out['forces_predicted']:.2e}: not {rule}")})


def openmm_plan(args, torch_ok: bool) -> List[Dict[str, Any]]:
    """The OpenMM rows of the grid in the order they run, most important first: the kernel backend's tf32
    TorchForce at the smallest R (the probe of a platform) and at the headline R, the reference's TorchForce at
    the reference R (the speed ratio), the CUDA-graph TorchForce and the PythonForce at the headline R, the
    MARTINI and parallel-tempering rows, then the rest of the grid (every variant x R x TorchForce with and
    without CUDA graph) and the PythonForce at the smallest R. Without openmm-torch (``torch_ok`` False) every
    TorchForce row is a PythonForce row (the fallback). Each row: ``variant``, ``backend``, ``force``,
    ``replicas`` and the variant's ``quantize`` / ``matmul`` / ``compress``, or ``kind`` martini / tempering."""
    Rs = args.openmm_replicas
    head = HEADLINE_R if HEADLINE_R in Rs else max(Rs)
    refs = [R for R in args.reference_replicas if R in Rs] or [head]
    k, main = args.kernel_backend, TORCH if torch_ok else PYTHON

    def row(variant, force, R, backend=None, kind="openmm"):
        opts = OPENMM_VARIANTS.get(variant, OPENMM_VARIANTS["tf32"])
        return dict(opts, variant=variant, backend=backend or k, force=force, replicas=R, kind=kind)

    plan = [row("tf32", main, min(Rs)), row("tf32", main, head)]
    if "reference" in args.backends and k != "reference":
        plan += [row("exact", main, R, backend="reference") for R in sorted(refs, key=lambda R: R != head)]
    plan += [row("tf32", GRAPH, head), row("tf32", PYTHON, head), dict(kind="martini"),
             row("tf32", main, head, kind="tempering")]
    plan += [row(v, f, R) for R in Rs for v in OPENMM_VARIANTS for f in (main, GRAPH)]
    plan.append(row("tf32", PYTHON, min(Rs)))
    seen, out = set(), []
    for r in plan:
        key = tuple(sorted(r.items()))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out
