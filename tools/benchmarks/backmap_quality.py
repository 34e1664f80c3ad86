"""How good is flashschnet-backmap: map -> backmap -> compare with the original.

    python tools/benchmarks/backmap_quality.py [--structures DIR] [--mappings 5bead,ca] [--side-chains faspr|templates]
                                               [--md-frames 50] [--md-interval 200] [--workers 1]
                                               [--json docs/backmapping.json] [--skip-md]

Two sets, for each mapping (5 beads: N, CA, CB, C, O; CA):

* every PDB in ``--structures`` (default ``../shared/structures``, else tests/data/structures): cleaned as
  flashschnet-simulate cleans it (:func:`flashschnet.openmm.cleaning.clean_pdb`), mapped, rebuilt by
  :class:`flashschnet.openmm.backmap.Rebuilder` from those beads, compared with the cleaned structure;
* ``--md-frames`` frames of all-atom MD of trp-cage (:func:`flashschnet.openmm.reference_md.reference_md`, amber14
  + GBn2, 300 K, ``--md-interval`` steps of 2 fs apart, seed 1; run once for both mappings): each frame mapped to
  its beads, rebuilt (:func:`flashschnet.openmm.backmap.backmap_frames`, ``--workers`` processes), compared with
  the MD frame.

Per structure / frame: backbone (N, CA, C, O) and all-heavy-atom RMSD (no superposition), heavy-atom clashes
(< 2.2 A, not bonded or 1-3), D residues that were L in the original, cis peptide bonds that were trans in the original, the mapped atoms'
largest distance from their beads, the minimiser's convergence; side-chain RMSD per residue type over both sets;
frames per second (wall time of the rebuilds, this machine). Prints a table; writes the JSON (docs/backmapping.md
quotes it).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch  # noqa: F401  (torch before openmm)

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TARGET = {"backbone_rmsd_A": 0.3, "heavy_rmsd_A": 2.0}


def _row(name, q, check, seconds, d_before=()):
    """One table row; ``d_before``: residues D in the original (a D residue stays D: not counted)."""
    return {"name": name, "backbone_rmsd_A": 10 * q["backbone_rmsd_nm"], "heavy_rmsd_A": 10 * q["heavy_rmsd_nm"],
            "heavy_atoms": q["n_heavy"], "missing_atoms": q["missing"], "clashes": len(check.clashes),
            "closest_clash_A": 10 * min((c[2] for c in check.clashes), default=float("nan")),
            "d_residues": len(set(check.d_residues) - set(d_before)), "d_in_original": len(d_before), "new_cis": len(check.new_cis),
            "max_deviation_A": 10 * check.max_deviation_nm, "converged": check.converged, "seconds": seconds}


def _side(acc, q):
    for name, v in q["side_chain"].items():
        a = acc.setdefault(name, [0.0, 0])
        a[0] += v["rmsd_nm"] ** 2 * v["atoms"]
        a[1] += v["atoms"]


def structures(folder: Path, acc, echo, settings, mapping="5bead"):
    import openmm.app as app
    import openmm.unit as unit

    from flashschnet.errors import InputError
    from flashschnet.openmm import cg_topology
    from flashschnet.openmm.backmap import Rebuilder, build_skeleton, checks, compare
    from flashschnet.openmm.cleaning import clean_pdb

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for pdb in sorted(folder.glob("*.pdb")):
            try:
                cleaned = clean_pdb(str(pdb))
                ref_path = cleaned.write(os.path.join(tmp, pdb.stem + ".pdb"))
                mol = cleaned.molecule(mapping)
            except InputError as exc:
                rows.append({"name": pdb.stem, "error": str(exc)})
                continue
            t0 = time.perf_counter()
            rebuilder = Rebuilder(build_skeleton(cg_topology(mol), ref_path, pdb.name), settings)
            result = rebuilder.frame(mol.positions / 10.0)
            seconds = time.perf_counter() - t0
            ref = app.PDBFile(ref_path)
            ref_nm = ref.getPositions(asNumpy=True).value_in_unit(unit.nanometer)
            q = compare(ref.topology, ref_nm, rebuilder.topology, result.positions_nm)
            _side(acc, q)
            rows.append(_row(pdb.stem, q, result.check, seconds, checks.d_residues(ref_nm, ref.topology)))
            echo(_fmt(rows[-1]))
    return rows


def _md_topology(atoms):
    """An OpenMM topology of the MD atoms (residue index, name, atom name, element per atom): enough for
    :func:`compare` and :func:`beads_of` (no bonds)."""
    import openmm.app as app

    top = app.Topology()
    chain = top.addChain("A")
    residues = {}
    for ri, rname, aname, el in atoms:
        ri = int(ri)
        if ri not in residues:
            residues[ri] = top.addResidue(str(rname), chain, str(ri + 1))
        top.addAtom(str(aname), app.Element.getBySymbol(str(el)) if el else None, residues[ri])
    return top


def md_data(frames: int, interval: int, echo, tmp: str):
    """``frames`` frames of all-atom MD of trp-cage (the npz of reference_md, loaded) and the seconds it took."""
    from flashschnet.openmm.reference_md import reference_md

    pdb = ROOT / "examples" / "1L2Y_trpcage.pdb"
    t0 = time.perf_counter()
    data = dict(np.load(reference_md(str(pdb), os.path.join(tmp, "md"), frames=frames, interval=interval, seed=1,
                                     progress=False, echo=echo)))
    return data, time.perf_counter() - t0


def md_frames(data, md_seconds: float, interval: int, workers: int, acc, echo, settings, mapping="5bead"):
    from flashschnet.openmm import cg_topology
    from flashschnet.openmm.backmap import backmap_frames, beads_of, build_skeleton, checks, compare
    from flashschnet.openmm.cleaning import clean_pdb

    pdb = ROOT / "examples" / "1L2Y_trpcage.pdb"
    with tempfile.TemporaryDirectory() as tmp:
        cleaned = clean_pdb(str(pdb))
        ref_path = cleaned.write(os.path.join(tmp, "cleaned.pdb"))
        cg_top = cg_topology(cleaned.molecule(mapping))
        md_top = _md_topology(data["atoms"])
        xyz = data["positions_nm"].astype(np.float64)
        beads = np.stack([beads_of(cg_top, md_top, f) for f in xyz])
        skeleton = build_skeleton(cg_top, ref_path, "trp-cage MD beads")
        t0 = time.perf_counter()
        done = backmap_frames(skeleton, beads, settings, workers=workers, progress=False, echo=echo)
        seconds = time.perf_counter() - t0
    rows = []
    for k in range(len(xyz)):
        q = compare(md_top, xyz[k], done.topology, done.positions_nm[k])
        _side(acc, q)
        rows.append(_row(f"md {k}", q, done.checks[k], seconds / len(xyz), checks.d_residues(xyz[k], md_top)))
    return rows, {"frames": len(xyz), "interval_steps": interval, "dt_fs": 2.0, "md_seconds": md_seconds,
                  "backmap_seconds": seconds, "frames_per_second": len(xyz) / seconds, "workers": workers}


def _fmt(r) -> str:
    if "error" in r:
        return f"{r['name']:<22} error: {r['error']}"
    return (f"{r['name']:<22} {r['heavy_atoms']:>5} {r['backbone_rmsd_A']:>7.3f} {r['heavy_rmsd_A']:>7.3f} "
            f"{r['clashes']:>4} {r['d_residues']:>3} {r['new_cis']:>3} {r['max_deviation_A']:>6.3f} "
            f"{'yes' if r['converged'] else 'NO':>4} {r['seconds']:>6.2f}")


HEADER = (f"{'structure':<22} {'atoms':>5} {'bb(A)':>7} {'heavy(A)':>7} {'clsh':>4} {'D':>3} {'cis':>3} "
          f"{'dev(A)':>6} {'conv':>4} {'s':>6}")


def summarise(rows):
    ok = [r for r in rows if "error" not in r]
    if not ok:
        return {}
    return {"n": len(ok), "backbone_rmsd_A_max": max(r["backbone_rmsd_A"] for r in ok),
            "backbone_rmsd_A_mean": float(np.mean([r["backbone_rmsd_A"] for r in ok])),
            "heavy_rmsd_A_max": max(r["heavy_rmsd_A"] for r in ok),
            "heavy_rmsd_A_mean": float(np.mean([r["heavy_rmsd_A"] for r in ok])),
            "over_backbone_target": sum(r["backbone_rmsd_A"] > TARGET["backbone_rmsd_A"] for r in ok),
            "over_heavy_target": sum(r["heavy_rmsd_A"] > TARGET["heavy_rmsd_A"] for r in ok),
            "with_clashes": sum(r["clashes"] > 0 for r in ok), "with_d_residues": sum(r["d_residues"] > 0 for r in ok),
            "with_new_cis": sum(r["new_cis"] > 0 for r in ok), "not_converged": sum(not r["converged"] for r in ok),
            "max_deviation_A": max(r["max_deviation_A"] for r in ok)}


def measure(mapping, args, settings, md, echo=print) -> dict:
    """One mapping's tables: the structures, the MD frames (``md``: (data, seconds) or None), side chains."""
    acc = {}
    print(f"\n{mapping} mapping\n{HEADER}")
    rows = structures(Path(args.structures), acc, echo, settings, mapping)
    doc = {"structures": rows, "structures_summary": summarise(rows)}
    if md is not None:
        md_rows, info = md_frames(md[0], md[1], args.md_interval, args.workers, acc, echo, settings, mapping)
        for r in md_rows:
            print(_fmt(r))
        doc.update(md=info, md_frames=md_rows, md_summary=summarise(md_rows))
    doc["side_chain_rmsd_A"] = {k: {"rmsd_A": 10 * float(np.sqrt(v[0] / v[1])), "atoms": v[1]}
                                for k, v in sorted(acc.items())}
    print(f"\n{mapping}: side-chain RMSD per residue type (A, atoms past CB, both sets):")
    for k, v in sorted(doc["side_chain_rmsd_A"].items(), key=lambda kv: -kv[1]["rmsd_A"]):
        print(f"  {k}: {v['rmsd_A']:.2f} ({v['atoms']} atoms)")
    for key in ("structures_summary", "md_summary", "md"):
        if key in doc:
            print(f"{mapping} {key}: {json.dumps(doc[key])}")
    return doc


