"""flashschnet.kernels.cpu_build: a C source compiled once into the cache (keyed by source and flags) and loaded;
a compiler error or a missing compiler is one OSError line."""
from __future__ import annotations

import ctypes

import pytest

from flashschnet.kernels import cpu_build

SOURCE = "int twice(int x) { return 2 * x; }\n"


def test_built_once_then_reused(tmp_path):
    lib = cpu_build.build(SOURCE, "twice", tmp_path)
    assert lib.parent == tmp_path and lib.name.startswith("twice-") and ctypes.CDLL(str(lib)).twice(21) == 42
    stamp = lib.stat().st_mtime_ns
    assert cpu_build.build(SOURCE, "twice", tmp_path) == lib and lib.stat().st_mtime_ns == stamp
    other = cpu_build.build(SOURCE, "twice", tmp_path, openmp=False)     # other flags: another file
    assert other != lib and ctypes.CDLL(str(other)).twice(2) == 4


def test_errors_are_one_line(tmp_path, monkeypatch):
    with pytest.raises(OSError) as err:
        cpu_build.compile_library(cpu_build.compiler(), cpu_build.FLAGS, tmp_path, "int f( {", "bad")
    assert "failed" in str(err.value) and "\n" not in str(err.value)
    assert not list(tmp_path.glob("bad-*.so"))
    monkeypatch.setenv("CC", "")
    monkeypatch.setattr(cpu_build.shutil, "which", lambda name: None)
    with pytest.raises(OSError, match="no C compiler found"):
        cpu_build.build(SOURCE, "twice", tmp_path / "other")


@pytest.mark.parametrize("damage", ["flipped byte", "zeroed block", "truncated", "no sha256"])
def test_a_damaged_library_is_rebuilt_with_a_note_not_loaded(tmp_path, damage, caplog):
    lib = cpu_build.build(SOURCE, "twice", tmp_path)
    good = lib.read_bytes()
    stamp = tmp_path / (lib.name + ".sha256")
    assert cpu_build.verified(lib) and stamp.exists()
    data = bytearray(good)
    if damage == "flipped byte":
        data[len(data) // 2] ^= 0x10
    elif damage == "zeroed block":
        at = next(i for i in range(len(data) // 3, len(data)) if data[i])        # (a small library has padding)
        data[at:at + 256] = bytes(256)
    elif damage == "truncated":
        data = data[:len(data) // 2]
    else:
        stamp.unlink()
    lib.write_bytes(bytes(data))
    assert not cpu_build.verified(lib)
    with caplog.at_level("WARNING", logger="flashschnet"):
        again = cpu_build.build(SOURCE, "twice", tmp_path)
    assert again == lib and cpu_build.verified(lib) and len(lib.read_bytes()) == len(good)
    notes = [r.getMessage() for r in caplog.records if "sha256" in r.getMessage()]
    assert len(notes) == 1 and "\n" not in notes[0] and str(lib) in notes[0] and notes[0].endswith("rebuilt")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([lib.name, stamp.name])   # no temporary left
