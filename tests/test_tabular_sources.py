"""Tabular sources read by the workers (issue 32): Parquet, CSV (plain and compressed), DataFrames and s3:// URLs.

Every result is checked against the same data read with pandas directly and
encoded by hand, and streamed CSV against the in-memory CSV reader.
"""

from __future__ import annotations

import gzip
import logging
import tracemalloc

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from dimbsvm.datasets import load_csv, shared_datasets_dir
from dimbsvm.datasets._labels import encode_labels, label_key
from dimbsvm.exceptions import DataError, DimbsvmError
from dimbsvm.store import fingerprint_file, ingest, open_store
from dimbsvm.store.sources._csv_blocks import parse_block
from dimbsvm.store.sources._frames import CSV_GUESS_ROWS
from dimbsvm.store.sources import (TabularSource, class_map_from_counts, is_tabular_source, open_ids,
                                   resolve_tabular_source)


def _frame(n=240, seed=0):
    """Numbers (with NaN), an integer column, a text category with gaps, an integer code, a binary label."""
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], n).astype(object)
    colour[rng.random(n) < 0.1] = None
    return pd.DataFrame({
        "uid": np.arange(1000, 1000 + n),
        "size": np.where(rng.random(n) < 0.05, np.nan, rng.normal(size=n).round(4)),
        "count": rng.integers(0, 50, n),
        "colour": colour,
        "code": rng.choice([3, 7, 11], n),
        "note": [f"free text {i}" for i in range(n)],
        "class": np.where(rng.random(n) < 0.2, "yes", "no"),
    })


def _by_hand(df, *, target="class", drop=(), nominal=(), id=None):
    """The expected X, y, feature names and class map, from a pandas DataFrame, without dimbsvm's reader."""
    blocks, names = [], []
    for column in df.columns:
        if column in (target, id, *drop):
            continue
        values = df[column]
        if column in nominal or values.dtype == object or isinstance(values.dtype, pd.StringDtype):
            text = np.array([None if pd.isna(v) else str(v).strip() for v in values], dtype=object)
            categories = sorted({v for v in text if v not in (None, "", "?", "<null>")})
            blocks.append(np.stack([(text == c).astype(float) for c in categories], axis=1))
            names += [f"{column}={c}" for c in categories]
        else:
            blocks.append(values.to_numpy(dtype=float)[:, None])
            names.append(column)
    labels = [label_key(v) for v in df[target]]
    counts = pd.Series(labels).value_counts()
    classes = sorted(counts.index, key=lambda c: (float(c) if c.lstrip("-").isdigit() else c))
    if len(classes) == 2:  # the minority is 1
        minority = min(classes, key=lambda c: (counts[c], -classes.index(c)))
        class_map = {c: int(c == minority) for c in classes}
    else:
        class_map = {c: i for i, c in enumerate(classes)}
    return np.hstack(blocks), np.array([class_map[v] for v in labels]), names, class_map


def _check(result, expected):
    X, y, _, meta = result
    X_exp, y_exp, names, class_map = expected
    X, y = dask.compute(X, y)
    np.testing.assert_array_equal(X, X_exp)
    np.testing.assert_array_equal(y, y_exp)
    assert meta["feature_names"] == names
    assert meta["class_map"] == class_map
    assert meta["n_samples"] == len(y_exp) and meta["shape"] == list(X_exp.shape)
    assert meta["class_counts"] == {str(k): int(c) for k, c in zip(*np.unique(y_exp, return_counts=True))}


# --- Parquet and CSV against pandas, encoded by hand ---------------------------------------------------------


def test_parquet_file_directory_and_glob_match_pandas(tmp_path):
    df = _frame()
    df.to_parquet(tmp_path / "one.parquet")
    folder = tmp_path / "parts"
    folder.mkdir()
    for k, start in enumerate(range(0, len(df), 80)):
        df.iloc[start:start + 80].to_parquet(folder / f"part-{k}.parquet")
    expected = _by_hand(pd.read_parquet(tmp_path / "one.parquet"), drop=["note"], nominal=["code"], id="uid")
    for source in (tmp_path / "one.parquet", folder, str(folder / "part-*.parquet"), f"file://{folder}"):
        result = resolve_tabular_source(source, id="uid", drop=["note"], nominal=["code"])
        _check(result, expected)
        np.testing.assert_array_equal(result[2].compute(), df["uid"].to_numpy())
        meta = result[3]
        assert meta["categories"] == {"colour": ["blue", "green", "red"], "code": ["11", "3", "7"]}
        assert meta["nominal_columns"] == ["colour", "code"] and meta["target_guessed"]
        assert meta["id_column"] == "uid" and meta["id_dtype"] == "int64" and meta["dropped"] == ["note"]
    assert resolve_tabular_source(folder, id="uid", drop=["note"])[0].numblocks[0] == 3  # one chunk per file


