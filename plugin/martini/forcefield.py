"""The MARTINI 3.0.0 parameter files (LGPL-2.1) that ``flashschnet-martini`` and ``flashschnet-compare`` read from
``--forcefield-dir``, fetched for the user: ``flashschnet-martini --fetch-forcefield DIR``.

They come from the martini-shaker 0.1.1 wheel on PyPI (``shaker/data/itps/``), downloaded with pip (not
installed) and checked against the SHA-256 of the files we verified against GROMACS (docs/martini.md). The same
files are on the MARTINI website (cgmartini.nl, Martini 3 force-field parameters).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from typing import Callable, Dict

from ...atomic import atomic_write
from ...errors import InputError
from .prepare import FORCEFIELD_FILES

#: the wheel that ships the files, and where in it
SOURCE = "martini-shaker==0.1.1"
INSIDE = "shaker/data/itps/"

#: SHA-256 of each file: those of the MARTINI 3.0.0 release our GROMACS comparison used
SHA256 = {
    "martini_v3.0.0.itp": "0ecbf0ff334b2ec21dc5e3151aca42167b977bc2aed41eb2a44bd8c997754894",
    "martini_v3.0.0_ions_v1.itp": "699aba132755b0ef13a0d7b41e6230a27777781bdc8075507413b89499c2be4f",
    "martini_v3.0.0_solvents_v1.itp": "b29a794f90cad745dc8d211b0fa683b92034c2aabd1d5df2133f60fa41cb3e2c",
}
assert set(SHA256) == set(FORCEFIELD_FILES)

ELSEWHERE = "or get them from the MARTINI website (cgmartini.nl, Martini 3 force-field parameters)"


def download_wheel(folder: str) -> str:
    """Download the wheel of :data:`SOURCE` into ``folder`` with this Python's pip (no dependencies, nothing
    installed); its path, or :class:`InputError` with pip's last line."""
    res = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                          "-d", folder, SOURCE], capture_output=True, text=True)
    wheels = [n for n in os.listdir(folder) if n.endswith(".whl")]
    if res.returncode != 0 or not wheels:
        last = [ln.strip() for ln in (res.stderr + res.stdout).splitlines() if ln.strip()]
        raise InputError(f"could not download {SOURCE} from PyPI ({last[-1] if last else 'pip failed'}); check the "
                         f"network or pip's index settings, {ELSEWHERE}")
    return os.path.join(folder, wheels[0])


def read_wheel(wheel: str) -> Dict[str, bytes]:
    """The three files' bytes from the wheel, each checked against :data:`SHA256`."""
    try:
        with zipfile.ZipFile(wheel) as z:
            found = {os.path.basename(n): n for n in z.namelist() if n.startswith(INSIDE)}
            data = {name: z.read(found[name]) for name in FORCEFIELD_FILES if name in found}
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"{wheel}: not a readable wheel ({exc}); {ELSEWHERE}") from None
    for name in FORCEFIELD_FILES:
        if name not in data:
            raise InputError(f"{wheel}: has no {INSIDE}{name}; {ELSEWHERE}")
    for name in FORCEFIELD_FILES:
        digest = hashlib.sha256(data[name]).hexdigest()
        if digest != SHA256[name]:
            raise InputError(f"{wheel}: {name} is not the MARTINI 3.0.0 file we verified (sha256 {digest[:12]}..., "
                             f"expected {SHA256[name][:12]}...); {ELSEWHERE}")
    return data


def fetch_forcefield(dest: str, echo: Callable[[str], None] = print) -> str:
    """Write the MARTINI 3.0.0 parameter files into the folder ``dest`` (created if needed; each file written
    whole or not at all, an existing one replaced only by the verified file) and return its absolute path."""
    dest = os.path.abspath(dest)
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise InputError(f"--fetch-forcefield {dest}: exists and is not a directory; choose a folder")
    with tempfile.TemporaryDirectory() as tmp:
        echo(f"note: downloading {SOURCE} from PyPI (only to read its MARTINI 3.0.0 .itp files)")
        data = read_wheel(download_wheel(tmp))
    try:
        os.makedirs(dest, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--fetch-forcefield {dest}: cannot create the folder ({exc.strerror}); choose a writable "
                         "place") from None
    for name in FORCEFIELD_FILES:
        with atomic_write(os.path.join(dest, name), "wb", what="writing the MARTINI parameter files",
                          option="--fetch-forcefield") as f:
            f.write(data[name])
    return dest
