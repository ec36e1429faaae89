"""Reader for KEEL ``.dat`` files (the format of the KEEL imbalanced repository)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..exceptions import DataError
from ._base import Dataset
from ._labels import encode_labels
from ._text import read_text

__all__ = ["read_keel"]

MISSING = frozenset({"?", "<null>"})

# Name: quoted, or everything up to whitespace or an opening brace
# (``@attribute Class{positive,negative}`` occurs in the wild).
_ATTRIBUTE = re.compile(
    r"""^@attribute\s+('(?P<sq>[^']*)'|"(?P<dq>[^"]*)"|(?P<bare>[^\s{]+))\s*(?P<spec>.*)$""",
    re.IGNORECASE,
)
_NUMERIC = re.compile(
    r"^(?P<kind>real|integer|numeric)\s*(\[\s*[^,\]]+\s*,\s*[^,\]]+\s*\])?$", re.IGNORECASE
)


@dataclass
class _Attribute:
    name: str
    line: int
    categories: list[str] | None = None  # None for numeric attributes

    @property
    def nominal(self) -> bool:
        return self.categories is not None


@dataclass
class _Header:
    attributes: list[_Attribute] = field(default_factory=list)
    inputs: list[str] | None = None
    outputs: list[str] | None = None
    inputs_line: int = 0
    outputs_line: int = 0
    data_line: int = 0  # line number of ``@data``; 0 when absent