@pytest.mark.parametrize("suffix, opener", [(".csv", open), (".csv.gz", gzip.open)])
def test_csv_and_compressed_csv_match_pandas(tmp_path, suffix, opener):
    df = _frame().drop(columns="note")
    path = tmp_path / f"rows{suffix}"
    with opener(path, "wt", newline="") as handle:
        df.to_csv(handle, index=False)
    expected = _by_hand(pd.read_csv(path, keep_default_na=False, na_values=[""]), nominal=["code"], id="uid")
    result = resolve_tabular_source(path, id="uid", nominal=["code"], blocksize=2_000)
    _check(result, expected)
    blocks = result[0].numblocks[0]
    assert blocks == 1 if suffix == ".csv.gz" else blocks > 1  # a compressed file cannot be split into blocks
    assert result[2].compute().tolist() == [str(i) for i in df["uid"]]  # CSV ids are text
    assert result[3]["name"] == "rows" and result[3]["format"] == "csv"


def test_float32_parquet_is_stored_as_float32_and_anything_wider_as_float64(tmp_path):
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"a": rng.normal(size=300).astype(np.float32), "b": rng.integers(-9, 9, 300).astype(np.int16),
                       "colour": rng.choice(["red", "blue"], 300), "class": rng.choice(["x", "y"], 300)})
    cases = {"float32 and int16": (df, np.float32),
             "a float64 column": (df.assign(b=df["b"].astype(np.float64)), np.float64),
             "an int32 column": (df.assign(b=df["b"].astype(np.int32)), np.float64),
             "no float column": (df.drop(columns="a"), np.float64),
             "a text column of numbers": (df.assign(b=df["b"].astype(str)), np.float64)}
    for case, (frame, dtype) in cases.items():
        path = tmp_path / f"{case}.parquet"
        frame.to_parquet(path)
        X, _, _, _ = resolve_tabular_source(path)
        expected, _, _, _ = _by_hand(frame.assign(b=pd.to_numeric(frame["b"])))  # the values, whatever the dtype
        assert X.dtype == dtype, case
        assert np.array_equal(X.compute().astype(np.float64), expected), case
        stored = ingest(path, tmp_path / f"{case}.zarr")
        assert stored.X.dtype == dtype and stored.meta["dtype"] == np.dtype(dtype).name, case
        assert np.array_equal(stored.X.compute().astype(np.float64), expected), case


def test_dataframes_pandas_and_dask(tmp_path):
    df = _frame().drop(columns="note")
    expected = _by_hand(df, nominal=["code"], id="uid")
    _check(resolve_tabular_source(df, id="uid", nominal=["code"], blocksize=4_000), expected)
    shuffled = df.sample(frac=1, random_state=0)  # rows keep their order, whatever the index says
    _check(resolve_tabular_source(dd.from_pandas(shuffled, npartitions=3, sort=False), id="uid", nominal=["code"]),
           _by_hand(shuffled, nominal=["code"], id="uid"))
    assert resolve_tabular_source(df, id="uid")[3]["format"] == "dataframe"


# --- streamed CSV == the in-memory CSV reader ---------------------------------------------------------------

CSV_CASES = {
    "missing markers and a nominal text column": "a,colour,class\n1,red,x\n?,blue,y\n,red,x\n<null>,,x\n",
    "numeric labels sort as numbers": "x0,label_col,class\n1,a,10\n2,b,9\n3,a,10\n4,c,2\n",
    "whitespace, quotes, blank lines": "x0 , note,class\n 1.5 ,\"a, b\",pos\n\n,,\n2.25,c , neg\n3,\"a, b\",neg\n",
    "positive is the majority (KEEL names)": "x0,class\n1,positive\n2,positive\n3,negative\n",
    "a byte-order mark": "\ufeffx0,x1,class\n1e3,-0.1,a\n2.5e-3,inf,b\n1_000,nan,b\n",
    "many rows": "a,b,c,class\n" + "".join(f"{i * 0.37:.6f},{i % 7},{'lmh'[i % 3]},{'pn'[i % 5 == 0]}\n"
                                                for i in range(3000)),
    # Past the rows the CSV reader guesses its number columns from (CSV_GUESS_ROWS): cells that Arrow's CSV
    # parser reads otherwise than Python's float (or not at all) send their block the text way.
    "cells only Python's float reads, after the guessed rows": "a,b,class\n" + "".join(
        f"{i * 0.37:.6f},{i % 7},{'pn'[i % 5 == 0]}\n" for i in range(CSV_GUESS_ROWS + 200)) + "".join(
        f"{cell},{i},{'pn'[i % 2]}\n" for i, cell in enumerate(
            [" 2.5 ", "1_000", "nan", "-nan", "NaN", "inf", "-Infinity", "-0", "?", "", "<null>", "1e400", "4.9e-325",
             "9007199254740993", "+7", ".5", "5.", "\t3"])),
    "a column empty in the guessed rows, words after": "a,b,class\n" + "".join(
        f"{i},,{'pn'[i % 5 == 0]}\n" for i in range(CSV_GUESS_ROWS + 200)) + "".join(
        f"{i},{'xyz'[i % 3]},{'pn'[i % 2]}\n" for i in range(300)),
    # A blank row is blank in every column, also in those a scan presuming numbers leaves unread.
    "blank rows after the guessed rows": "a,b,class\n" + "".join(
        f"{i * 0.5},{i % 3},{'pn'[i % 5 == 0]}\n" + (",,\n" if i > CSV_GUESS_ROWS and i % 97 == 0 else "")
        for i in range(CSV_GUESS_ROWS + 600)),
}


