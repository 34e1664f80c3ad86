"""``flashschnet-doctor`` (also ``python -m flashschnet.doctor``): what of flashschnet works on this machine, and
what to run to fix what does not.

    flashschnet-doctor [--json FILE] [--timeout SECONDS]

Prints the versions (python, torch and its CUDA, triton, numpy, openmm, openmm-torch and the distribution that
provides it, openmm-ml), the OpenMM platforms that load and every plugin load failure explained in one line,
whether the network evaluates as a TorchForce and as a PythonForce on each platform (a 3-bead CGSchNet, each
platform in its own process with a timeout), a System with a TorchForce through XML and back, and which
backends (reference, torch, triton) run on which device. Probes: :mod:`flashschnet.doctor` (no OpenMM) and
:mod:`flashschnet.openmm.doctor`.

Exit status (GPU results never change it; a machine without a GPU is healthy):
  0  the CPU path works: the CPU platform loads and a TorchForce evaluates on it (torch backend), equal to the
     PythonForce -- ``flashschnet-simulate`` runs with its defaults;
  1  the CPU path does not work: openmm missing or broken, no CPU platform, or no network force evaluates there;
  2  bad command line (argparse), or ``--json``'s folder is missing or not writable;
  3  only the fallback works: the TorchForce fails on the CPU platform, the PythonForce works
     (``flashschnet-simulate --network-force python`` runs; slower);
  5, 6, 7  ``--json`` could not be written after the checks: 5 no space left, 6 not allowed to write, 7 another I/O
     error (one line naming the file; no partial file is left).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

from ._cli import Parser, check_output_file, float_type, write_failure

PROG = "flashschnet-doctor"

EXIT_OK, EXIT_BROKEN, EXIT_USAGE, EXIT_FALLBACK_ONLY = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        description="Check what of flashschnet works on this machine (versions, OpenMM platforms and plugin load "
                    "failures, TorchForce and PythonForce on each platform, the backends on each device) and say "
                    "in one line per problem what to run.",
        epilog="Exit status: 0 the CPU path works (TorchForce on the CPU platform); 1 it does not; 2 bad command "
               "line; 3 only the PythonForce fallback works on CPU (use --network-force python); 5, 6, 7 --json could "
               "not be written (5 no space left, 6 not allowed to write, 7 another I/O error). GPU problems are "
               "reported but never change the exit status.",
    )
    p.add_argument("--json", metavar="FILE", default=None, help="also write everything as JSON to FILE")
    p.add_argument("--timeout", type=float_type(0.0, low_open=True), default=180.0, metavar="SECONDS",
                   help="limit for each check's process (a platform, a device; default 180: the first Triton "
                        "compile on a GPU takes a while)")
    return p


def _row(label: str, text: str, width: int = 14) -> str:
    return f"  {label:<{width}} {text}"


def _versions_lines(v: Dict[str, Any]) -> List[str]:
    def show(x):
        return x if x else "not installed"

    torch_text = show(v.get("torch"))
    if v.get("torch"):
        cuda = f"CUDA {v['torch_cuda']}" if v.get("torch_cuda") else "CPU-only build"
        gpus = ", ".join(v.get("cuda_devices") or [])
        torch_text += (f" ({cuda}; torch.cuda.is_available() = {v.get('cuda_available')}"
                       + (f": {gpus}" if gpus else "") + ")")
    elif v.get("torch_error"):
        torch_text = f"BROKEN: {v['torch_error']}"
    dists = v.get("openmmtorch_distributions") or []
    omt = (f"{v['openmmtorch']} (module openmmtorch from {', '.join(d['name'] + ' ' + d['version'] for d in dists)})"
           if dists else "not installed")
    plat_pkgs = ", ".join(f"{d['name']} {d['version']}" for d in v.get("openmm_platform_packages") or [])
    lines = [
        _row("python", f"{v['python']} ({v['executable']})"),
        _row("flashschnet", show(v.get("flashschnet"))),
        _row("torch", torch_text),
        _row("triton", show(v.get("triton"))),
        _row("numpy", show(v.get("numpy"))),
        _row("openmm", show(v.get("openmm")) + (f" (platform packages: {plat_pkgs})" if plat_pkgs else "")),
        _row("openmmtorch", omt),
        _row("openmmml", show(v.get("openmmml"))),
        _row("NVIDIA driver", "present (libcuda.so.1 loads)" if v.get("nvidia_driver") else "none (libcuda.so.1 "
                                                                                               "not found)"),
    ]
    if v.get("openmmtorch_note"):
        lines.append(_row("note", v["openmmtorch_note"]))
    return lines


def _openmm_lines(om: Dict[str, Any]) -> List[str]:
    plats = om["platforms"]
    lines = ["OpenMM platforms"]
    for p in plats["loaded"]:
        kern = "TorchForce kernels: yes" if p["torch_kernels"] else "TorchForce kernels: NO"
        lines.append(_row(p["name"], f"loads ({kern})"))
    for n in plats["notes"]:
        lines.append(_row("note", n))
    if plats["failures"]:
        lines.append(f"plugin load failures ({len(plats['failures'])}; openmm.Platform.getPluginLoadFailures())")
        for f in plats["failures"]:
            lines.append(_row("", f"{f['kind']}: {f['line']}", 0).replace("   ", "  ", 1))
    lines.append("network forces (3-bead CGSchNet, float32, backend torch; each platform in its own process)")
    for f in om["forces"]:
        lines.append(_row(f["platform"], f"PythonForce {f['python']['line']}"))
        lines.append(_row(f["platform"], f"TorchForce  {f['torch']['line']}"))
    lines.append(_row("XML", f"System with a TorchForce through XmlSerializer and back: {om['xml']['line']}"))
    return lines


def _backend_lines(rows: List[Dict[str, Any]]) -> List[str]:
    lines = ["backends (3-bead energy_forces, float32, against the float64 reference backend)"]
    for r in rows:
        label = f"{r['backend']} ({r['device']})" if r["backend"] != "*" else r["device"]
        lines.append(_row(label, r["line"], 18))
    return lines


def verdict(om: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The exit status and its one-line summary from the OpenMM results (None: flashschnet.openmm did not
    import)."""
    if om is None:
        return {"exit_status": EXIT_BROKEN, "line": "the CPU path does not work: flashschnet.openmm cannot be "
                                                    "imported (see above)"}
    cpu = next((f for f in om["forces"] if f["platform"] == "CPU"), None)
    if cpu is None:
        return {"exit_status": EXIT_BROKEN, "line": "the CPU path does not work: OpenMM's CPU platform did not load "
                                                    "(see the plugin load failures)"}
    if cpu["torch"]["status"] == "ok" and cpu["python"]["status"] == "ok":
        return {"exit_status": EXIT_OK, "line": "the CPU path works: TorchForce and PythonForce evaluate on the CPU "
                                                "platform with the torch backend"}
    if cpu["torch"]["status"] == "ok":
        return {"exit_status": EXIT_OK, "line": "the CPU path works: TorchForce evaluates on the CPU platform (the "
                                                "PythonForce fallback does not, see above)"}
    if cpu["python"]["status"] == "ok":
        return {"exit_status": EXIT_FALLBACK_ONLY,
                "line": "only the fallback works on CPU: the TorchForce fails, the PythonForce evaluates; run "
                        "flashschnet-simulate --network-force python, or fix openmm-torch as said above"}
    return {"exit_status": EXIT_BROKEN, "line": "the CPU path does not work: neither the TorchForce nor the "
                                                "PythonForce evaluates on the CPU platform (see above)"}


