"""Which column is the label, which is the id, which are features, and of what kind.

Nothing is guessed but the label column's name: without ``target``, a
column called ``class``, ``label`` or ``target`` (any case) is the label,
and the meta says it was found by name. Anything else is an error naming
the columns a user can choose from.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...datasets.tabular import refuse_other_delimiter
from ...exceptions import DataError

__all__ = ["GUESSED_TARGETS", "Roles", "choose_roles", "column_kinds", "id_kind"]

#: Label column names recognised without ``target`` (compared case-insensitively).
GUESSED_TARGETS = ("class", "label", "target")
#: How many column names an error message lists before "and N more".
_SHOWN_COLUMNS = 30

#: A feature column's kind. "number": numeric (or boolean) dtype, read as floats; "text": strings whose
#: values decide, as in the CSV reader (all numbers: numeric; none: nominal; some: an error);
#: "nominal": one-hot encoded (declared, or a categorical dtype).
KINDS = ("number", "text", "nominal")


@dataclass(frozen=True)
class Roles:
    """Every column's role.

    Attributes
    ----------
    target : str
        The label column.
    target_guessed : bool
        Whether ``target`` was found by its name rather than given.
    id : str or None
        A column kept beside the rows, never a feature.
    drop : tuple of str
    nominal : tuple of str
        Columns declared nominal.
    features : tuple of str
        The feature columns, in source order.
    default_target : str or None
        The label column that would be found by name without ``target``.
    """

    target: str
    target_guessed: bool
    id: str | None
    drop: tuple[str, ...]
    nominal: tuple[str, ...]
    features: tuple[str, ...]
    default_target: str | None = None

    @property
    def read(self) -> list[str]:
        """The columns to read, in source order of the features, then the label and the id."""
        return [*self.features, self.target, *([self.id] if self.id is not None else [])]

    def is_default(self) -> bool:
        """Whether nothing was chosen that the defaults would not have chosen."""
        return self.id is None and not self.drop and not self.nominal and self.target == self.default_target


def _names(value, option: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    names = tuple(value)
    if not all(isinstance(n, str) for n in names):
        raise DataError(f"{option} must name columns (strings), got {list(names)!r}")
    return names


def describe_columns(columns) -> str:
    """``['a', 'b', ...]``, cut after the first few names."""
    columns = list(columns)
    shown = repr(columns[:_SHOWN_COLUMNS])
    return shown if len(columns) <= _SHOWN_COLUMNS else f"{shown[:-1]}, ... and {len(columns) - _SHOWN_COLUMNS} more]"


def choose_roles(columns, *, target=None, id=None, drop=None, nominal=None, source: str) -> Roles:
    """Check the columns asked for and give every column its role.

    Parameters
    ----------
    columns : sequence of str
        The source's columns, in order.
    target, id : str, default=None
    drop, nominal : str or sequence of str, default=None
    source : str
        Named in error messages.

    Raises
    ------
    DataError
        A named column does not exist (all of them named at once, with the
        columns there are), a column has two roles, no label column is given
        or recognised, or no feature column is left.

    Examples
    --------
    >>> roles = choose_roles(["uid", "x", "colour", "Class"], id="uid", source="demo")
    >>> roles.target, roles.target_guessed, roles.features
    ('Class', True, ('x', 'colour'))
    >>> choose_roles(["x", "y"], source="demo")
    Traceback (most recent call last):
    ...
    dimbsvm.exceptions.DataError: demo: no label column: none is named class, label or target; choose one of ['x', 'y'] with --target COLUMN (target= in Python)
    """
    columns = list(columns)
    refuse_other_delimiter(columns, source)
    asked = {"target": _names(target, "target"), "id": _names(id, "id"), "drop": _names(drop, "drop"),
             "nominal": _names(nominal, "nominal")}
    unknown = [f"{name!r} ({option})" for option, names in asked.items() for name in names if name not in columns]
    if unknown:
        raise DataError(f"{source}: no column {', '.join(unknown)}; the columns are {describe_columns(columns)}")
    target_name, guessed = (asked["target"][0], False) if asked["target"] else (_guess_target(columns, source), True)
    id_name = asked["id"][0] if asked["id"] else None
    _check_one_role_each(target_name, id_name, asked["drop"], asked["nominal"], source)
    taken = {target_name, id_name, *asked["drop"]}
    features = tuple(c for c in columns if c not in taken)
    if not features:
        raise DataError(f"{source}: no feature column is left once the label ({target_name!r}), the id and the "
                        f"dropped columns are set aside; the columns are {describe_columns(columns)}")
    named = _named_targets(columns)
    return Roles(target=target_name, target_guessed=guessed, id=id_name, drop=asked["drop"],
                 nominal=asked["nominal"], features=features, default_target=named[0] if len(named) == 1 else None)


def _named_targets(columns: list[str]) -> list[str]:
    return [c for c in columns if c.strip().lower() in GUESSED_TARGETS]


def _guess_target(columns: list[str], source: str) -> str:
    found = _named_targets(columns)
    if len(found) == 1:
        return found[0]
    if found:
        raise DataError(f"{source}: several columns could be the label ({', '.join(map(repr, found))}); choose one "
                        "with --target COLUMN (target= in Python)")
    raise DataError(f"{source}: no label column: none is named {', '.join(GUESSED_TARGETS[:-1])} or "
                    f"{GUESSED_TARGETS[-1]}; choose one of {describe_columns(columns)} with --target COLUMN "
                    "(target= in Python)")


def _check_one_role_each(target: str, id_name, drop, nominal, source: str) -> None:
    roles = [(target, "the label"), *([(id_name, "the id")] if id_name else []),
             *[(c, "dropped") for c in drop]]
    seen: dict[str, str] = {}
    for column, role in roles:
        if column in seen and seen[column] != role:
            raise DataError(f"{source}: column {column!r} cannot be both {seen[column]} and {role}")
        seen[column] = role
    for column in nominal:
        if column in seen:
            raise DataError(f"{source}: column {column!r} is {seen[column]}, so it cannot be a nominal feature too")


def column_kinds(dtypes, roles: Roles, *, source: str) -> dict[str, str]:
    """Each feature column's kind (see :data:`KINDS`) from its dtype and the declared nominal columns.

    Raises
    ------
    DataError
        Columns of a dtype that is neither numeric, boolean, text nor
        categorical (dates, durations, nested values), naming them.
    """
    kinds, unusable = {}, []
    for column in roles.features:
        dtype = dtypes[column]
        if column in roles.nominal or isinstance(dtype, pd.CategoricalDtype):
            kinds[column] = "nominal"
        elif pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
            kinds[column] = "number"
        elif pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype):
            kinds[column] = "text"
        else:
            unusable.append(f"{column!r} ({dtype})")
    if unusable:
        raise DataError(f"{source}: column(s) {', '.join(unusable)} are neither numbers, text nor categories; "
                        "leave them out with --drop, keep one beside the rows with --id, or convert them first")
    return kinds


def id_kind(dtype) -> str:
    """``"int64"`` for an integer id column, else ``"str"`` (ids are stored as text)."""
    integer = pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
    return "int64" if integer else "str"
