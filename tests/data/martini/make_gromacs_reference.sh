#!/usr/bin/env bash
# Regenerates tests/data/martini/systems/<system>/ and GROMACS's own single-point energies of each.
#
#   bash tests/data/martini/make_gromacs_reference.sh [--energies-only] [SYSTEM ...]
#
# SYSTEMs (default: all of them):
#   villin, bpti, ubiquitin  a MARTINI 3 protein (martinize2: DSSP, elastic network) solvated by insane (W, 0.15 M
#                            NaCl, 1.5 nm padding, cubic box, INSANE_SEED=1) and our system.top for it
#   villin_go                the same with MartiniGo (martinize2 -go, vermouth 0.15: Go virtual sites on the backbone
#                            beads, go_atomtypes.itp and go_nbparams.itp), system.top laid out as prepare.py writes it
#   excluded_beyond_cutoff   three charged beads of one molecule whose excluded pairs lie beyond and within the
#                            1.1 nm cut-off (GROMACS applies the reaction-field exclusion correction only within)
# and for each gromacs_energies.json: gmx_d mdrun -rerun (double precision) of system.gro with rerun.mdp (for
# MartiniGo also "energies_without_go_contacts": the same without go_nbparams.itp).
#
# --energies-only keeps every committed file of a system (its coordinates above all) and re-runs only grompp,
# mdrun -rerun and the energy read-out, rewriting gromacs_energies.json.
#
# Energies come from `gmx_d energy -dp` (printed with 12 decimals, i.e. to double precision for these
# magnitudes); `gmx_d dump -e` prints only 6 significant digits (%12.5e) and plain `gmx energy` 6 decimals.
# Note that mdrun -rerun takes virtual sites where system.gro puts them (it does not construct them).
#
# Needs: pip install vermouth insane mdtraj; Debian's gromacs (gmx_d). Run from the repository root.
set -euo pipefail
shopt -s nullglob
root=tests/data/martini
m3="$(cd "${MARTINI_FF:-../shared/martini/m3}" && pwd)"
energies_only=0
if [[ "${1:-}" == "--energies-only" ]]; then energies_only=1; shift; fi
systems=("$@")
[[ ${#systems[@]} -gt 0 ]] || systems=(villin bpti ubiquitin villin_go excluded_beyond_cutoff)
gmx_version=$(gmx_d --version 2>/dev/null | sed -n 's/^GROMACS version: *//p' | head -1)

write_top() {  # write_top OUT NAME MOLTYPE GO INSANE_TOP: our system.top (as prepare.py's write_system_top)
  local out=$1 name=$2 moltype=$3 go=$4 insane_top=$5
  {
    if [[ $go == 1 ]]; then
      echo "; MartiniGo (martinize2 -go): the Go virtual sites' atom types and LJ contacts follow the force field"
      echo '#define GO_VIRT'
    fi
    echo '#include "martini_v3.0.0.itp"'
    if [[ $go == 1 ]]; then echo '#include "go_atomtypes.itp"'; echo '#include "go_nbparams.itp"'; fi
    echo '#include "martini_v3.0.0_ions_v1.itp"'; echo '#include "martini_v3.0.0_solvents_v1.itp"'
    echo "#include \"${moltype}.itp\""
    echo; echo "[ system ]"; echo "$name in MARTINI 3 water, 0.15 M NaCl"; echo; echo "[ molecules ]"
    # insane names the molecules Protein, NA+, CL-; MARTINI 3's files call the ions NA and CL
    sed -n '/\[ molecules \]/,$p' "$insane_top" | grep -v '^\[' | grep -v '^;' | grep -v '^$' \
      | sed -e "s/^Protein /${moltype} /" -e 's/^NA+ /NA /' -e 's/^CL- /CL /'
  } > "$out/system.top"
}

make_protein() {  # make_protein NAME PDB GO
  local name=$1 pdb=$2 go=$3 out=$root/systems/$1 work moltype flags
  work=$(mktemp -d)
  if [[ $go == 1 ]]; then flags=-go; moltype=$name; else flags=-elastic; moltype=${name}_0; fi
  ( cd "$work" && martinize2 -f "$OLDPWD/$pdb" -x cg.pdb -o topol.top -ff martini3001 -dssp $flags -ignh -cys auto \
      -ignore HOH -name "$name" >/dev/null 2>&1 )
  # insane counts a residue's charge again each time the residue recurs, and the Go sites (atom name CA, all after
  # the beads) repeat every residue; it skips atoms whose name starts with "v": rename them for insane, then back
  sed -e 's/^\(ATOM  .\{6\}\)CA  /\1vCA /' "$work/cg.pdb" > "$work/cg_insane.pdb"
  ( cd "$work" && INSANE_SEED=1 insane -f cg_insane.pdb -o system.gro -p insane.top -pbc cubic -d 1.5 -sol W \
      -salt 0.15 >/dev/null 2>&1 )
  sed -i -e 's/^\(.\{10\}\) vCA /\1 CA  /' "$work/system.gro"
  rm -rf "$out"; mkdir -p "$out"
  cp "$work/${moltype}.itp" "$work/system.gro" "$out/"
  if [[ $go == 1 ]]; then cp "$work/go_atomtypes.itp" "$work/go_nbparams.itp" "$out/"; fi
  chmod 644 "$out"/*
  write_top "$out" "$name" "$moltype" "$go" "$work/insane.top"
  rm -rf "$work"
}

make_excluded_beyond_cutoff() {
  local out=$root/systems/excluded_beyond_cutoff
  rm -rf "$out"; mkdir -p "$out"
  cat > "$out/system.top" <<'EOF'
; Three charged beads of one molecule, all pairs excluded: 1-2 at 1.3 nm and 2-3 at 1.43 nm lie beyond the
; 1.1 nm cut-off (no reaction-field exclusion correction in GROMACS), 1-3 at 0.6 nm within it (the bond, of no
; strength, only because GROMACS wants a bonded section before [ exclusions ]).
#include "martini_v3.0.0.itp"

[ moleculetype ]
M 1

[ atoms ]
1 Q5 1 LYS A 1  1.0
2 Q5 1 LYS B 2 -1.0
3 Q5 1 LYS C 3  0.5

[ bonds ]
1 3 1 0.6 0

[ exclusions ]
1 2 3

[ system ]
excluded pairs beyond the cut-off

[ molecules ]
M 1
EOF
  cat > "$out/system.gro" <<'EOF'
excluded pairs beyond the cut-off
3
    1LYS      A    1   1.000   1.000   1.000
    1LYS      B    2   2.300   1.000   1.000
    1LYS      C    3   1.000   1.600   1.000
   5.00000   5.00000   5.00000
EOF
}

rerun() {  # rerun WORK TOP XVG: grompp + mdrun -rerun of WORK/system.gro with WORK/TOP, every term -> XVG (-dp)
  local work=$1 top=$2 xvg=$3 n
  ( cd "$work" && gmx_d grompp -f rerun.mdp -c system.gro -p "$top" -o rerun.tpr -maxwarn 20 >grompp.log 2>&1 \
    && gmx_d mdrun -s rerun.tpr -rerun system.gro -e rerun.edr -g rerun.log -nt 1 >mdrun.log 2>&1 )
  # every energy term of the file: the numbers gmx dump -e lists under "energy components" (0-based there)
  n=$(gmx_d dump -e "$work/rerun.edr" 2>/dev/null | awk '/^energy components:/{on=1; next} on && NF==0{exit} on{n++} END{print n}')
  seq 1 "$n" | gmx_d energy -f "$work/rerun.edr" -o "$xvg" -dp >/dev/null 2>&1
  rm -f "$work"/rerun.tpr "$work"/rerun.edr "$work"/rerun.log "$work"/mdout.mdp
}

energies() {  # energies SYSTEM: GROMACS's energies of the committed files -> gromacs_energies.json
  local out=$root/systems/$1 work
  work=$(mktemp -d)
  cp "$root/rerun.mdp" "$out"/system.top "$out"/system.gro "$work/"
  for f in "$out"/*.itp "$m3"/*.itp; do ln -sf "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$work/"; done
  rerun "$work" system.top "$work/e.xvg"
  # MartiniGo: once more without the Go contacts (go_nbparams.itp not included), which isolates their energy
  if grep -q '^#include "go_nbparams.itp"' "$work/system.top"; then
    grep -v '^#include "go_nbparams.itp"' "$work/system.top" > "$work/no_go_contacts.top"
    rerun "$work" no_go_contacts.top "$work/e_no_go.xvg"
  fi
  python3 - "$out/gromacs_energies.json" "$gmx_version" "$work/e.xvg" "$work/e_no_go.xvg" <<'PY'
import json, os, sys
def read(path):
    legends, values = [], None
    for line in open(path):
        if line.startswith("@ s") and "legend" in line:
            legends.append(line.split('"')[1])
        elif not line.startswith(("#", "@")) and line.strip():
            values = [float(x) for x in line.split()[1:]]
    assert values is not None and len(values) == len(legends), f"no energies in {path}"
    return dict(zip(legends, values))
out = {"units": "kJ/mol",
       "source": f"gmx_d mdrun -rerun (GROMACS {sys.argv[2]}, double precision), rerun.mdp; gmx_d energy -dp",
       "energies": read(sys.argv[3])}
if os.path.exists(sys.argv[4]):
    out["energies_without_go_contacts"] = read(sys.argv[4])
json.dump(out, open(sys.argv[1], "w"), indent=1)
PY
  rm -rf "$work"
  echo "$1: $(python3 -c "import json; print(json.load(open('$out/gromacs_energies.json')))")"
}

for s in "${systems[@]}"; do
  if [[ $energies_only == 0 ]]; then
    case $s in
      villin) make_protein villin tests/data/structures/1VII_villin.pdb 0 ;;
      bpti) make_protein bpti tests/data/structures/4PTI_bpti.pdb 0 ;;
      ubiquitin) make_protein ubiquitin tests/data/structures/1UBQ_ubiquitin.pdb 0 ;;
      villin_go) make_protein villin_go tests/data/structures/1VII_villin.pdb 1 ;;
      excluded_beyond_cutoff) make_excluded_beyond_cutoff ;;
      *) echo "unknown system $s" >&2; exit 2 ;;
    esac
  fi
  [[ -f $root/systems/$s/system.top ]] || { echo "$root/systems/$s/system.top: no such file" >&2; exit 2; }
  energies "$s"
done
