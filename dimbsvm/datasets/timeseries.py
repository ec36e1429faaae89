"""Reader for sktime/aeon ``.ts`` time-series classification files."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..exceptions import DataError
from ._base import Dataset
from ._labels import encode_labels
from ._text import read_text

__all__ = ["load_ts"]

logger = logging.getLogger(__name__)

MISSING = frozenset({"?", "NaN", "nan", ""})


@dataclass
class _TsHeader:
    problem_name: str = ""
    dimensions: int | None = None
    equal_length: bool | None = None
    series_length: int | None = None
    class_labels: list[str] = field(default_factory=list)
    data_line: int = 0


def load_ts(path) -> Dataset:
    """Read a ``.ts`` file (UCR/UEA archive as shipped by sktime and aeon).

    Parameters
    ----------
    path : str or path-like
        The ``.ts`` file: ``#`` comments, ``@`` header lines (``@problemName``,
        ``@univariate``, ``@dimensions``, ``@equalLength``, ``@seriesLength``,
        ``@classLabel true a b c``), then ``@data`` and one case per line with
        channels separated by ``:``, values by ``,`` and the class label last.

    Returns
    -------
    Dataset
        ``X`` has shape ``(n_cases, n_channels, length)``, float64. Series
        shorter than the longest one in the file are right-padded with NaN
        (as are ``?`` values), so unequal-length data keeps one array.
        ``feature_names`` names the channels (``dim_0``, ...). Classes are
        numbered 0..k-1 in the order of the ``@classLabel`` declaration, even
        for two classes: time-series labels carry no positive/negative
        meaning, and the declared order is what other tools use.

    Raises
    ------
    DataError
        Missing file, timestamps or regression targets (not supported), no
        class labels, or a malformed case (the message names the line).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp()) / "toy.ts"
    >>> _ = tmp.write_text(
    ...     "# toy\\n@problemName toy\\n@univariate false\\n@dimensions 2\\n"
    ...     "@equalLength false\\n@classLabel true up down\\n@data\\n"
    ...     "1,2,3:4,5,6:up\\n7,8:9,10:down\\n"
    ... )
    >>> ds = load_ts(tmp)
    >>> ds.X.shape, ds.y.tolist(), ds.class_map
    ((2, 2, 3), [0, 1], {'up': 0, 'down': 1})
    >>> ds.X[1, 0].tolist()
    [7.0, 8.0, nan]
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    lines = read_text(path).splitlines()
    header = _parse_header(lines, path)
    cases, labels = _parse_cases(lines, header, path)
    X = _pad(cases, header, path)
    y, class_map = encode_labels(
        labels, source=str(path), declared=header.class_labels, binary_minority=False
    )
    return Dataset(
        X=X,
        y=y,
        feature_names=[f"dim_{c}" for c in range(X.shape[1])],
        class_map=class_map,
        name=path.stem,
        source=str(path),
    )


def _parse_header(lines: list[str], path: Path) -> _TsHeader:
    header = _TsHeader()
    has_labels = False
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith("@"):
            raise DataError(f"{path}, line {number}: data before the @data line")
        key, _, rest = line.replace("\t", " ").partition(" ")
        key, words = key.lower(), rest.split()
        if key == "@data":
            header.data_line = number
            break
        if key == "@timestamps" and _flag(words, line, number, path):
            raise DataError(f"{path}, line {number}: @timeStamps true is not supported")
        if key == "@targetlabel" and _flag(words, line, number, path):
            raise DataError(
                f"{path}, line {number}: regression targets (@targetLabel) are not supported"
            )
        if key == "@problemname":
            header.problem_name = rest.strip()
        elif key == "@univariate" and _flag(words, line, number, path):
            header.dimensions = 1
        elif key == "@dimensions":
            header.dimensions = _count(words, line, number, path)
        elif key == "@equallength":
            header.equal_length = _flag(words, line, number, path)
        elif key == "@serieslength":
            header.series_length = _count(words, line, number, path)
        elif key == "@classlabel":
            has_labels = _flag(words, line, number, path)
            header.class_labels = words[1:]
        # Other keys (@missing, ...) carry nothing the reader needs.
    if not header.data_line:
        raise DataError(f"{path}: no @data line after the header")
    if not has_labels or not header.class_labels:
        raise DataError(f"{path}: no '@classLabel true ...' line; unlabelled data is not supported")
    return header


def _flag(words: list[str], line: str, number: int, path: Path) -> bool:
    if not words or words[0].lower() not in ("true", "false"):
        raise DataError(f"{path}, line {number}: expected true or false in {line!r}")
    return words[0].lower() == "true"


def _count(words: list[str], line: str, number: int, path: Path) -> int:
    if not words or not words[0].isdigit() or int(words[0]) < 1:
        raise DataError(f"{path}, line {number}: expected a positive integer in {line!r}")
    return int(words[0])


def _parse_cases(lines, header: _TsHeader, path: Path):
    cases: list[list[np.ndarray]] = []
    labels: list[str] = []
    declared = set(header.class_labels)
    n_channels = header.dimensions
    for number in range(header.data_line + 1, len(lines) + 1):
        line = lines[number - 1].strip()
        if not line or line.startswith("#"):
            continue
        *channels, label = line.split(":")
        label = label.strip()
        if not channels:
            raise DataError(f"{path}, line {number}: expected 'values:...:label', got no ':'")
        if n_channels is None:
            n_channels = len(channels)  # older files omit @dimensions
        if len(channels) != n_channels:
            raise DataError(
                f"{path}, line {number}: expected {n_channels} channel(s), got {len(channels)}"
            )
        if label not in declared:
            raise DataError(
                f"{path}, line {number}: class label {label!r} is not one of the declared "
                f"{header.class_labels}"
            )
        cases.append([_series(text, number, c, path) for c, text in enumerate(channels)])
        labels.append(label)
    if not cases:
        raise DataError(f"{path}: no cases after @data (line {header.data_line})")
    return cases, labels


def _series(text: str, number: int, channel: int, path: Path) -> np.ndarray:
    values = text.split(",")
    try:
        return np.array([np.nan if v.strip() in MISSING else float(v) for v in values])
    except ValueError:
        bad = next(v for v in values if v.strip() not in MISSING and not _is_number(v))
        raise DataError(
            f"{path}, line {number}, channel {channel}: {bad.strip()!r} is not a number"
        ) from None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _pad(cases, header: _TsHeader, path: Path) -> np.ndarray:
    lengths = {len(s) for case in cases for s in case}
    length = max(lengths)
    if header.equal_length and len(lengths) > 1:
        raise DataError(
            f"{path}: @equalLength true but series lengths range from {min(lengths)} to {length}"
        )
    if header.equal_length and header.series_length and length != header.series_length:
        raise DataError(
            f"{path}: @seriesLength {header.series_length} but the series have length {length}"
        )
    if len(lengths) > 1:
        logger.debug("%s: series lengths %d..%d, right-padded with NaN", path, min(lengths), length)
    X = np.full((len(cases), len(cases[0]), length), np.nan, dtype=np.float64)
    for i, case in enumerate(cases):
        for c, series in enumerate(case):
            X[i, c, : len(series)] = series
    return X
