"""Minimal reproducer (no flashschnet): deserializing a System that holds a TorchForce segfaults with openmm 8.6.x
and acellera-openmmtorch 1.10 (built against OpenMM 8.5).

    pip install torch==2.11.0 openmm==8.6.1 acellera-openmmtorch-cpu==1.10
    python tools/maintenance/openmmtorch_xml_crash.py   # the versions, "serialized: N chars", then death by SIGSEGV
                                                        # (exit status 139 from a shell); 8.5.2: "deserialized: ok"

Serializing works; ``XmlSerializer.deserialize`` of the XML crashes inside ``TorchForceProxy::deserialize``: OpenMM
8.6 changed ``SerializationNode``'s ABI. docs/install.md ("Upstream-ready report") has the report; its code block is
this file's code below this docstring (a test keeps the two equal).
"""
import faulthandler
import sys
from importlib import metadata

import torch  # torch before openmm, as openmm-torch's plugins need
import openmm
import openmmtorch


class Zero(torch.nn.Module):
    def forward(self, positions):
        return torch.sum(positions) * 0.0


faulthandler.enable()  # the Python stack of the crash on stderr
builds = [f"{d} {metadata.version(d)}" for d in metadata.packages_distributions().get("openmmtorch", [])]
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, openmm {openmm.__version__}, "
      f"openmmtorch from {', '.join(builds)}", flush=True)
system = openmm.System()
system.addParticle(1.0)
system.addForce(openmmtorch.TorchForce(torch.jit.script(Zero())))
xml = openmm.XmlSerializer.serialize(system)
print(f"serialized: {len(xml)} chars", flush=True)
clone = openmm.XmlSerializer.deserialize(xml)  # segfaults with openmm 8.6.x + openmm-torch 1.10
print(f"deserialized: ok ({clone.getNumForces()} force)", flush=True)
