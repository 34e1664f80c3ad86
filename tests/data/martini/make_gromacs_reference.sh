#!/usr/bin/env bash
# Regenerates tests/data/martini/systems/<protein>/: a MARTINI 3 protein (martinize2: DSSP, elastic network)
# solvated by insane (W, 0.15 M NaCl, 1.5 nm padding, cubic box), our system.top for it, and GROMACS's own
# single-point energies of that structure (gmx_d mdrun -rerun, double precision) as gromacs_energies.json.
# Needs: pip install vermouth insane mdtraj; Debian's gromacs (gmx_d). Run from the repository root.
set -euo pipefail
root=tests/data/martini
m3="${MARTINI_FF:-../shared/martini/m3}"
for protein in villin:1VII_villin bpti:4PTI_bpti ubiquitin:1UBQ_ubiquitin; do
  name=${protein%%:*}; pdb=tests/data/structures/${protein##*:}.pdb
  out=$root/systems/$name; rm -rf "$out"; mkdir -p "$out"; work=$(mktemp -d)
  ( cd "$work" && martinize2 -f "$OLDPWD/$pdb" -x cg.pdb -o topol.top -ff martini3001 -dssp -elastic -ignh -cys auto -ignore HOH \
      -name "$name" >/dev/null 2>&1 \
    && insane -f cg.pdb -o system.gro -p insane.top -pbc cubic -d 1.5 -sol W -salt 0.15 >/dev/null 2>&1 )
  cp "$work/${name}_0.itp" "$work/system.gro" "$out/"
  # insane names the molecules Protein, NA+, CL-; MARTINI 3's files call the ions NA and CL
  { echo '#include "martini_v3.0.0.itp"'; echo '#include "martini_v3.0.0_ions_v1.itp"'
    echo '#include "martini_v3.0.0_solvents_v1.itp"'; echo "#include \"${name}_0.itp\""
    echo; echo "[ system ]"; echo "$name in MARTINI 3 water, 0.15 M NaCl"; echo; echo "[ molecules ]"
    sed -n '/\[ molecules \]/,$p' "$work/insane.top" | grep -v '^\[' | grep -v '^;' | grep -v '^$' \
      | sed -e "s/^Protein /${name}_0 /" -e 's/^NA+ /NA /' -e 's/^CL- /CL /'
  } > "$out/system.top"
  cp "$root/rerun.mdp" "$work/"
  ( cd "$work" && cp "$OLDPWD/$out/system.top" "$OLDPWD/$out/${name}_0.itp" . && cp "$OLDPWD/$m3"/*.itp . \
    && gmx_d grompp -f rerun.mdp -c system.gro -p system.top -o rerun.tpr -maxwarn 20 >/dev/null 2>&1 \
    && gmx_d mdrun -s rerun.tpr -rerun system.gro -e rerun.edr -g rerun.log -nt 1 >/dev/null 2>&1 \
    && echo "Bond G96Angle Restr.-Angles Proper-Dih. Improper-Dih. LJ-(SR) Coulomb-(SR) Potential" \
       | tr ' ' '\n' | gmx_d energy -f rerun.edr -o e.xvg >/dev/null 2>&1 )
  python3 - "$work/e.xvg" "$out/gromacs_energies.json" <<'PY'
import json, sys
legends, values = [], None
for line in open(sys.argv[1]):
    if line.startswith("@ s") and "legend" in line:
        legends.append(line.split('"')[1])
    elif not line.startswith(("#", "@")) and line.strip():
        values = [float(x) for x in line.split()[1:]]
json.dump({"units": "kJ/mol", "source": "gmx_d mdrun -rerun (GROMACS 2022.5, double precision), rerun.mdp",
           "energies": dict(zip(legends, values))}, open(sys.argv[2], "w"), indent=1)
PY
  rm -rf "$work"
done
