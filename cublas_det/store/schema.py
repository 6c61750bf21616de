"""The one validator of every file we read: a document's fields, each described by what it must be.

A description maps a field to an expectation: a phrase of :data:`EXPECTED` (``"a positive
integer"``), one of :data:`ITEMS` (``"a list of strings"``, each item checked), or an
``(phrase, test)`` pair of a file's own. :func:`check_fields` checks a record against one and
raises one :class:`~cublas_det.errors.InputFileError` line naming the field, what it must be,
what it is, and (``hint``) how to get a good file.
"""

from __future__ import annotations

import math

from ..errors import InputFileError


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive(value) -> bool:
    return is_number(value) and math.isfinite(value) and value > 0


def _at_least_zero(value) -> bool:
    return is_number(value) and math.isfinite(value) and value >= 0


# Each expectation, in the words an error says it in.
EXPECTED = {
    "an object": lambda v: isinstance(v, dict),
    "a list": lambda v: isinstance(v, list),
    "a string": lambda v: isinstance(v, str),
    "a non-empty string": lambda v: isinstance(v, str) and bool(v),
    "true or false": lambda v: isinstance(v, bool),
    "an integer": is_int,
    "an integer >= 0": lambda v: is_int(v) and v >= 0,
    "a positive integer": lambda v: is_int(v) and v > 0,
    "a number": is_number,  # NaN included: a check that failed has no error against float64
    "a finite number >= 0": _at_least_zero,
    "a positive number": _positive,
    "a positive number of seconds": _positive,
}
# Lists and objects of one kind: each item is checked, and an error names the item.
ITEMS = {"a list of positive numbers of seconds": (list, "a positive number of seconds"),
         "a list of integers >= 0": (list, "an integer >= 0"),
         "a list of integers": (list, "an integer"),
         "a list of strings": (list, "a string"),
         "a list of objects": (list, "an object"),
         "an object of strings": (dict, "a string"),
         "an object of objects": (dict, "an object"),
         "an object of lists": (dict, "a list"),
         "an object of integers >= 0": (dict, "an integer >= 0")}


def check_fields(record, where: str, fields: dict, required=(), *, null: bool = True, hint: str = "",
                 error=InputFileError) -> dict:
    """``record`` (an object) with each of ``fields`` that is present as described; ``required`` ones
    present; ``null``: a field may be null (our writers write null for what they do not know).

    ``where`` names the record: ``"run.json:"`` (its fields follow a space) or ``"run.json: gpu"``
    (they follow a dot). A field absent or null is not checked unless required: files of earlier
    versions lack many. ``error``: the :class:`InputFileError` the reader raises.
    """
    if not isinstance(record, dict):
        _refuse(f"{where.rstrip(':')}: expected an object, found {kind_of(record)}", hint, error)
    where += " " if where.endswith(":") else "."
    for key, expected in fields.items():
        words, test = expected if isinstance(expected, tuple) else (expected, EXPECTED.get(expected))
        value = record.get(key)
        if value is None:
            if key in record and not null:
                _refuse(f"{where}{key}: expected {words}, found null", hint, error)
            if key in required:
                _refuse(f"{where}{key}: missing; expected {words}", hint, error)
            continue
        container, item = ITEMS.get(words, (None, None))
        if container is None:
            if not test(value):
                _refuse(f"{where}{key}: expected {words}, found {found(value)}", hint, error)
            continue
        if not isinstance(value, container):
            _refuse(f"{where}{key}: expected {words}, found {found(value)}", hint, error)
        for name, element in (value.items() if container is dict else enumerate(value)):
            if not EXPECTED[item](element):
                _refuse(f"{where}{key}[{name!r}]: expected {item}, found {found(element)}", hint, error)
    return record


def _refuse(message: str, hint: str, error):
    raise error(f"{message}; {hint}" if hint else message)


def kind_of(value) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def found(value) -> str:
    """A wrong value as an error shows it: a number or short string itself, else its JSON type."""
    if isinstance(value, dict):
        return "an object"
    text = repr(value)
    if isinstance(value, list):
        if not value or any(isinstance(x, (dict, list)) for x in value):
            return "a list"
        return text if len(text) <= 40 else f"a list of {len(value)}"
    if len(text) <= 40:
        return text
    return f"a string of {len(value):,} characters" if isinstance(value, str) else f"{text[:37]}..."
