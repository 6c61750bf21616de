"""The one validator of every file we read, and the one codec of the records we write (:class:`Codec`). A
field expects a phrase of :data:`EXPECTED` or :data:`ITEMS`, a ``(phrase, test)`` pair, a :class:`Record` or
an :class:`Each`; an error is one line naming the field's path, what it must be, what it is, and (``hint``)
how to get a good file."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import ClassVar

from .errors import InputFileError
from .integers import is_int


def is_number(value) -> bool:
    return is_int(value) or isinstance(value, float)


def _finite(v) -> bool:
    return is_number(v) and math.isfinite(v)


# Each expectation, in the words an error says it in.
EXPECTED = {
    "an object": lambda v: isinstance(v, dict),
    "a list": lambda v: isinstance(v, list),
    "a string": lambda v: isinstance(v, str),
    "a non-empty string": lambda v: isinstance(v, str) and bool(v),
    "true or false": lambda v: isinstance(v, bool),
    "an integer": is_int,
    "an integer >= 0": lambda v: is_int(v, 0),
    "a positive integer": lambda v: is_int(v, 1),
    "a number": is_number,  # NaN included: a check that failed has no error against float64
    "a finite number >= 0": lambda v: _finite(v) and v >= 0,
    "a positive number": lambda v: _finite(v) and v > 0,
    "a positive number of seconds": lambda v: _finite(v) and v > 0,
}


@dataclasses.dataclass(frozen=True)
class Record:
    """An object's fields (name -> expectation) and those it must have; one absent or null is not checked
    unless required (older files lack many); ``null``: a field may be null (what a writer did not know)."""

    fields: dict
    required: tuple = ()
    null: bool = True


@dataclasses.dataclass(frozen=True)
class Each:
    """A list (``container`` dict: an object) whose every item is ``item``, a :class:`Record` or an Each."""

    item: object
    container: type = list
    phrase: str = ""  # what an error calls it (an :data:`ITEMS` phrase), where not "a list of objects"
    whole: tuple = ()  # a (phrase, test) pair the whole must meet once every item does

    @property
    def words(self) -> str:
        return self.phrase or ("a list of " if self.container is list else "an object of ") + (
            "objects" if isinstance(self.item, Record) else "lists")


# Lists and objects of one kind: each item is checked, and an error names the item.
ITEMS = {phrase: Each(item, container, phrase) for phrase, container, item in (
    ("a list of positive numbers of seconds", list, "a positive number of seconds"),
    ("a list of integers >= 0", list, "an integer >= 0"), ("a list of integers", list, "an integer"),
    ("a list of strings", list, "a string"), ("an object of strings", dict, "a string"),
    ("an object of objects", dict, "an object"), ("an object of integers >= 0", dict, "an integer >= 0"))}


def check(value, where: str, record: Record, *, hint: str = "", error=InputFileError):
    """``value`` if it is an object as ``record`` describes, else one ``error`` line; ``where`` names it:
    ``"run.json:"`` (its fields follow a space) or ``"run.json: gpu"`` (they follow a dot)."""
    if not isinstance(value, dict):
        _refuse(f"{where.rstrip(':')}: expected an object, found {kind_of(value)}", hint, error)
    where += " " if where.endswith(":") else "."
    for key, expected in record.fields.items():
        field = value.get(key)
        if field is None:
            words = _words(expected)
            if key in value and not record.null:
                _refuse(f"{where}{key}: expected {words}, found null", hint, error)
            if key in record.required:
                _refuse(f"{where}{key}: missing; expected {words}", hint, error)
            continue
        _check_value(field, f"{where}{key}", expected, hint, error)
    return value


def _words(expected) -> str:
    if isinstance(expected, Record):
        return "an object"
    if isinstance(expected, Each):
        return expected.words
    return expected[0] if isinstance(expected, tuple) else expected


def _check_value(value, path: str, expected, hint: str, error) -> None:
    expected = ITEMS.get(expected, expected) if isinstance(expected, str) else expected
    if isinstance(expected, Record):
        if not isinstance(value, dict):
            _refuse(f"{path}: expected an object, found {found(value)}", hint, error)
        check(value, path, expected, hint=hint, error=error)
        return
    if isinstance(expected, Each):
        if not isinstance(value, expected.container):
            _refuse(f"{path}: expected {expected.words}, found {found(value)}", hint, error)
        for name, item in (value.items() if expected.container is dict else enumerate(value)):
            _check_value(item, f"{path}[{name!r}]", expected.item, hint, error)
        if not expected.whole:
            return
        expected = expected.whole
    words, test = expected if isinstance(expected, tuple) else (expected, EXPECTED[expected])
    if not test(value):
        _refuse(f"{path}: expected {words}, found {found(value)}", hint, error)


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
        return text if len(text) <= 40 else f"a list of {len(value)}: {text[:30]}..."  # the values too: the culprit
    if len(text) <= 40:
        return text
    return f"a string of {len(value):,} characters" if isinstance(value, str) else f"{text[:37]}..."


def encoded(value):
    """``value`` as JSON holds it: a record through its own ``to_dict``, an enum as its value, tuples as lists."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [encoded(item) for item in value]
    if isinstance(value, dict):
        return {key: encoded(item) for key, item in value.items()}
    return value


class Codec:
    """A dataclass as a JSON object: its fields in order, each :func:`encoded`; read back with the field's
    ``DECODE`` function, a missing field taking its default and one this version lacks left out (the
    run file and the worker protocol read what other versions wrote)."""

    DECODE: ClassVar[dict] = {}

    def to_dict(self) -> dict:
        return {field.name: encoded(getattr(self, field.name)) for field in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict):
        return cls(**{field.name: cls.DECODE.get(field.name, lambda value: value)(data[field.name])
                      for field in dataclasses.fields(cls) if field.name in data})