@pytest.mark.parametrize("case", sorted(CSV_CASES))
@pytest.mark.parametrize("blocksize", [None, 4_000])
@pytest.mark.parametrize("presume_numbers", [False, True])
def test_streamed_csv_matches_the_in_memory_reader(tmp_path, case, blocksize, presume_numbers):
    path = tmp_path / "case.csv"
    path.write_text(CSV_CASES[case], encoding="utf-8")
    old = load_csv(path)
    X, y, _, meta = resolve_tabular_source(path, blocksize=blocksize, presume_numbers=presume_numbers)
    X, y = dask.compute(X, y)
    assert X.tobytes() == old.X.tobytes()  # the same floats, bit for bit (NaN included)
    np.testing.assert_array_equal(y, old.y)
    assert (meta["feature_names"], meta["class_map"], meta["nominal_columns"]) == (
        old.feature_names, old.class_map, old.nominal_columns)
    assert meta["class_counts"] == old.meta()["class_counts"]


def test_streamed_csv_matches_the_in_memory_reader_on_the_shared_csv_files():
    shared = shared_datasets_dir()
    if shared is None:
        pytest.skip("../shared/datasets not found: set DIMBSVM_SHARED_DATASETS to run")
    paths = sorted((shared / "keel" / "multiclass").glob("*.csv"))
    assert paths
    for path in paths:
        old = load_csv(path)
        X, y, _, meta = resolve_tabular_source(path, blocksize=64_000)
        X, y = dask.compute(X, y)
        assert X.tobytes() == old.X.tobytes() and np.array_equal(y, old.y), path.name
        assert (meta["feature_names"], meta["class_map"]) == (old.feature_names, old.class_map), path.name


@pytest.mark.parametrize("cell", ["1.5", "-0", " 2.5 ", "1_000", "\u0661\u0662", "nan", "-nan", "nan(7)", "inf",
                                  "-Infinity", "1e400", "4.9e-325", "9007199254740993", "?", '"?"', "", "<null>",
                                  "abc", "0x10", '"1,5"', "+.5", "1e", "--1"])
def test_a_csv_block_parses_a_number_column_as_pythons_float_or_else_as_text(cell):
    """The independent truth: Python's float of the cell, as the in-memory CSV reader reads it."""
    frame = parse_block(f"n,t\n{cell},x\n1,y\n".encode(), ("n", "t"), True, ("n", "t"), ("n",))
    text = cell[1:-1] if cell.startswith('"') else cell
    assert str(frame["t"].dtype) == "string" and frame["t"].tolist() == ["x", "y"]
    if cell in ("1.5", "-0", "9007199254740993", "?", "", "<null>", "+.5", "1e400"):
        assert frame["n"].dtype == np.float64  # the usual cells take the fast way
    if frame["n"].dtype == np.float64:  # read as a number: Python's float of it, bit for bit; NaN if missing
        try:
            expected = np.nan if text.strip() in ("", "?", "<null>") else float(text)
        except ValueError:
            pytest.fail(f"{cell!r} read as the number {frame['n'][0]!r}; Python's float refuses it")
        assert np.float64(expected).tobytes() == frame["n"].to_numpy()[:1].tobytes()
        assert not np.isnan(expected) or text.strip() in ("", "?", "<null>")  # a NaN's text goes the text way
    else:  # read as text, as written, for the cells module to judge
        assert frame["n"].tolist() == [text, "1"]


def test_a_local_csv_read_with_the_defaults_keeps_its_store_fingerprint(tmp_path):
    """A store written by the in-memory reader is recognised: the fingerprint is still the file's SHA-256."""
    path = tmp_path / "d.csv"
    path.write_text("x0,colour,class\n1,red,a\n2,blue,b\n3,red,b\n")
    assert resolve_tabular_source(path)[3]["fingerprint"] == fingerprint_file(path)
    assert resolve_tabular_source(path, target="class")[3]["fingerprint"] == fingerprint_file(path)
    chosen = {resolve_tabular_source(path, **kw)[3]["fingerprint"]
              for kw in ({"drop": ["colour"]}, {"nominal": ["x0"]}, {"target": "colour"})}
    assert len(chosen) == 3 and fingerprint_file(path) not in chosen
    first = ingest(path, tmp_path / "s.zarr")
    assert ingest(path, tmp_path / "s.zarr").meta == first.meta  # reused, not rewritten
    assert first.to_dataset().X.tolist() == load_csv(path).X.tolist()


# --- columns ----------------------------------------------------------------------------------------------


