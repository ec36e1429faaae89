"""Text files are UTF-8 or refused: a reader never replaces bytes it cannot decode with U+FFFD in silence.

A file saved as latin-1 would otherwise put ``n\ufffdgatif`` into a class name
or a category, and the model's names would never match the data's again.
"""

from __future__ import annotations

from pathlib import Path

from ..exceptions import DataError

__all__ = ["ENCODING", "not_utf8", "read_text"]

#: How every text reader decodes: UTF-8, a leading byte-order mark dropped.
ENCODING = "utf-8-sig"


def read_text(path: Path) -> str:
    """The whole text of ``path``, decoded as UTF-8, or :func:`not_utf8`'s one-line error."""
    try:
        return Path(path).read_text(encoding=ENCODING)
    except UnicodeDecodeError as exc:
        raise not_utf8(path) from exc


def not_utf8(path) -> DataError:
    """The error for a text file that is not UTF-8: the first line that does not decode, and how to convert it.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp()) / "labels.csv"
    >>> _ = tmp.write_bytes("x,class\\n1,oui\\n2,n\\u00e9gatif\\n".encode("latin-1"))
    >>> str(not_utf8(tmp)).split(";")[0].endswith("labels.csv, line 3: not UTF-8 text (byte 0xe9 at column 4)")
    True
    """
    path = Path(path)
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                return DataError(f"{path}, line {number}: not UTF-8 text (byte 0x{line[exc.start]:02x} at column "
                                 f"{exc.start + 1}); save it as UTF-8 (for a latin-1 file: iconv -f latin1 -t utf-8 "
                                 f"{path.name} > {path.stem}.utf8{path.suffix})")
    return DataError(f"{path}: not UTF-8 text; save it as UTF-8")
