"""Run every PDB file of the quirk corpus (tests/data/corpus/) through both force fields' command lines, a few steps each.

For each file and engine the result is one of

* ``runs``: the command exited 0; its notes (what cleaning changed, chain breaks) are kept;
* ``refused``: exit status 2 with one ``PROG: error: ...`` line on stderr and no traceback (the message is kept);
* ``FAILED``: anything else (a traceback, another exit status, a multi-line error): a bug to fix.

The CG engine is ``flashschnet-simulate`` with the bundled trained trp-cage model
(``examples/trpcage_trained.pt``). Its priors are per-tuple, fitted to trp-cage, so for any other protein this
tool first cleans and maps the file the way the command does and writes a PLACEHOLDER prior fitted to that
structure (``fit_priors_to_structure``), passed with ``--priors``: the run checks the pipeline (reading, cleaning,
mapping, the System, a few steps), not the physics of a network trained on another protein. When the tool's own
cleaning or mapping refuses the file, the command is run without ``--priors`` so that its refusal (the same one)
is what is recorded. The MARTINI engine is ``flashschnet-martini`` (martinize2, insane, OpenMM) with the
force-field files of ``--forcefield-dir``.

Usage::

    python tools/benchmarks/pdb_corpus.py --forcefield-dir ../shared/martini/m3 --json docs/pdb_corpus.json
    python tools/benchmarks/pdb_corpus.py --only pdbfixer__1BHL.pdb --engines cg
    python tools/benchmarks/pdb_corpus.py --from-json docs/pdb_corpus.json --update-doc docs/reliability.md

prints a markdown table (file, quirks, CG result, MARTINI result), writes the JSON when asked, and with
``--update-doc`` replaces the table between the ``<!-- pdb_corpus table -->`` markers of that file (the table of
docs/reliability.md). ``--from-json`` makes the table from an earlier run instead of running. Exit status 1 when
any result is FAILED.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "corpus"
MODEL = ROOT / "examples" / "trpcage_trained.pt"
ENGINES = ("cg", "martini")
#: notes every run prints whatever the file (left out of the table's cells, kept in the JSON)
QUIET_NOTES = ("network backend",)
BEGIN, END = "<!-- pdb_corpus table -->", "<!-- end pdb_corpus table -->"


def load_manifest(corpus: Path = CORPUS) -> list:
    """The corpus manifest: one dict per file (``file``, ``quirks``, ``details``, ...)."""
    return json.loads((corpus / "manifest.json").read_text())


def _bin(name: str) -> str:
    """The console script ``name`` next to this interpreter (the venv's), else on PATH."""
    here = Path(sys.executable).with_name(name)
    return str(here) if here.exists() else name


def _fit_priors(pdb: Path, work: Path):
    """Clean and map ``pdb`` as flashschnet-simulate does and write a placeholder prior fitted to it; returns the
    prior file, or None when cleaning/mapping refuses the file (the command then reports it)."""
    from flashschnet.errors import InputError
    from flashschnet.openmm.cleaning import clean_pdb
    from flashschnet.priors import fit_priors_to_structure, save_priors

    try:
        mol = clean_pdb(str(pdb)).molecule()
    except InputError:
        return None
    path = work / "priors.pt"
    save_priors(fit_priors_to_structure(mol, description=f"placeholder prior fitted to {pdb.name}"), str(path))
    return path


def _classify(proc: subprocess.CompletedProcess, prog: str) -> dict:
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    notes = [line.split("note: ", 1)[1] for line in err if line.startswith(f"{prog}: note: ")]
    errors = [line for line in err if line.startswith(f"{prog}: error: ")]
    if proc.returncode == 0:
        return {"result": "runs", "notes": notes}
    if proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr:
        return {"result": "refused", "message": errors[0].split("error: ", 1)[1], "notes": notes}
    return {"result": "FAILED", "returncode": proc.returncode, "stderr_tail": err[-8:]}


def run_one(pdb: Path, engine: str, work: Path, forcefield_dir: str, steps: int, timeout: float,
            minimize_iterations: int = 50) -> dict:
    """Run ``pdb`` through one engine's command line in ``work`` (MARTINI minimised for ``minimize_iterations``
    first); return its classified result."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / "out"
    common = ["--steps", str(steps), "--report-interval", str(max(1, steps // 2)), "--out", str(out),
              "--seed", "1", "--quiet", "--platform", "CPU", "--threads", "1"]
    if engine == "cg":
        prog = "flashschnet-simulate"
        cmd = [_bin(prog), str(pdb), "--model", str(MODEL), *common]
        priors = _fit_priors(pdb, work)
        if priors is not None:
            cmd += ["--priors", str(priors)]
    else:
        prog = "flashschnet-martini"
        cmd = [_bin(prog), str(pdb), "--forcefield-dir", str(forcefield_dir), "--minimize-iterations",
               str(minimize_iterations), *common]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"result": "FAILED", "returncode": None, "stderr_tail": [f"timed out after {timeout:.0f} s"],
                "seconds": round(time.perf_counter() - t0, 1)}
    res = _portable(_classify(proc, prog), work)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    if res["result"] == "runs":
        res["cleaned_pdb"] = (out / ("cleaned.pdb" if engine == "cg" else "system/cleaned.pdb")).exists()
    return res


def _portable(obj, work: Path):
    """``obj`` with this checkout's and the work folder's paths made relative (``tests/data/corpus/...``,
    ``WORK/...``), so the JSON and the table do not depend on where they were made."""
    if isinstance(obj, str):
        return obj.replace(str(work) + os.sep, "WORK/").replace(str(ROOT) + os.sep, "")
    if isinstance(obj, list):
        return [_portable(x, work) for x in obj]
    if isinstance(obj, dict):
        return {k: _portable(v, work) for k, v in obj.items()}
    return obj


def _unprefixed(line: str) -> str:
    """A note or message without the leading ``path/to/file.pdb: `` that names the input (the table's row does)."""
    head, sep, rest = line.partition(": ")
    return rest if sep and head.endswith((".pdb", ".ent")) else line


def _cell(res: dict) -> str:
    if res["result"] == "runs":
        notes = "; ".join(_unprefixed(n) for n in res.get("notes", []) if not n.startswith(QUIET_NOTES))
        return "runs" + (f" ({notes})" if notes else "")
    if res["result"] == "refused":
        return f"refused: {_unprefixed(res['message'])}"
    return f"**FAILED** (exit {res.get('returncode')}): {' / '.join(res.get('stderr_tail', [])[-2:])}"


def markdown(rows: list) -> str:
    lines = ["| File | Quirks | CG (`flashschnet-simulate`) | MARTINI (`flashschnet-martini`) |", "|---|---|---|---|"]
    for row in rows:
        cells = [_cell(row[e]) if e in row else "not run" for e in ENGINES]
        quirks = ", ".join(row["quirks"]) + (f" — {row['details']}" if row.get("details") else "")
        lines.append(f"| `{row['file']}` | {quirks} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def update_doc(doc: Path, table: str, meta: dict) -> None:
    """Replace the text between the BEGIN and END markers of ``doc`` by ``table`` and a line naming the run."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc}: no '{BEGIN}' ... '{END}' markers to put the table between")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    made = (f"Made by `python tools/benchmarks/pdb_corpus.py` on {meta['date']} ({meta['machine']}, "
            f"{meta['steps']} steps per run; the JSON is docs/pdb_corpus.json).")
    doc.write_text(f"{head}{BEGIN}\n{made}\n\n{table}\n{END}{tail}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--forcefield-dir", default=str(ROOT.parent / "shared" / "martini" / "m3"),
                   help="MARTINI 3 force-field folder (default ../shared/martini/m3)")
    p.add_argument("--engines", default="cg,martini", help="comma-separated: cg, martini (default both)")
    p.add_argument("--only", default=None, help="comma-separated corpus file names (default: all)")
    p.add_argument("--steps", type=int, default=10, help="steps per run (default 10)")
    p.add_argument("--minimize-iterations", type=int, default=50,
                   help="MARTINI's energy-minimisation iterations before its steps (default 50; OpenMM's minimiser "
                        "is most of a MARTINI row's time)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run before it counts as FAILED")
    p.add_argument("--workdir", default=None, help="keep the runs here (default: a temporary folder, removed)")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--from-json", default=None, help="make the table from this earlier run's JSON; run nothing")
    p.add_argument("--update-doc", default=None, help="put the table between this markdown file's markers")
    args = p.parse_args(argv)
    if args.from_json:
        doc = json.loads(Path(args.from_json).read_text())
        table = markdown(doc["rows"])
        print(table)
        if args.update_doc:
            update_doc(Path(args.update_doc), table, doc["meta"])
        return 1 if any(row[e]["result"] == "FAILED" for row in doc["rows"] for e in ENGINES if e in row) else 0
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if set(engines) - set(ENGINES):
        p.error(f"--engines: unknown {sorted(set(engines) - set(ENGINES))}; choose from {list(ENGINES)}")
    entries = load_manifest()
    if args.only:
        wanted = {n.strip() for n in args.only.split(",")}
        unknown = wanted - {e["file"] for e in entries}
        if unknown:
            p.error(f"--only: not in the corpus manifest: {sorted(unknown)}")
        entries = [e for e in entries if e["file"] in wanted]
    tmp = None if args.workdir else tempfile.TemporaryDirectory(prefix="pdb_corpus_")
    workdir = Path(args.workdir or tmp.name)
    rows = []
    for entry in entries:
        row = {"file": entry["file"], "quirks": entry["quirks"], "details": entry.get("details", "")}
        for engine in engines:
            res = run_one(CORPUS / entry["file"], engine, workdir / Path(entry["file"]).stem / engine,
                          args.forcefield_dir, args.steps, args.timeout, args.minimize_iterations)
            row[engine] = res
            print(f"{entry['file']:40s} {engine:8s} {res['result']:8s} {res['seconds']:7.1f} s", file=sys.stderr)
        rows.append(row)
    table = markdown(rows)
    print(table)
    meta = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
            "python": platform.python_version(), "steps": args.steps,
            "minimize_iterations": args.minimize_iterations, "model": MODEL.name,
            "date": time.strftime("%Y-%m-%d")}
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    if args.update_doc:
        update_doc(Path(args.update_doc), table, meta)
    if tmp is not None:
        tmp.cleanup()
    return 1 if any(row[e]["result"] == "FAILED" for row in rows for e in engines) else 0


if __name__ == "__main__":
    sys.exit(main())
