#!/usr/bin/env bash
# Regenerates the martinize2 outputs in this folder (MARTINI 3 topologies of two proteins, used by the topology
# reader's tests). Needs vermouth (PyPI; these files were written by vermouth 0.15.0, martinize2's DSSP from
# mdtraj): pip install vermouth mdtraj. Run from the repository root.
set -euo pipefail
here=tests/data/martini
rm -f "$here"/villin/* "$here"/trpcage/*      # martinize2 would keep #backups# of old files
( cd "$here/villin" && martinize2 -f ../../structures/1VII_villin.pdb -x villin_cg.pdb -o topol.top \
    -ff martini3001 -dssp -elastic -ignh )
( cd "$here/trpcage" && martinize2 -f ../../structures/1L2Y_trpcage.pdb -x trpcage_cg.pdb -o topol.top \
    -ff martini3001 -dssp -elastic -ignh -name trpcage )