BEGIN, END = "<!-- backmap-quality:begin -->", "<!-- backmap-quality:end -->"
SECTION = "## Quality, measured"
NAMES = {"5bead": "5-bead mapping (N, CA, CB, C, O beads)", "ca": "CA mapping (one bead per residue)"}


def _f(x, nd=2):
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{nd}f}"


def render(doc: dict) -> str:
    """The tables of docs/backmapping.md's measured section (between :data:`BEGIN` and :data:`END`)."""
    t = doc["targets"]
    L = [f"Made by `{doc['command'].strip()}` (writes [backmapping.json](backmapping.json) and this section); "
         f"{doc['machine']}; settings {json.dumps(doc['settings'])}.", ""]
    for mapping, m in doc["mappings"].items():
        L += [f"### {NAMES.get(mapping, mapping)}", "",
              "| structure | heavy atoms | backbone RMSD (Å) | heavy-atom RMSD (Å) | clashes | new D | new cis | "
              "max deviation from bead (Å) | s |", "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for r in m["structures"]:
            if "error" in r:
                L.append(f"| {r['name']} | error: {r['error']} ||||||||")
                continue
            L.append(f"| {r['name']} | {r['heavy_atoms']} | {_f(r['backbone_rmsd_A'])} | {_f(r['heavy_rmsd_A'])} | "
                     f"{r['clashes']} | {r['d_residues']} | {r['new_cis']} | {_f(r['max_deviation_A'])} | "
                     f"{_f(r['seconds'], 1)} |")
        ss = m["structures_summary"]
        L += ["", f"Structures: backbone {_f(ss['backbone_rmsd_A_mean'])} Å mean, {_f(ss['backbone_rmsd_A_max'])} Å "
              f"max ({ss['over_backbone_target']} of {ss['n']} over {t['backbone_rmsd_A']} Å); all heavy atoms "
              f"{_f(ss['heavy_rmsd_A_mean'])} Å mean, {_f(ss['heavy_rmsd_A_max'])} Å max ({ss['over_heavy_target']} "
              f"of {ss['n']} over {t['heavy_rmsd_A']} Å"
              + ("".join(f"; {r['name']} {_f(r['heavy_rmsd_A'])}" for r in m["structures"]
                         if "error" not in r and r["heavy_rmsd_A"] > t["heavy_rmsd_A"])) + "); "
              f"with clashes {ss['with_clashes']}, with a new D residue {ss['with_d_residues']}, with a new cis bond "
              f"{ss['with_new_cis']}, not converged {ss['not_converged']}."]
        if "md_summary" in m:
            ms, md = m["md_summary"], m["md"]
            notes = [r for r in m["md_frames"] if r["clashes"] or r["d_residues"] or r["new_cis"] or not r["converged"]]
            L += ["", f"{md['frames']} frames of all-atom MD of trp-cage (amber14 + GBn2, 300 K, a frame every "
                  f"{md['interval_steps']} steps of {md['dt_fs']:g} fs): backbone {_f(ms['backbone_rmsd_A_mean'])} Å "
                  f"mean, {_f(ms['backbone_rmsd_A_max'])} Å max ({ms['over_backbone_target']} over "
                  f"{t['backbone_rmsd_A']} Å); all heavy atoms {_f(ms['heavy_rmsd_A_mean'])} Å mean, "
                  f"{_f(ms['heavy_rmsd_A_max'])} Å max ({ms['over_heavy_target']} over {t['heavy_rmsd_A']} Å); "
                  f"with clashes {ms['with_clashes']}, with a new D residue {ms['with_d_residues']}, with a new cis "
                  f"bond {ms['with_new_cis']}, not converged {ms['not_converged']}"
                  + (" (frames " + ", ".join(r["name"].split()[-1] for r in notes) + ", each noted)" if notes else "")
                  + f". Speed: **{md['frames_per_second']:.2f} frames/s** ({md['workers']} process"
                  f"{'es' if md['workers'] != 1 else ''})."]
        L += ["", "Side-chain RMSD per residue type (atoms past CB, both sets):", "",
              "| residue | " + " | ".join(k for k, _ in sorted(m["side_chain_rmsd_A"].items(),
                                                               key=lambda kv: -kv[1]["rmsd_A"])) + " |",
              "|---|" + "--:|" * len(m["side_chain_rmsd_A"]),
              "| RMSD (Å) | " + " | ".join(_f(v["rmsd_A"]) for _, v in sorted(m["side_chain_rmsd_A"].items(),
                                                                          key=lambda kv: -kv[1]["rmsd_A"])) + " |", ""]
    return "\n".join(L)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = ROOT.parent / "shared" / "structures"
    p.add_argument("--structures", default=str(shared if shared.is_dir() else ROOT / "tests" / "data" / "structures"))
    p.add_argument("--mappings", default="5bead,ca", help="comma-separated among 5bead, ca (default both)")
    p.add_argument("--side-chains", choices=("faspr", "templates"), default="faspr")
    p.add_argument("--md-frames", type=int, default=50)
    p.add_argument("--md-interval", type=int, default=200)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--skip-md", action="store_true")
    p.add_argument("--template-chi1", action="store_true",
                   help="--side-chains templates: pdbfixer's templates as they are (BackmapSettings(common_chi1=False))")
    p.add_argument("--restraint-k", type=float, default=None, help="kJ/mol/nm^2 (default BackmapSettings')")
    p.add_argument("--json", default=str(ROOT / "docs" / "backmapping.json"))
    p.add_argument("--update-doc", nargs="?", const=str(ROOT / "docs" / "backmapping.md"), default=None,
                   metavar="FILE", help="replace the measured section of FILE (default docs/backmapping.md)")
    p.add_argument("--render", default=None, metavar="JSON", help="render an existing JSON report (no measurement)")
    args = p.parse_args(argv)
    if args.render:
        return _update_doc(json.loads(Path(args.render).read_text()), args.update_doc)
    torch.set_num_threads(1)
    from dataclasses import asdict, replace

    from flashschnet.openmm.backmap import BackmapSettings
    from flashschnet.openmm.benchmark.machine import cpu_model

    settings = BackmapSettings(side_chains=args.side_chains, common_chi1=not args.template_chi1)
    if args.restraint_k is not None:
        settings = replace(settings, restraint_k=args.restraint_k)
    mappings = [m.strip() for m in args.mappings.split(",") if m.strip()]
    doc = {"command": "python tools/benchmarks/backmap_quality.py "
                      + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": f"{platform.machine()}, {os.cpu_count()} CPUs ({cpu_model()})",
           "settings": asdict(settings), "targets": TARGET, "mappings": {}}
    with tempfile.TemporaryDirectory() as tmp:
        md = None if args.skip_md else md_data(args.md_frames, args.md_interval, print, tmp)
        for mapping in mappings:
            doc["mappings"][mapping] = measure(mapping, args, settings, md)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return _update_doc(doc, args.update_doc)


def _update_doc(doc: dict, path) -> int:
    body = render(doc)
    if not path:
        print(body)
        return 0
    from flashschnet.openmm.benchmark.device_report import splice

    Path(path).write_text(splice(Path(path).read_text(), body, BEGIN, END, SECTION))
    print(f"wrote the measured section of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