def read_keel(path) -> Dataset:
    """Read a KEEL ``.dat`` file (:func:`dimbsvm.datasets.load_keel` also finds bundled data by name).

    Nominal input attributes are one-hot encoded in declared category order
    (columns named ``"Sex=M"``); a missing nominal value gives an all-zero
    block. Missing numeric values (``?`` or ``<null>``) are kept as NaN. Class
    labels follow :func:`~dimbsvm.datasets._labels.encode_labels`:
    ``positive`` -> 1 (with a logged warning when it is not the minority),
    other binary labels minority -> 1, more classes in declared order.

    Parameters
    ----------
    path : str or path-like
        A ``.dat`` file.

    Returns
    -------
    Dataset

    Raises
    ------
    DataError
        Missing file, malformed header or rows (the message names the file and line).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        lines = read_text(path).splitlines()
    except OSError as exc:
        raise DataError(f"{path}: cannot read file: {exc}") from exc
    header = _parse_header(lines, path)
    inputs, output = _select_columns(header, path)
    rows = _split_rows(lines, header, path)
    X, feature_names = _encode_inputs(rows, header.attributes, inputs, path)
    labels = _class_labels(rows, header.attributes, output, path)
    y, class_map = encode_labels(labels, source=str(path), declared=output.categories)
    return Dataset(
        X=X,
        y=y,
        feature_names=feature_names,
        nominal_columns=[a.name for a in inputs if a.nominal],
        class_map=class_map,
        name=path.stem,
        source=str(path),
    )


def _parse_header(lines: list[str], path: Path) -> _Header:
    header = _Header()
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        keyword = line.split(None, 1)[0].lower()
        if keyword == "@data":
            header.data_line = number
            break
        if keyword == "@relation":
            continue
        if keyword.startswith("@attribute"):
            header.attributes.append(_parse_attribute(line, number, path))
        elif keyword in ("@inputs", "@input"):
            header.inputs, header.inputs_line = _name_list(line), number
        elif keyword in ("@outputs", "@output"):
            header.outputs, header.outputs_line = _name_list(line), number
        else:
            raise DataError(
                f"{path}, line {number}: expected a header line (@relation, @attribute, "
                f"@inputs, @outputs) or @data, got {line[:80]!r}"
            )
    if not header.attributes:
        raise DataError(f"{path}: no @attribute lines; is this a KEEL .dat file?")
    if not header.data_line:
        raise DataError(f"{path}: no @data line after the header")
    seen: set[str] = set()
    for attribute in header.attributes:
        if attribute.name in seen:
            raise DataError(
                f"{path}, line {attribute.line}: attribute {attribute.name!r} declared twice"
            )
        seen.add(attribute.name)
    return header


def _parse_attribute(line: str, number: int, path: Path) -> _Attribute:
    match = _ATTRIBUTE.match(line)
    spec = match.group("spec").strip() if match else ""
    if match and spec.startswith("{") and spec.endswith("}"):
        categories = [_unquote(c) for c in spec[1:-1].split(",")]
        if any(c == "" for c in categories):
            raise DataError(f"{path}, line {number}: empty category in {line!r}")
        name = match.group("sq") or match.group("dq") or match.group("bare")
        return _Attribute(name=name, line=number, categories=categories)
    if match and _NUMERIC.match(spec):
        name = match.group("sq") or match.group("dq") or match.group("bare")
        return _Attribute(name=name, line=number)
    raise DataError(
        f"{path}, line {number}: cannot parse attribute declaration {line!r}; expected "
        "'@attribute NAME real [lo, hi]', 'integer [lo, hi]' or '{a, b, c}'"
    )


def _name_list(line: str) -> list[str]:
    parts = line.split(None, 1)
    rest = parts[1] if len(parts) > 1 else ""
    return [_unquote(name) for name in rest.split(",") if name.strip()]


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _select_columns(header: _Header, path: Path) -> tuple[list[_Attribute], _Attribute]:
    by_name = {a.name: a for a in header.attributes}
    if header.outputs is not None:
        if len(header.outputs) != 1:
            raise DataError(
                f"{path}, line {header.outputs_line}: exactly one @outputs attribute is "
                f"supported, got {header.outputs}"
            )
        if header.outputs[0] not in by_name:
            raise DataError(
                f"{path}, line {header.outputs_line}: @outputs names unknown attribute "
                f"{header.outputs[0]!r}; declared attributes are {list(by_name)}"
            )
        output = by_name[header.outputs[0]]
    else:
        output = header.attributes[-1]
    if header.inputs is not None:
        unknown = [n for n in header.inputs if n not in by_name]
        if unknown:
            raise DataError(
                f"{path}, line {header.inputs_line}: @inputs names unknown attribute(s) "
                f"{unknown}; declared attributes are {list(by_name)}"
            )
        if output.name in header.inputs:
            raise DataError(
                f"{path}, line {header.inputs_line}: the class attribute {output.name!r} "
                "is also listed in @inputs"
            )
        wanted = set(header.inputs)
        # Columns keep the order of the @attribute declarations, as in the rows.
        inputs = [a for a in header.attributes if a.name in wanted]
    else:
        inputs = [a for a in header.attributes if a is not output]
    return inputs, output


def _split_rows(lines: list[str], header: _Header, path: Path) -> list[tuple[int, list[str]]]:
    expected = len(header.attributes)
    rows = []
    for number in range(header.data_line + 1, len(lines) + 1):
        line = lines[number - 1].strip()
        if not line or line.startswith("%"):
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != expected:
            raise DataError(
                f"{path}, line {number}: expected {expected} comma-separated values "
                f"(one per @attribute), got {len(values)}"
            )
        rows.append((number, values))
    if not rows:
        raise DataError(f"{path}: no data rows after @data (line {header.data_line})")
    return rows


def _encode_inputs(rows, attributes, inputs, path) -> tuple[np.ndarray, list[str]]:
    position = {a.name: i for i, a in enumerate(attributes)}
    blocks, names = [], []
    for attribute in inputs:
        column = [(number, values[position[attribute.name]]) for number, values in rows]
        if attribute.nominal:
            blocks.append(_one_hot(column, attribute, path))
            names.extend(f"{attribute.name}={c}" for c in attribute.categories)
        else:
            blocks.append(_numeric(column, attribute, path)[:, None])
            names.append(attribute.name)
    if blocks:
        X = np.hstack(blocks).astype(np.float64, copy=False)
    else:
        X = np.empty((len(rows), 0), dtype=np.float64)
    return X, names


def _numeric(column, attribute: _Attribute, path: Path) -> np.ndarray:
    out = np.empty(len(column), dtype=np.float64)
    for i, (number, text) in enumerate(column):
        if text in MISSING:
            out[i] = np.nan
            continue
        try:
            out[i] = float(text)
        except ValueError:
            raise DataError(
                f"{path}, line {number}: column {attribute.name!r} is numeric but has "
                f"value {text!r}"
            ) from None
    return out


def _one_hot(column, attribute: _Attribute, path: Path) -> np.ndarray:
    index = {c: j for j, c in enumerate(attribute.categories)}
    out = np.zeros((len(column), len(index)), dtype=np.float64)
    for i, (number, text) in enumerate(column):
        if text in MISSING:
            continue  # all-zero block: "none of the categories"
        j = index.get(_unquote(text))
        if j is None:
            raise DataError(
                f"{path}, line {number}: column {attribute.name!r} has value {text!r}, "
                f"not one of the declared {attribute.categories}"
            )
        out[i, j] = 1.0
    return out


def _class_labels(rows, attributes, output: _Attribute, path: Path) -> list[str]:
    position = attributes.index(output)
    labels = []
    for number, values in rows:
        text = _unquote(values[position])
        if text in MISSING:
            raise DataError(f"{path}, line {number}: missing class label ({output.name!r})")
        if output.nominal and text not in output.categories:
            raise DataError(
                f"{path}, line {number}: class column {output.name!r} has value {text!r}, "
                f"not one of the declared {output.categories}"
            )
        labels.append(text)
    return labels
