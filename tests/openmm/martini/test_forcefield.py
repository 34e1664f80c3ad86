"""flashschnet-martini --fetch-forcefield DIR (flashschnet.openmm.martini.forcefield): the three MARTINI 3.0.0 files
out of the martini-shaker wheel, checked by SHA-256, written whole; a wrong or missing file, a failed download or a
--fetch-forcefield that names a file: one line, exit 2, nothing written. The download is replaced by a wheel built
here (no network in the suite)."""
from __future__ import annotations

import zipfile

import pytest

from tests.conftest import SHARED
from flashschnet.openmm.martini import forcefield
from flashschnet.openmm.martini.prepare import FORCEFIELD_FILES, check_forcefield_dir
from flashschnet.scripts.martini import main

M3 = SHARED / "martini" / "m3"


def _wheel_with(tmp_path, files):
    wheel = tmp_path / "martini_shaker-0.1.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(forcefield.INSIDE + name, data)
    return str(wheel)


def _fetch(monkeypatch, capsys, wheel, dest):
    monkeypatch.setattr(forcefield, "download_wheel", lambda folder: wheel)
    with pytest.raises(SystemExit) as info:
        main(["--fetch-forcefield", str(dest)])
    return info.value.code, capsys.readouterr().err.strip().splitlines()


def test_the_verified_files_are_written(tmp_path, monkeypatch, capsys):
    if not all((M3 / n).exists() for n in FORCEFIELD_FILES):
        pytest.skip(f"MARTINI 3 force-field files not found in {M3} (../shared/ is absent)")
    wheel = _wheel_with(tmp_path, {n: (M3 / n).read_bytes() for n in FORCEFIELD_FILES})
    rc, err = _fetch(monkeypatch, capsys, wheel, tmp_path / "ff")      # no PDB, --steps or --out needed
    assert rc == 0 and err[-1].endswith(f"use --forcefield-dir {tmp_path / 'ff'}"), err
    assert check_forcefield_dir(str(tmp_path / "ff")) == str(tmp_path / "ff")
    for n in FORCEFIELD_FILES:
        assert (tmp_path / "ff" / n).read_bytes() == (M3 / n).read_bytes()
    assert sorted(p.name for p in (tmp_path / "ff").iterdir()) == sorted(FORCEFIELD_FILES)     # no .tmp left


@pytest.mark.parametrize("damage, says", [
    ("changed", "is not the MARTINI 3.0.0 file we verified"),
    ("missing", "has no shaker/data/itps/martini_v3.0.0_ions_v1.itp"),
])
def test_a_wheel_without_the_verified_files_writes_nothing(tmp_path, monkeypatch, capsys, damage, says):
    files = {n: b"; not the real file\n" for n in FORCEFIELD_FILES}
    if damage == "missing":
        files.pop("martini_v3.0.0_ions_v1.itp")
    rc, err = _fetch(monkeypatch, capsys, _wheel_with(tmp_path, files), tmp_path / "ff")
    assert rc == 2 and len(err) == 2 and err[1].startswith("flashschnet-martini: error: ") and says in err[1], err
    assert "cgmartini.nl" in err[1] and not (tmp_path / "ff").exists()


def test_a_failed_download_and_a_file_as_the_folder_are_one_line(tmp_path, monkeypatch, capsys):
    def offline(folder):
        raise forcefield.InputError("could not download martini-shaker==0.1.1 from PyPI (no network)")

    monkeypatch.setattr(forcefield, "download_wheel", offline)
    with pytest.raises(SystemExit) as info:
        main(["--fetch-forcefield", str(tmp_path / "ff")])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and "could not download" in err[-1] and not (tmp_path / "ff").exists()
    (tmp_path / "file").write_text("mine")
    rc, err = _fetch(monkeypatch, capsys, "unused", tmp_path / "file")
    assert rc == 2 and err == [f"flashschnet-martini: error: --fetch-forcefield {tmp_path / 'file'}: exists and is "
                               "not a directory; choose a folder"]
    assert (tmp_path / "file").read_text() == "mine"
