"""Does a System holding our TorchForce survive OpenMM's XmlSerializer in this environment?

    python tools/xml_round_trip.py          # exit 0: it does; 1: deserialization failed or crashed (the reason)

This is the check behind the ``openmm<8.6`` bound in setup.py: openmm-torch 1.10 (acellera's builds, the only
ones for torch >= 2.10) was compiled against OpenMM 8.5, and with openmm 8.6.x its ``TorchForceProxy::
deserialize`` reads OpenMM's ``SerializationNode`` with the old layout and segfaults (the child's exit status is
-11, shown as 139 by a shell). Serializing works either way; only reading the XML back crashes. The
deserialization runs in a child process so that a crash is reported instead of taking this script down.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def serialize(path: Path) -> str:
    """Write the XML of a 1-replica trp-cage System (placeholder model, TorchForce and priors) to ``path``."""
    import torch  # noqa: F401  (torch before openmm, as openmm-torch needs)

    import flashschnet
    from flashschnet.openmm import build_system

    import openmm

    model = flashschnet.load_model(ROOT / "examples" / "trpcage_placeholder.pt")
    mol = flashschnet.map_pdb(str(ROOT / "examples" / "1L2Y_trpcage.pdb"))
    path.write_text(openmm.XmlSerializer.serialize(build_system(mol, model, replicas=1)))
    return openmm.__version__


CHILD = ("import sys, torch, flashschnet, openmm; "
         "s = openmm.XmlSerializer.deserialize(open(sys.argv[1]).read()); "
         "print(', '.join(f.getName() for f in s.getForces()))")


def main() -> int:
    import importlib.metadata as md

    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "system.xml"
        version = serialize(xml)
        res = subprocess.run([sys.executable, "-c", CHILD, str(xml)], capture_output=True, text=True, timeout=300)
    builds = [d.metadata["Name"] for d in md.distributions() if (d.metadata["Name"] or "").lower().replace("_", "-")
              .startswith(("openmmtorch", "acellera-openmmtorch"))]
    where = f"openmm {version}, {' + '.join(sorted(builds)) or 'no openmm-torch distribution'}"
    if res.returncode == 0:
        print(f"XML round trip of a System with a TorchForce: ok ({where}); forces: {res.stdout.strip()}")
        return 0
    why = f"crashed (signal {-res.returncode})" if res.returncode < 0 else f"failed (exit {res.returncode})"
    print(f"XML round trip of a System with a TorchForce: deserialization {why} ({where}); "
          f"{res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ''}".rstrip("; "))
    return 1


if __name__ == "__main__":
    sys.exit(main())