def test_target_first_and_an_id_of_text(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("outcome,name,x0,x1\nbad,ann,1,2\ngood,bob,3,4\ngood,cy,5,6\n")
    X, y, ids, meta = resolve_tabular_source(path, target="outcome", id="name")
    assert meta["feature_names"] == ["x0", "x1"] and not meta["target_guessed"]
    assert X.compute().tolist() == [[1, 2], [3, 4], [5, 6]] and y.compute().tolist() == [1, 0, 0]
    assert ids.dtype == object and ids.compute().tolist() == ["ann", "bob", "cy"] and meta["id_dtype"] == "str"


def test_the_label_is_found_by_name_and_the_summary_says_so(tmp_path, caplog):
    path = tmp_path / "t.csv"
    path.write_text("x0,Label\n1,a\n2,b\n3,b\n")
    with caplog.at_level(logging.INFO, logger="dimbsvm.store"):
        meta = resolve_tabular_source(path)[3]
    assert meta["target"] == "Label" and meta["target_guessed"]
    assert "label column 'Label' found by its name" in caplog.text


@pytest.mark.parametrize("text, kwargs, match", [
    ("x0,x1\n1,2\n", {}, r"t\.csv: no label column: none is named class, label or target; choose one of "
                         r"\['x0', 'x1'\] with --target COLUMN"),
    ("x0,class,Target\n1,a,b\n", {}, r"several columns could be the label \('class', 'Target'\)"),
    ("x0,class\n1,a\n", {"drop": ["x9", "x0"], "nominal": "zz", "id": "uid"},
     r"no column 'uid' \(id\), 'x9' \(drop\), 'zz' \(nominal\); the columns are \['x0', 'class'\]$"),
    ("x0,x1,class\n1,2,a\n", {"id": "x0", "drop": ["x0"]}, r"column 'x0' cannot be both the id and dropped"),
    ("x0,x1,class\n1,2,a\n", {"nominal": ["class"]}, r"column 'class' is the label, so it cannot be a nominal"),
    ("x0,class\n1,a\n", {"drop": "x0"}, r"no feature column is left"),
    ("x0,class\n", {}, r"t\.csv: no data rows"),
    ("", {}, r"t\.csv: empty file \(no header row\)"),
    ("x0,x0,class\n1,2,a\n", {}, r"t\.csv, line 1: duplicate column names \['x0'\]"),
    ("x0,class\n1,a\n2\n", {}, r"t\.csv: cannot read it: .*Expected 2 columns, got 1"),
    ("x0,class\n1,a\n2,?\n3,\n", {}, r"missing label in column 'class' \(row 2, row 3\)"),
    ("x0,class\n1,a\n2,b\n3,c\n", {"id": "x0", "target": "class", "max_categories": 0},
     r"max_categories must be an integer >= 1"),
])
def test_one_line_refusals(tmp_path, text, kwargs, match):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=match) as caught:
        resolve_tabular_source(path, **kwargs)
    assert "\n" not in str(caught.value)


def test_a_stray_word_in_a_numeric_column_names_its_cell(tmp_path):
    rows = "".join(f"{i},{'abc' if i == 4321 else i * 0.5},{i % 2}\n" for i in range(6000))
    path = tmp_path / "typo.csv"
    path.write_text("a,b,class\n" + rows)
    with pytest.raises(DataError, match=r"typo\.csv: column 'b' holds numbers except in 1 cell\(s\) "
                                        r"\(row 4322: 'abc'\); fix those cells .* \(--nominal b, nominal=\['b'\]"):
        resolve_tabular_source(path, blocksize=10_000)  # the word is in a later partition: rows count from 1
    with pytest.raises(DataError, match=r"nominal column 'b' has at least \d{3,} distinct values"):
        resolve_tabular_source(path, nominal=["b"], blocksize=10_000)
    parquet = tmp_path / "typo.parquet"
    pd.read_csv(path, dtype=str).to_parquet(parquet)  # text in a Parquet file is judged by its values too
    with pytest.raises(DataError, match=r"column 'b' holds numbers except in 1 cell\(s\) \(row 4322: 'abc'\)"):
        resolve_tabular_source(parquet)


@pytest.mark.parametrize("cells", [
    ["1.5", "-0", "1e400", "1e-400", "inf", "-Infinity", "nan", "+.5", "0.1", "?", ""],
    ["1_000", "2"],           # Python's float takes underscores, Arrow's cast does not
    ["\u0661\u0662", "3"],     # nor non-ASCII digits
    ["nan(7)", "1"],          # Arrow takes a NaN payload that Python's float refuses: a word
    ["abc", "1"],
])
def test_numbers_of_text_cells_are_pythons_float_bit_for_bit(cells):
    # the independent truth: Python's float on each present cell, as the in-memory CSV reader reads them
    from dimbsvm.store.sources._cells import missing_mask, numbers_or_none, stripped_text
    text = stripped_text(pd.Series(cells, dtype="string"))
    missing = missing_mask(text)
    try:
        expected = np.array([np.nan if m else float(c) for c, m in zip(cells, missing)])
    except ValueError:
        expected = None
    values = numbers_or_none(text, missing)
    if expected is None:
        assert values is None
    else:
        np.testing.assert_array_equal(values.view(np.int64)[~np.isnan(expected)],
                                      expected.view(np.int64)[~np.isnan(expected)])
        np.testing.assert_array_equal(np.isnan(values), np.isnan(expected))


