"""Does a System holding our TorchForce survive OpenMM's XmlSerializer in this environment?

    python tools/maintenance/xml_round_trip.py    # exit 0: it does; 1: deserialization failed or crashed (the reason)

With openmm 8.6.x and openmm-torch 1.10 (acellera's builds, the only ones for torch >= 2.10, compiled against
OpenMM 8.5) it does not: ``TorchForceProxy::deserialize`` segfaults (OpenMM 8.6 changed ``SerializationNode``'s
ABI). Serializing works either way; only reading the XML back crashes, which flashschnet never does, so 8.6 is
supported (setup.py) and the line is a warning. It is ``flashschnet-doctor``'s XML line
(:func:`flashschnet.openmm.doctor.check_xml_round_trip`: the doctor's 3-bead network as a TorchForce, serialized
and read back in a child process, so that a crash is reported instead of taking this script down), on its own.
``tools/maintenance/openmmtorch_xml_crash.py`` is the same crash without flashschnet (the upstream report,
docs/install.md).
"""
from __future__ import annotations

import sys


def main() -> int:
    import torch  # noqa: F401  (torch before openmm, as openmm-torch needs)

    from flashschnet.openmm.doctor import Env, check_xml_round_trip

    env = Env.current()
    builds = " + ".join(f"{n} {v}" for n, v in env.openmmtorch) or "no openmm-torch distribution"
    result = check_xml_round_trip(env=env)
    print(f"XML round trip of a System with a TorchForce (openmm {env.openmm_version}, {builds}): {result['line']}")
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