def collect(timeout: float) -> Dict[str, Any]:
    """Every check, as one dict (what ``--json`` writes)."""
    from concurrent.futures import ThreadPoolExecutor

    from flashschnet import doctor

    info = doctor.versions()
    info["openmmtorch_note"] = doctor.openmmtorch_note(
        [(d["name"], d["version"]) for d in info["openmmtorch_distributions"]], info.get("torch_cuda"),
        bool(info.get("nvidia_driver") or info.get("cuda_available")))
    out: Dict[str, Any] = {"versions": info}
    with ThreadPoolExecutor(max_workers=1) as pool:      # the backends' probes alongside the OpenMM ones
        backends = pool.submit(doctor.check_backends, timeout, cuda_available=info.get("cuda_available"))
        try:
            from flashschnet.openmm import doctor as omm_doctor
        except Exception as exc:   # openmm missing or broken: report it, the rest still runs
            spec = doctor.flashschnet_requirements().get("openmm", "openmm")
            out["openmm"] = None
            out["openmm_error"] = (f"flashschnet.openmm cannot be imported ({type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0] if str(exc) else ''}): pip install --force-reinstall "
                                   f"'{spec}'")
        else:
            out["openmm"] = omm_doctor.report(timeout, info)
        out["backends"] = backends.result()
    out["verdict"] = verdict(out["openmm"])
    return out


def format_report(r: Dict[str, Any]) -> str:
    lines = [f"{PROG}", "versions"] + _versions_lines(r["versions"])
    if r.get("openmm") is None:
        lines += ["OpenMM", _row("error", r.get("openmm_error", "not checked"))]
    else:
        lines += _openmm_lines(r["openmm"])
    lines += _backend_lines(r["backends"])
    v = r["verdict"]
    lines.append(f"verdict: {v['line']} (exit status {v['exit_status']})")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.json is not None:
        from flashschnet.errors import InputError

        try:
            check_output_file(args.json, "--json")
        except InputError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    result = collect(args.timeout)
    print(format_report(result), flush=True)
    if args.json is not None:
        from flashschnet.atomic import atomic_write

        try:
            with atomic_write(args.json, "w", what="writing the report", option="--json") as fh:
                json.dump(result, fh, indent=2, default=str)
                fh.write("\n")
        except OSError as exc:           # no partial FILE; exit 5 (no space), 6 (not writable), 7 (I/O error)
            status, line = write_failure(exc)
            print(f"{PROG}: error: {line}", file=sys.stderr)
            return status
        print(f"wrote {args.json}")
    return int(result["verdict"]["exit_status"])


if __name__ == "__main__":
    sys.exit(main())
