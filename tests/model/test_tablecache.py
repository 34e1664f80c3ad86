"""flashschnet.tablecache: the default network's filter tables, built once per model file and cached.

A miss builds and writes, a hit reads the same tables bit for bit; the key follows the file's bytes; racing writers
leave one complete entry and no temporary file; a truncated entry, one with a flipped bit or a zeroed block in its
numbers (caught by the payload's checksum), or one of another model file, is rebuilt with a note; a cache that cannot be written builds in memory with a note; and the cache folder follows
FLASHSCHNET_CACHE_DIR. A tiny model (one block of 16 filters) keeps every build cheap."""
from __future__ import annotations

import os
import shutil
import threading

import pytest
import torch

from tests.conftest import EXAMPLES
from flashschnet import load_model
from flashschnet.tablecache import CACHE_ENV, cache_dir, cached_tables, entry_name, file_sha256, payload_sha256
from flashschnet.tiny import tiny_model
from flashschnet.transforms import compress

SPEC = {"kind": "quintic", "knots": 64, "dtype": "float32"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two tiny model files (different weights) with their sha256 sums."""
    folder = tmp_path_factory.mktemp("tiny-models")
    paths = [tiny_model(EXAMPLES / "1L2Y_trpcage.pdb", folder / f"tiny{seed}.pt", seed=seed) for seed in (0, 1)]
    return [(p, file_sha256(p)) for p in paths]


def _same(a, b) -> bool:
    return len(a.tables) == len(b.tables) and all(
        torch.equal(x, y) and torch.equal(s, t) for (x, s), (y, t) in zip(a.tables, b.tables))


def test_a_miss_builds_and_writes_then_a_hit_reads_the_same_tables(tiny, tmp_path):
    path, sha = tiny[0]
    net = load_model(path).network
    built = cached_tables(net, SPEC, sha256=sha, folder=str(tmp_path))
    assert built.origin == f"built and cached in {tmp_path}" and built.notes == []
    assert os.listdir(tmp_path) == [entry_name(sha, SPEC)]
    hit = cached_tables(net, SPEC, sha256=sha, folder=str(tmp_path))
    assert hit.origin == f"from the cache in {tmp_path}" and hit.notes == [] and hit.teacher_sha256 == sha
    assert _same(built, hit)
    # the tables are compress()'s, and the model they make is compress()'s, bit for bit
    direct = compress(net, knots=64)
    made = hit.apply(net).state_dict()
    assert made.keys() == direct.state_dict().keys()
    assert all(torch.equal(v, direct.state_dict()[k]) for k, v in made.items())
    # another spec is another entry
    cached_tables(net, dict(SPEC, knots=32), sha256=sha, folder=str(tmp_path))
    assert len(os.listdir(tmp_path)) == 2


def test_the_key_follows_the_model_files_bytes(tiny, tmp_path):
    (p0, sha0), (p1, sha1) = tiny
    assert sha0 != sha1
    cached_tables(load_model(p0).network, SPEC, sha256=sha0, folder=str(tmp_path))
    other = cached_tables(load_model(p1).network, SPEC, sha256=sha1, folder=str(tmp_path))
    assert other.origin.startswith("built") and sorted(os.listdir(tmp_path)) == sorted(
        [entry_name(sha0, SPEC), entry_name(sha1, SPEC)])
    copy = tmp_path / "elsewhere.pt"                      # the same bytes under another name: a hit
    shutil.copyfile(p0, copy)
    assert file_sha256(str(copy)) == sha0


def test_racing_writers_leave_one_complete_entry_and_no_temporary_file(tiny, tmp_path, monkeypatch):
    """Two threads miss at once (a barrier holds both builders until each has missed), both write; the entry is
    complete, equal to what each built, and no temporary file is left."""
    import flashschnet.transforms as transforms

    path, sha = tiny[0]
    net = load_model(path).network
    barrier = threading.Barrier(2, timeout=60)
    real = transforms.tabulate

    def slow_tabulate(*args, **kwargs):
        barrier.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(transforms, "tabulate", slow_tabulate)
    results, errors = [], []

    def build():
        try:
            results.append(cached_tables(net, SPEC, sha256=sha, folder=str(tmp_path)))
        except BaseException as exc:          # noqa: BLE001 -- reported below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 2 and all(r.origin.startswith("built and cached") for r in results)
    assert os.listdir(tmp_path) == [entry_name(sha, SPEC)]
    monkeypatch.setattr(transforms, "tabulate", real)
    hit = cached_tables(net, SPEC, sha256=sha, folder=str(tmp_path))
    assert hit.origin.startswith("from the cache") and _same(hit, results[0]) and _same(hit, results[1])


def _damage_numbers(entry, how: str) -> None:
    """Flip one bit of, or zero 64 bytes of, the first table's numbers inside the entry file: what still decodes
    to a finite table of the right shape (checked), so only the payload's checksum can tell."""
    first = torch.load(entry, weights_only=True)["tables"][0]
    data = bytearray(entry.read_bytes())
    at = data.find(first.numpy().tobytes())
    assert at > 0
    mid = at + (first.numel() * first.element_size()) // 2
    if how == "flipped bit":
        data[mid] ^= 0x01
    else:
        data[mid:mid + 64] = bytes(64)
    entry.write_bytes(bytes(data))
    damaged = torch.load(entry, weights_only=True)["tables"][0]
    assert damaged.shape == first.shape and bool(torch.isfinite(damaged).all()) and not torch.equal(damaged, first)


@pytest.mark.parametrize("damage", ["truncated", "flipped bit", "zeroed block", "another model's", "wrong shape"])
def test_a_bad_entry_is_rebuilt_with_a_note(tiny, tmp_path, damage):
    (p0, sha0), (p1, sha1) = tiny
    net = load_model(p0).network
    good = cached_tables(net, SPEC, sha256=sha0, folder=str(tmp_path))
    entry = tmp_path / entry_name(sha0, SPEC)
    if damage == "truncated":
        entry.write_bytes(entry.read_bytes()[:1000])
    elif damage in ("flipped bit", "zeroed block"):
        _damage_numbers(entry, damage)
    elif damage == "another model's":          # a valid entry of tiny1 copied under tiny0's key
        cached_tables(load_model(p1).network, SPEC, sha256=sha1, folder=str(tmp_path))
        shutil.copyfile(tmp_path / entry_name(sha1, SPEC), entry)
    else:
        obj = torch.load(entry, weights_only=True)
        obj["tables"][0] = obj["tables"][0][:10]
        obj["payload_sha256"] = payload_sha256(obj["tables"] + obj["scales"])      # a consistent, wrong entry
        torch.save(obj, entry)
    again = cached_tables(net, SPEC, sha256=sha0, folder=str(tmp_path))
    assert len(again.notes) == 1 and "\n" not in again.notes[0]
    assert again.notes[0].startswith(f"the filter-table cache entry {entry} is not usable (") and \
        again.notes[0].endswith("); rebuilt")
    if damage in ("flipped bit", "zeroed block"):
        assert "checksum" in again.notes[0] and "damaged" in again.notes[0]
    assert _same(again, good) and again.origin.startswith("built and cached")
    healed = cached_tables(net, SPEC, sha256=sha0, folder=str(tmp_path))      # the entry was rewritten whole
    assert healed.origin.startswith("from the cache") and healed.notes == [] and _same(healed, good)


def test_a_cache_that_cannot_be_written_builds_in_memory_with_one_note(tiny, tmp_path):
    path, sha = tiny[0]
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be\n")        # no folder can be made here, even as root
    folder = str(blocker / "tables")
    got = cached_tables(load_model(path).network, SPEC, sha256=sha, folder=folder)
    assert got.origin == "built in memory" and len(got.notes) == 1
    assert got.notes[0].startswith(f"the filter-table cache {folder} cannot be written (") and CACHE_ENV in got.notes[0]
    if os.geteuid() != 0:                     # a read-only folder (root writes there regardless)
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            got = cached_tables(load_model(path).network, SPEC, sha256=sha, folder=str(ro))
        finally:
            ro.chmod(0o755)
        assert got.origin == "built in memory" and len(got.notes) == 1 and os.listdir(ro) == []


def test_a_model_in_memory_is_built_not_cached(tiny, tmp_path):
    got = cached_tables(load_model(tiny[0][0]).network, SPEC, sha256=None, folder=str(tmp_path))
    assert got.origin == "built in memory" and got.notes == [] and os.listdir(tmp_path) == []


def test_the_folder_follows_the_environment(monkeypatch, tmp_path):
    assert cache_dir({CACHE_ENV: str(tmp_path)}) == str(tmp_path / "tables")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir({}) == str(tmp_path / "home" / ".cache" / "flashschnet" / "tables")
    assert cache_dir({CACHE_ENV: "  "}) == cache_dir({})
