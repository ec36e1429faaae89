"""Opening Zarr arrays so that a missing chunk is an error, never the fill value.

Zarr reads a chunk that is not on disk as the array's fill value (zeros), and
by default does not write a chunk whose values all equal it. So a deleted
chunk file of a store would read as zeros, silently. dimbsvm closes both
doors:

* every array it creates writes every chunk (``write_empty_chunks``), so on a
  complete array each chunk exists on disk;
* read-only handles go through :class:`CheckedStore`, which raises
  :class:`~dimbsvm.exceptions.StoreError` naming the array and its rows when a
  chunk is absent.

Writable handles keep Zarr's behaviour: a task writing part of a new chunk
must read the (not yet written) rest as the fill value.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec
from zarr.storage import WrapperStore

from ..exceptions import StoreError
from .location import filesystem, join, location, read_json, zarr_store

__all__ = ["COMPRESSIONS", "CheckedStore", "create_checksummed_array", "expected_chunk_keys", "missing_chunks",
           "missing_message", "open_array", "open_group", "writable"]

#: Array config of everything dimbsvm writes: every chunk is on disk, even all-zero ones.
WRITE_CONFIG = {"write_empty_chunks": True}

_CHUNK_KEY = re.compile(r"^(?:(?P<array>.+)/)?c/(?P<coords>\d+(?:/\d+)*)$")


class CheckedStore(WrapperStore):
    """A read-only Zarr store (local or fsspec) on which reading an absent chunk raises ``StoreError``.

    Metadata keys behave as in the wrapped store (absent means absent); only
    chunk keys (``<array>/c/<i>/<j>...``) are checked. ``where`` names the
    store in messages.
    """

    def __init__(self, store, where: str | None = None):
        super().__init__(store)
        self.where = where or str(store)

    def _with_store(self, store):
        return type(self)(store, self.where)

    async def get(self, key, prototype=None, byte_range=None):
        value = await super().get(key, prototype, byte_range)
        if value is None:
            self._refuse_missing(key)
        return value

    async def get_partial_values(self, prototype, key_ranges):
        key_ranges = list(key_ranges)
        values = await super().get_partial_values(prototype, key_ranges)
        for (key, _), value in zip(key_ranges, values):
            if value is None:
                self._refuse_missing(key)
        return values

    def _refuse_missing(self, key: str) -> None:
        match = _CHUNK_KEY.match(key)
        if match is not None:
            raise StoreError(missing_message(self.where, match["array"] or "",
                                              [int(c) for c in match["coords"].split("/")]))


def open_group(path, mode: str = "r"):
    """A Zarr group at a location (a local directory or an fsspec URL); read-only groups check for missing chunks.

    Parameters
    ----------
    path : str or path
        A directory, or a URL (:mod:`dimbsvm.store.location`).
    mode : {"r", "r+", "w", "a"}
        ``"r"`` opens through :class:`CheckedStore`.
    """
    loc = location(path)
    if mode == "r":
        return zarr.open_group(store=CheckedStore(zarr_store(loc, read_only=True), str(loc)), mode="r")
    return zarr.open_group(store=zarr_store(loc, read_only=False), mode=mode, zarr_format=3)


def open_array(path):
    """A read-only Zarr array at a location whose missing chunks raise ``StoreError``."""
    loc = location(path)
    return zarr.open_array(store=CheckedStore(zarr_store(loc, read_only=True), str(loc)), mode="r")


def writable(array):
    """``array`` configured to write every chunk (see the module docstring)."""
    return array.with_config(WRITE_CONFIG)


#: How a store's chunks may be compressed (before their crc32c checksum). ``"zstd"`` (level 3, the
#: default) keeps data of few distinct values small; ``"lz4"`` (Blosc, byte shuffle) decodes several
#: times faster for about zstd's size on data that hardly compresses, so chunk passes that read the
#: store again and again wait less (the numbers in ``benchmarks/scaling_notes.md``).
COMPRESSIONS = ("zstd", "lz4")


def _compressor(compression):
    if compression == "zstd":
        return ZstdCodec(level=3)
    if compression == "lz4":
        return BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
    raise ValueError(f"compression must be one of {COMPRESSIONS}; got {compression!r}")


def create_checksummed_array(group, name, *, shape, dtype, chunks, compression="zstd"):
    """A new array in ``group`` whose chunks are compressed (:data:`COMPRESSIONS`) and crc32c-checksummed.

    Every array dimbsvm writes goes through here, so every chunk on disk can
    be verified, and every chunk is written (all-zero ones too), so a missing
    chunk is damage.
    """
    return group.create_array(name, shape=shape, dtype=dtype, chunks=chunks,
                              compressors=[_compressor(compression), Crc32cCodec()], overwrite=True,
                              config=WRITE_CONFIG)


def expected_chunk_keys(shape, chunks) -> list[tuple[int, ...]]:
    """Grid coordinates of every chunk of an array of ``shape`` cut into ``chunks``."""
    counts = [max(1, -(-int(s) // int(c))) if s else 0 for s, c in zip(shape, chunks)]
    if not counts:
        return [()]
    return [tuple(int(i) for i in idx) for idx in np.ndindex(*counts)]


def missing_chunks(array_dir) -> list[tuple[int, ...]]:
    """Chunk coordinates of the array at ``array_dir`` (a directory or URL) that have no file or object."""
    loc = location(array_dir)
    shape, chunks = _array_grid(loc)
    if isinstance(loc, Path):
        return [coords for coords in expected_chunk_keys(shape, chunks)
                if not loc.joinpath("c", *[str(c) for c in coords]).is_file()]
    fs, root = filesystem(join(loc, "c"))
    present = {key[len(root):].strip("/") for key in fs.find(root)}  # one listing, not one request per chunk
    return [coords for coords in expected_chunk_keys(shape, chunks)
            if "/".join(str(c) for c in coords) not in present]


def _array_grid(array_dir):
    meta = read_json(join(array_dir, "zarr.json"))
    if meta is None:
        raise FileNotFoundError(f"{join(array_dir, 'zarr.json')} does not exist")
    return meta["shape"], meta["chunk_grid"]["configuration"]["chunk_shape"]


def missing_message(root: str, array: str, coords: list[int]) -> str:
    """The error naming a missing chunk: the store ``root``, the array, the chunk and its rows."""
    row_chunked = not any(coords[1:])  # dimbsvm's arrays are cut along rows only
    where = f"chunk {coords[0] if row_chunked else tuple(coords)} of {array or 'the array'}"
    try:
        shape, chunks = _array_grid(join(root, array) if array else root)
        first = coords[0] * chunks[0]
        where += f" (rows {first}..{min(first + chunks[0], shape[0]) - 1})"
    except (OSError, KeyError, ValueError, IndexError):
        pass
    return (f"store {root}: {where} is missing on disk, so the store is damaged (it would read as zeros); "
            "rebuild it (dimbsvm ingest SOURCE STORE --overwrite, or delete the stage to recompute it)")
