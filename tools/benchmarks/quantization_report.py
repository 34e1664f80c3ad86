#!/usr/bin/env python
"""The accuracy cost of channel-wise 16-bit weights, measured: a maintainer's report generator (run from a
checkout). The measurements, the command line and the rendering are :mod:`flashschnet.openmm.quantization`.

    python tools/benchmarks/quantization_report.py [--out docs] [--variants fp16,bf16,fp16-cast,bf16-cast]
                                                   [--langevin-steps 10000] [--nve-steps 5000] [--nve-dt 2] [--quick]

Relative ``--pdb``, ``--model`` and ``--oracle`` paths are taken from the current directory, else from this
checkout. ``--help`` lists every option.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch  # noqa: F401  (before openmm/openmmtorch)

from flashschnet.openmm.quantization.report import main

if __name__ == "__main__":
    sys.exit(main(root=Path(__file__).resolve().parents[2]))