def test_a_partition_of_another_length_than_the_scan_counted_is_refused():
    from dimbsvm.store.sources._encode import EncodePlan, encode_partition
    plan = EncodePlan(source="s.parquet", columns=(("a", "number", ()),), target="class",
                      class_map={"x": 0, "y": 1}, id=None, id_dtype=None)
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "class": ["x", "y", "x"]})
    assert encode_partition(frame, plan, 11, 3)[1].tolist() == [0, 1, 0]
    with pytest.raises(DataError, match=r"s\.parquet: the rows from row 11 on: 3 rows where the scan of the source "
                                        r"counted 4; the source changed while it was read"):
        encode_partition(frame, plan, 11, 4)


def test_the_scan_of_parquet_reads_only_the_columns_it_looks_at(tmp_path, monkeypatch):
    # numeric Parquet columns need no scan; the arrays are the same as from a source scanned in full
    from dimbsvm.store.sources import resolve as resolve_module
    df = _frame()
    df.to_parquet(tmp_path / "one.parquet", row_group_size=40)
    read = []
    original = resolve_module.scan_partition

    def recording(frame, plan, part):
        read.append(list(frame.columns))
        return original(frame, plan, part)

    monkeypatch.setattr(resolve_module, "scan_partition", recording)
    import pyarrow.parquet as pq

    footer = pq.read_metadata(tmp_path / "one.parquet")
    one_group = max(footer.row_group(i).total_byte_size for i in range(footer.num_row_groups))
    with dask.config.set(scheduler="sync"):  # in this process, where the recording is (not a module's client)
        # a block of one row group's bytes: the six row groups are the six partitions
        narrow = resolve_tabular_source(tmp_path / "one.parquet", id="uid", drop=["note"], blocksize=one_group)
    assert len(read) == narrow[0].numblocks[0] == 6 and all("size" not in columns for columns in read)
    _check(narrow, _by_hand(df, drop=["note"], id="uid"))


@pytest.mark.parametrize("n_slices", [2, 5, 7])
def test_a_parquet_row_group_larger_than_the_block_is_read_in_slices(tmp_path, n_slices):
    # one row group of every row: a block of a fraction of its bytes cuts it into that many slices of rows,
    # which give the arrays pandas' read of the whole file gives
    import pyarrow.parquet as pq

    df = _frame()
    df.to_parquet(tmp_path / "one.parquet", row_group_size=len(df))
    size = pq.read_metadata(tmp_path / "one.parquet").row_group(0).total_byte_size
    sliced = resolve_tabular_source(tmp_path / "one.parquet", id="uid", drop=["note"],
                                    blocksize=int(np.ceil(size / n_slices)))
    assert sliced[0].numblocks[0] == n_slices
    assert max(sliced[0].chunks[0]) - min(sliced[0].chunks[0]) <= 1  # equal slices
    _check(sliced, _by_hand(pd.read_parquet(tmp_path / "one.parquet"), drop=["note"], id="uid"))


def _guessed_rows_then(row_after: str, *, rows_after=3000) -> str:
    """A CSV whose columns hold numbers in the rows the number columns are guessed from, ``row_after`` well after."""
    rows = [f"{i * 0.5},{i % 7},{'pn'[i % 5 == 0]}" for i in range(CSV_GUESS_ROWS + rows_after)]
    rows.insert(CSV_GUESS_ROWS + 2000, row_after)
    return "a,b,class\n" + "\n".join(rows) + "\n"


@pytest.mark.parametrize("row_after, match", [
    ("1.5,abc,p", r"column 'b' holds numbers except in 1 cell\(s\) \(row 3001: 'abc'\)"),
    ('1.5,"2,5",p', r"column 'b' holds numbers written with a decimal comma.*\(row 3001: '2,5', 1 such cell"),
    ("1.5,,", r"missing label in column 'class' \(row 3001\)"),
])
def test_ingest_refuses_cells_past_the_guessed_rows_as_a_whole_scan_does(tmp_path, row_after, match):
    """ingest's scan leaves the columns of numbers unread (presume_numbers); its refusals are the whole scan's."""
    path = tmp_path / "late.csv"
    path.write_text(_guessed_rows_then(row_after))
    with pytest.raises(DataError, match=match) as whole:
        resolve_tabular_source(path, blocksize=20_000)
    store = tmp_path / "s.zarr"
    ingest(pd.DataFrame({"x": [1.0, 2.0, 3.0], "class": ["a", "b", "b"]}), store)
    before = np.asarray(open_store(store).X).tolist()
    with pytest.raises(DataError) as late:
        ingest(TabularSource(path, blocksize=20_000), store, overwrite=True)
    assert str(late.value) == str(whole.value)
    assert np.asarray(open_store(store).X).tolist() == before  # the store there is untouched


