"""Filter tables built once per model file and kept: the cache behind the default network's tables.

Tabulating a model's filters (:func:`flashschnet.transforms.tabulate`) takes about 0.1 s for trp-cage's model once
PyTorch's forward-mode autograd is loaded, and 1-2 s in a fresh process (mostly that import). Every run of one
model file with one table setting needs the same tables, so :func:`cached_tables` keeps them, one file per key::

    $FLASHSCHNET_CACHE_DIR/tables/        (default ~/.cache/flashschnet/tables/)
        v2-<the model file's sha256>-quintic-float32-256.pt

* **Key**: the model file's sha256 (its bytes, not its path: a copied or moved file hits, an edited one misses),
  the interpolant, the knots, the table dtype and :data:`FORMAT_VERSION` (raised whenever the tables one model
  gives, or what an entry holds, would change).
* **Entry**: plain data, ``{"format", "format_version", "teacher_sha256", "compression": {kind, knots, dtype},
  "tables": [...], "scales": [...], "payload_sha256"}``, read with ``torch.load(weights_only=True)`` (no code in it
  runs) and checked: format, version, the teacher's sha256 and the spec equal to the key's, the payload's sha256
  (:func:`payload_sha256`: every table's and scale's dtype, shape and bytes, in order) equal to the one written
  with it -- a flipped bit or a zeroed block in the numbers still decodes to finite tables, and only this catches
  it --, one table and one scale per interaction block of the shapes and dtypes the model needs, finite values.
  An entry that fails any check is never used: the tables are built again and the entry rewritten, with one note
  saying so.
* **Writes**: a temporary file of the writer's own in the cache folder, renamed over the entry
  (:func:`flashschnet.atomic.atomic_write` with ``unique=True``). Runs that start together may both build and
  write; the last rename wins whole, and a reader sees a complete entry or none.
* **A cache that cannot be written** (read-only, a full disk, a file in the folder's place): the tables are built
  in memory, with one note; never a failure.
* A model in memory (no file, so no sha256) is tabulated and not cached.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

import torch

from .errors import InputError

#: the entries' format name and version (a change to what a model's tables are raises the version: new keys)
FORMAT = "flashschnet-filter-tables"
FORMAT_VERSION = 2
#: the environment variable naming flashschnet's cache folder (the tables go in its ``tables/``)
CACHE_ENV = "FLASHSCHNET_CACHE_DIR"


def cache_dir(environ: Optional[Mapping[str, str]] = None) -> str:
    """The folder of the table cache: ``$FLASHSCHNET_CACHE_DIR/tables``, else ``~/.cache/flashschnet/tables``
    (absolute; it need not exist)."""
    env = os.environ if environ is None else environ
    root = (env.get(CACHE_ENV) or "").strip() or os.path.join("~", ".cache", "flashschnet")
    return os.path.join(os.path.abspath(os.path.expanduser(root)), "tables")


def file_sha256(path: str) -> str:
    """sha256 (hex) of a file's bytes.

    Raises
    ------
    InputError
        The file cannot be read (one line naming it).
    """
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    return h.hexdigest()


def payload_sha256(tensors) -> str:
    """sha256 (hex) of a sequence of tensors: each one's dtype, shape and bytes (CPU, contiguous), in order."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def entry_name(sha256: str, spec: Mapping[str, object]) -> str:
    """The cache file name of a model file's tables (see the module docstring)."""
    return f"v{FORMAT_VERSION}-{sha256}-{spec['kind']}-{spec['dtype']}-{int(spec['knots'])}.pt"


@dataclass
class FilterTables:
    """A model's filter tables, what they are and how they were got.

    Attributes
    ----------
    spec : dict
        ``{"kind", "knots", "dtype"}`` (a compressed model's ``config["compression"]``).
    tables : list of (table, scale)
        Per interaction block: ``table [knots, Q, F]`` in the table dtype, ``scale [Q, F]`` float32 (CPU).
    teacher_sha256 : str or None
        sha256 of the model file they were tabulated from (None: a model in memory).
    origin : str
        How they were got, for a note: "from the cache in <folder>", "built and cached in <folder>",
        "built in memory".
    notes : list of str
        Trouble with the cache worth a ``note:`` line (an entry rebuilt, a folder that cannot be written).
    """

    spec: Dict[str, object]
    tables: List[Tuple[torch.Tensor, torch.Tensor]]
    teacher_sha256: Optional[str] = None
    origin: str = "built in memory"
    notes: List[str] = field(default_factory=list)

    def apply(self, model):
        """``model`` (exact; a LoadedModel or CGSchNet, not modified) with these tables
        (:func:`flashschnet.transforms.with_tables`); an :class:`InputError` if they do not fit it."""
        from .transforms import with_tables

        return with_tables(model, self.tables, self.spec)

    @classmethod
    def of(cls, model, teacher_sha256: Optional[str] = None) -> "FilterTables":
        """The tables of a compressed model (a LoadedModel or CGSchNet), on the CPU: e.g. for an ensemble's
        workers, so that every block computes with the driver's tables."""
        net = getattr(model, "network", model)
        spec = net.config.get("compression")
        if not spec:
            raise InputError("the model has no filter tables (it is not compressed)")
        tables = [(b.conv.filter_network.table.detach().cpu().clone(), b.conv.filter_network.scale.detach().cpu().clone())
                  for b in net.interaction_blocks]
        return cls(spec=dict(spec), tables=tables, teacher_sha256=teacher_sha256, origin="given")

    def to_entry(self) -> Dict[str, object]:
        """The cache file's plain-data dict."""
        tables, scales = [t for t, _ in self.tables], [s for _, s in self.tables]
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "teacher_sha256": self.teacher_sha256,
                "compression": dict(self.spec), "tables": tables, "scales": scales,
                "payload_sha256": payload_sha256(tables + scales)}