def test_a_word_in_a_presumed_column_is_found_as_the_rows_are_encoded(tmp_path):
    from dimbsvm.store.sources import UnscannedCellError

    path = tmp_path / "late.csv"
    path.write_text(_guessed_rows_then("1.5,abc,p"))
    X, _, _, meta = resolve_tabular_source(path, blocksize=20_000, presume_numbers=True)  # the scan did not read b
    assert "b" in meta["feature_names"]
    with pytest.raises(UnscannedCellError, match=r"late\.csv: column 'b', row 3001: 'abc' is not a number"):
        X.compute()


def test_numbers_written_for_a_locale_are_refused_as_in_memory(tmp_path):
    path = tmp_path / "locale.csv"
    path.write_text("price,class\n\"1,5\",a\n\"2,25\",b\n3,b\n")
    with pytest.raises(DataError, match=r"decimal comma.*\(row 1: '1,5', 2 such cell\(s\)\)"):
        resolve_tabular_source(path)
    with pytest.raises(DataError, match=r"decimal comma"):
        load_csv(path)


def test_too_many_categories_is_refused_before_encoding(tmp_path):
    df = pd.DataFrame({"email": [f"u{i}@x.org" for i in range(500)], "x0": np.arange(500.0),
                       "class": ["a"] * 450 + ["b"] * 50})
    with pytest.raises(DataError, match=r"the pandas DataFrame: nominal column 'email' has at least 500 distinct "
                                        r"values, more than max_categories=100.*--id email.*--drop email"):
        resolve_tabular_source(df)
    with pytest.raises(DataError, match=r"'email' has at least \d{3} distinct values"):  # partitions, cut early
        resolve_tabular_source(df, blocksize=2_000)
    assert resolve_tabular_source(df, max_categories=500)[3]["shape"] == [500, 501]
    X, _, ids, meta = resolve_tabular_source(df, id="email")
    assert meta["feature_names"] == ["x0"] and ids.compute()[3] == "u3@x.org"


def test_a_continuous_or_unusable_column(tmp_path):
    df = pd.DataFrame({"x0": np.arange(6.0), "class": [0.5, 1.25, 3.0, 0.5, 1.25, 3.0]})
    with pytest.raises(DataError, match=r"target column 'class': the target is continuous"):
        resolve_tabular_source(df)
    when = pd.DataFrame({"x0": [1.0, 2.0], "seen": pd.to_datetime(["2024-01-01", "2024-01-02"]), "class": [0, 1]})
    with pytest.raises(DataError, match=r"column\(s\) 'seen' \(datetime64.*--drop"):
        resolve_tabular_source(when)
    assert resolve_tabular_source(when, drop="seen")[3]["feature_names"] == ["x0"]


@pytest.mark.parametrize("labels", [
    ["a", "b", "b"], ["b", "a"], ["positive", "positive", "negative"], ["-1", "1", "1", "1.0"],
    ["10", "9", "2", "9"], ["x", "y", "z", "z"], [1, 0, 0, 0.0],
])
def test_the_class_map_from_counts_is_the_one_label_rule(labels):
    counts = pd.Series([label_key(v) for v in labels]).value_counts().to_dict()
    assert class_map_from_counts(counts, source="demo") == encode_labels(labels, source="demo")[1]


# --- stores, the CLI, routing -------------------------------------------------------------------------------


def test_ingest_keeps_the_ids_beside_the_rows(tmp_path):
    df = _frame().drop(columns="note")
    df.to_parquet(tmp_path / "d.parquet")
    stored = ingest(TabularSource(tmp_path / "d.parquet", id="uid", nominal=["code"]), tmp_path / "s.zarr",
                    chunk_rows=50, verify=True)
    expected = _by_hand(df, nominal=["code"], id="uid")
    np.testing.assert_array_equal(stored.X.compute(), expected[0])
    np.testing.assert_array_equal(stored.y.compute(), expected[1])
    ids = open_ids(stored.path)
    assert ids.dtype == np.int64 and ids.chunks[0][0] == 50
    np.testing.assert_array_equal(ids.compute(), df["uid"].to_numpy())
    text = ingest(df.astype({"uid": str}), tmp_path / "t.zarr", chunk_rows=50, id="uid", drop=["count"])
    assert open_ids(text.path).compute().tolist() == [str(i) for i in df["uid"]]
    assert text.meta["id_dtype"] == "str" and "count" not in text.meta["feature_names"]
    assert open_ids(ingest("yeast5", tmp_path / "y.zarr").path) is None


def test_routing_keeps_the_other_readers():
    tabular = ("a.parquet", "b.csv", "c.csv.gz", "d/*.pq", "s3://b/k", "https://h/x.csv")
    assert all(is_tabular_source(s) for s in tabular)
    assert not any(is_tabular_source(s) for s in ("yeast5", "x.dat", "x.npz", "x.svm", "x.ts", "x.data"))