def _from_entry(obj: Dict[str, object], sha256: str, spec: Mapping[str, object], path: str) -> FilterTables:
    """The tables of a cache file's dict, checked against its key (shapes and values are checked by
    :meth:`FilterTables.apply`); an :class:`InputError` saying what is wrong."""
    if obj.get("format") != FORMAT or obj.get("format_version") != FORMAT_VERSION:
        raise InputError(f"format {obj.get('format')!r} version {obj.get('format_version')!r}")
    if obj.get("teacher_sha256") != sha256:
        raise InputError(f"tabulated from another model file (sha256 {obj.get('teacher_sha256')})")
    if obj.get("compression") != dict(spec):
        raise InputError(f"tables {obj.get('compression')}, not {dict(spec)}")
    tables, scales = obj.get("tables"), obj.get("scales")
    if not isinstance(tables, list) or not isinstance(scales, list) or len(tables) != len(scales) or \
            not all(isinstance(t, torch.Tensor) for t in tables + scales):
        raise InputError("no list of tables and scales")
    if obj.get("payload_sha256") != payload_sha256(tables + scales):
        raise InputError("its tables' checksum does not match the one written with them: the file is damaged")
    return FilterTables(spec=dict(spec), tables=list(zip(tables, scales)), teacher_sha256=sha256,
                        origin=f"from the cache in {os.path.dirname(path)}")


def check_fit(found: FilterTables, network) -> None:
    """Raise an :class:`InputError` unless ``found`` holds one finite table and scale per interaction block of
    ``network`` with the shapes and dtypes its spec implies (what :meth:`FilterTables.apply` copies)."""
    from .nn.table import ORDERS, TABLE_DTYPES

    blocks = len(network.interaction_blocks)
    if len(found.tables) != blocks:
        raise InputError(f"{len(found.tables)} tables for a model of {blocks} interaction blocks")
    Q, F = ORDERS[str(found.spec["kind"])], int(network.config["num_filters"])
    want = (((int(found.spec["knots"]), Q, F), TABLE_DTYPES[str(found.spec["dtype"])]), ((Q, F), torch.float32))
    for b, pair in enumerate(found.tables):
        for what, t, (shape, dtype) in zip(("table", "scale"), pair, want):
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != dtype:
                shown = f"{tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__
                raise InputError(f"block {b}'s {what} is {shown}, the model needs {shape} {dtype}")
            if not bool(torch.isfinite(t.float()).all()):
                raise InputError(f"block {b}'s {what} holds NaN or infinite values")


def _read(path: str, sha256: str, spec: Mapping[str, object], network) -> FilterTables:
    """A cache entry, checked against its key and the network (an :class:`InputError` if it fails)."""
    from .safeload import load_plain

    found = _from_entry(load_plain(path, "filter-table cache"), sha256, spec, path)
    check_fit(found, network)
    return found


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def cached_tables(network, spec: Mapping[str, object], sha256: Optional[str] = None,
                  folder: Optional[str] = None, source: Optional[str] = None) -> FilterTables:
    """The filter tables ``spec`` of an exact network: from the cache when a valid entry is there, else built
    (:func:`flashschnet.transforms.tabulate`) and written to the cache.

    Parameters
    ----------
    network : CGSchNet
        The exact network, as loaded from the model file (not modified).
    spec : mapping
        ``{"kind", "knots", "dtype"}``.
    sha256 : str or None
        sha256 of the model file the network was loaded from; None (a model in memory): built, not cached.
    folder : str or None
        The cache folder; None: :func:`cache_dir`.
    source : str or None
        The model file, for notes.

    Returns
    -------
    FilterTables
        With ``origin`` and ``notes`` (cache trouble never raises: it becomes a note).

    Raises
    ------
    InputError
        Tables that miss their error bound (from :func:`~flashschnet.transforms.tabulate`).
    """
    from .transforms import tabulate

    spec = {"kind": spec["kind"], "knots": int(spec["knots"]), "dtype": spec["dtype"]}
    notes: List[str] = []
    path = None
    if sha256 is not None:
        folder = cache_dir() if folder is None else folder
        path = os.path.join(folder, entry_name(sha256, spec))
        if os.path.exists(path):
            try:
                return _read(path, sha256, spec, network)
            except InputError as exc:
                notes.append(f"the filter-table cache entry {path} is not usable ({_first_line(exc)}); rebuilt")
    tables, made = tabulate(network, spec["knots"], spec["dtype"], spec["kind"])
    found = FilterTables(spec=made, tables=tables, teacher_sha256=sha256, notes=notes)
    if path is not None:
        found.origin = _write(found, folder, path, source)
    return found


def _write(found: FilterTables, folder: str, path: str, source: Optional[str]) -> str:
    """Write a cache entry; the origin to report ("built and cached in ...", or "built in memory" with a note
    when the folder cannot be written)."""
    import io

    from .atomic import atomic_write

    data = io.BytesIO()
    torch.save(found.to_entry(), data)          # in memory first: a failed write is an OSError, nothing else
    try:
        os.makedirs(folder, exist_ok=True)
        with atomic_write(path, "wb", what="writing the filter-table cache", option=CACHE_ENV, unique=True) as f:
            f.write(data.getbuffer())
    except OSError as exc:
        reason = exc.strerror or _first_line(exc)
        found.notes.append(f"the filter-table cache {folder} cannot be written ({reason}): tables built in memory "
                           f"for this run (set {CACHE_ENV} to a writable folder to keep them)")
        return "built in memory"
    return f"built and cached in {folder}"