def test_cli_ingest_with_columns(tmp_path, capsys):
    from dimbsvm.cli import main

    df = _frame()
    df.to_parquet(tmp_path / "d.parquet")
    store = tmp_path / "s.zarr"
    assert main(["ingest", str(tmp_path / "d.parquet"), str(store), "--drop", "note", "--nominal", "code",
                 "--max-categories", "10"]) == 0
    out = capsys.readouterr().out
    assert "X (240, 9) float64" in out and "label column 'class': found by its name" in out
    assert open_store(store).meta["categories"]["code"] == ["11", "3", "7"]
    assert main(["ingest", str(tmp_path / "d.parquet"), str(tmp_path / "n.zarr"), "--drop", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dimbsvm: error: ") and "no column 'nope' (drop); the columns are ['uid'," in err
    assert "\n" not in err
    assert main(["ingest", "yeast5", str(tmp_path / "y.zarr"), "--target", "x"]) == 2
    assert "yeast5: choosing columns (target) applies to Parquet and CSV sources" in capsys.readouterr().err


def test_a_url_whose_filesystem_is_not_installed_names_the_extra():
    pytest.importorskip("fsspec")
    try:
        import gcsfs  # noqa: F401
        pytest.skip("gcsfs is installed here")
    except ImportError:
        pass
    with pytest.raises(DimbsvmError, match=r'gs://bucket/rows\.parquet: .*pip install "dimbsvm\[gcs\]"'):
        resolve_tabular_source("gs://bucket/rows.parquet")


# --- a real S3 API ----------------------------------------------------------------------------------------


def test_s3_sources_equal_the_local_ones(s3_bucket, tmp_path):
    import s3fs

    fs = s3fs.S3FileSystem()
    df = _frame().drop(columns="note")
    local_parts = tmp_path / "parts"
    local_parts.mkdir()
    for k, start in enumerate(range(0, len(df), 100)):
        df.iloc[start:start + 100].to_parquet(local_parts / f"part-{k}.parquet")
    df.to_csv(tmp_path / "rows.csv", index=False)
    with gzip.open(tmp_path / "rows.csv.gz", "wt") as handle:
        df.to_csv(handle, index=False)
    fs.put(str(local_parts), f"{s3_bucket}/parts", recursive=True)
    fs.put(str(tmp_path / "rows.csv"), f"{s3_bucket}/rows.csv")
    fs.put(str(tmp_path / "rows.csv.gz"), f"{s3_bucket}/rows.csv.gz")

    for remote, local in ((f"s3://{s3_bucket}/parts/", local_parts),
                          (f"s3://{s3_bucket}/parts/*.parquet", local_parts),
                          (f"s3://{s3_bucket}/rows.csv", tmp_path / "rows.csv"),
                          (f"s3://{s3_bucket}/rows.csv.gz", tmp_path / "rows.csv.gz")):
        url_store = ingest(TabularSource(remote, id="uid", nominal=["code"]), tmp_path / "from-s3.zarr",
                           overwrite=True)
        local_store = ingest(TabularSource(local, id="uid", nominal=["code"]), tmp_path / "local.zarr",
                             overwrite=True)
        np.testing.assert_array_equal(url_store.X.compute(), local_store.X.compute())
        np.testing.assert_array_equal(url_store.y.compute(), local_store.y.compute())
        np.testing.assert_array_equal(open_ids(url_store.path).compute(), open_ids(local_store.path).compute())
        for key in ("feature_names", "class_map", "class_counts", "categories", "nominal_columns"):
            assert url_store.meta[key] == local_store.meta[key], key

    # the fingerprint comes from the objects' metadata: stable, and changed when an object is rewritten
    url = f"s3://{s3_bucket}/rows.csv"
    first = resolve_tabular_source(url)[3]["fingerprint"]
    assert resolve_tabular_source(url)[3]["fingerprint"] == first
    fs.pipe(f"{s3_bucket}/rows.csv", (tmp_path / "rows.csv").read_bytes().replace(b"yes", b"maybe", 1))
    assert resolve_tabular_source(url)[3]["fingerprint"] != first
    with pytest.raises(DataError, match=r"s3://.*/nothing\.parquet: file not found"):
        resolve_tabular_source(f"s3://{s3_bucket}/nothing.parquet")


def test_parquet_at_a_url_is_read_in_larger_partitions_than_a_local_file(s3_bucket, tmp_path, monkeypatch):
    """Each partition read on object storage reopens the file (a few requests): there it takes more row groups."""
    import s3fs

    from dimbsvm.store.sources import _frames

    df = _frame(n=600).drop(columns="note")
    df.to_parquet(tmp_path / "rows.parquet", row_group_size=100)  # 6 row groups of a few kB
    s3fs.S3FileSystem().put(str(tmp_path / "rows.parquet"), f"{s3_bucket}/rows.parquet")
    import pyarrow.parquet as pq

    footer = pq.read_metadata(tmp_path / "rows.parquet")
    one_group = max(footer.row_group(i).total_byte_size for i in range(footer.num_row_groups))
    monkeypatch.setattr(_frames, "PARQUET_BLOCKSIZE", one_group)  # a row group per partition
    monkeypatch.setattr(_frames, "PARQUET_URL_BLOCKSIZE", 2**30)  # the whole file
    local = resolve_tabular_source(tmp_path / "rows.parquet", id="uid")
    remote = resolve_tabular_source(f"s3://{s3_bucket}/rows.parquet", id="uid")
    assert (local[3]["partitions"], remote[3]["partitions"]) == (6, 1)
    np.testing.assert_array_equal(local[0].compute(), remote[0].compute())
    assert resolve_tabular_source(f"s3://{s3_bucket}/rows.parquet", id="uid",
                                  blocksize=one_group)[3]["partitions"] == 6


# --- the client does not hold the data ----------------------------------------------------------------------


def _parquet_parts(folder, n_files, rows_per_file=50_000, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir()
    for k in range(n_files):
        pd.DataFrame({**{f"x{j}": rng.normal(size=rows_per_file) for j in range(4)},
                      "class": np.where(rng.random(rows_per_file) < 0.1, "pos", "neg")}
                     ).to_parquet(folder / f"part-{k:03d}.parquet")
    return folder


def test_the_workers_read_the_files(tmp_path, client):
    """With a distributed client, every file is read by a task on a worker, partition by partition."""
    from distributed import get_task_stream

    folder = _parquet_parts(tmp_path / "parts", 4, rows_per_file=2_000)
    with get_task_stream(client) as stream:
        stored = ingest(folder, tmp_path / "s.zarr", chunk_rows=1_000)
    assert stored.X.shape == (8_000, 4) and stored.meta["partitions"] == 4
    ran = {}
    for task in stream.data:
        name = task["key"][0] if isinstance(task["key"], tuple) else task["key"]
        ran.setdefault(name.split("-")[0], set()).add(task["worker"])
    readers = [name for name in ran if "parquet" in name.lower()]
    assert readers, sorted(ran)  # the reads are tasks, run by the workers
    assert {"scan_partition", "encode_partition"} <= set(ran), sorted(ran)


@pytest.mark.slow
def test_client_memory_does_not_grow_with_the_rows(tmp_path):
    """Peak Python memory of an ingest (threads: the tasks run in this process too) for 10x the rows.

    The in-memory CSV reader's peak grows as the rows do (tenfold here); this
    one is bounded by a few partitions and chunks in flight, whatever the
    number of files.
    """
    folders = {n_files: _parquet_parts(tmp_path / f"p{n_files}", n_files) for n_files in (2, 20)}
    with dask.config.set(scheduler="threads", num_workers=2):
        ingest(folders[2], tmp_path / "warm-up.zarr", chunk_rows=50_000)  # imports and caches: not counted
    peaks = {}
    for n_files, folder in folders.items():
        with dask.config.set(scheduler="threads", num_workers=2):
            tracemalloc.start()
            try:
                stored = ingest(folder, tmp_path / f"s{n_files}.zarr", chunk_rows=50_000)
                peaks[n_files] = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        assert stored.X.shape == (n_files * 50_000, 4)
    size_of_X = 20 * 50_000 * 4 * 8
    assert peaks[20] < 3 * peaks[2], peaks
    assert peaks[20] < size_of_X / 2, (peaks, size_of_X)


def test_parquet_files_of_one_source_without_the_first_files_columns_are_refused_in_one_line(tmp_path):
    """Dask reads every file with the first file's columns; a file without one failed in a task as pandas'
    KeyError (issue 50's poor messages). Now one line names the file and the columns, before anything is read."""
    frame = pd.DataFrame({"a": np.arange(10.0), "b": np.arange(10.0), "label": ["x", "y"] * 5})
    (tmp_path / "src").mkdir()
    frame.to_parquet(tmp_path / "src" / "part0.parquet")
    frame.drop(columns="b").to_parquet(tmp_path / "src" / "part1.parquet")
    with pytest.raises(DataError, match=r"part1\.parquet has no column\(s\) \['b'\] that .*part0\.parquet has; "
                                        r"the Parquet files of one source must all have the same columns") as caught:
        ingest(str(tmp_path / "src"), tmp_path / "s.zarr")
    assert "\n" not in str(caught.value) and not (tmp_path / "s.zarr").exists()


def test_a_column_empty_in_every_row_is_refused_not_dropped_in_silence(tmp_path):
    """An all-empty column became a nominal column of no category: no feature, and no word (issue 50). Both
    readers, the streamed one and the in-memory one, refuse it alike."""
    (tmp_path / "empty.csv").write_text("a,b,c,label\n1,2,,x\n3,4,?,y\n5,6,,x\n7,8,,y\n")
    message = r"empty\.csv: column 'c' has no value in any row; leave it out with --drop c, or fill it$"
    with pytest.raises(DataError, match=message):
        ingest(str(tmp_path / "empty.csv"), tmp_path / "s.zarr")
    with pytest.raises(DataError, match=message):
        load_csv(tmp_path / "empty.csv", target="label")
    stored = ingest(TabularSource(str(tmp_path / "empty.csv"), drop=("c",)), tmp_path / "s.zarr")
    assert stored.X.shape == (4, 2)
