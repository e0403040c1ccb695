"""A caller's loosely typed values, read as the types a Workload's fields hold.

Every value can come from an API call that ignored the sliders: these readers refuse what is
not the type (a bool where a number goes, a fraction, NaN) with a ConfigError naming the value,
shortened by `show` (bounded work however big the value).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import reprlib
import unicodedata
from collections.abc import Mapping
from typing import Any


class ConfigError(ValueError):
    """A request that cannot run as asked; the message says what to change."""


class _Shorter(reprlib.Repr):
    """reprlib's bounded repr, which also names a huge integer's size instead of printing it."""

    def repr_int(self, value: int, level: int) -> str:
        if value.bit_length() > 256:  # repr of a huge int is slow, and refused past 4300 digits
            return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
        return super().repr_int(value, level)


_SHORT_REPR = _Shorter()  # keyword arguments only from Python 3.12
_SHORT_REPR.maxlevel, _SHORT_REPR.maxlist, _SHORT_REPR.maxtuple, _SHORT_REPR.maxdict = 2, 4, 4, 4
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = 40


def show(value: Any, width: int = 40) -> str:
    """A caller's value, shortened for a message (bounded work, however big the value)."""
    text = _SHORT_REPR.repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def whole_number(name: str, value: Any, limits: tuple[int, int]) -> int:
    """A whole number within `limits`, from an int or an integral float (never a bool)."""
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ConfigError(f"{name} must be a whole number, got {show(value)}")
        value = int(value)
    if not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {show(value)}")
    low, high = limits
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {show(value)}")
    return value


def boolean(name: str, value: Any) -> bool:
    """A bool, or the text "true"/"false" (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{name} must be true or false, got {show(value)}")


def choice_text(name: str, value: Any) -> str:
    """Text, stripped (whether it is one of the choices is the caller's rule)."""
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be text, got {show(value)}")
    return value.strip()


@functools.cache
def field_rules(cls: type) -> dict[str, tuple[str, bool, Any]]:
    """Field name → (kind: int, bool or str; whether None is allowed; default), read from the
    class's annotations ("int", "int | None"…): a new field needs no entry here."""
    rules = {}
    for declared in dataclasses.fields(cls):
        parts = [part.strip() for part in str(declared.type).split("|")]
        kind = next(part for part in parts if part != "None")
        rules[declared.name] = (kind, "None" in parts, declared.default)
    return rules


def coerced(
    raw: Mapping[str, Any],
    cls: type,
    names: tuple[str, ...],
    what: str,
    limits: Mapping[str, tuple[int, int]],
) -> dict[str, Any]:
    """Each of `names` from `raw` (its default when absent) as its field's type, a whole number
    within its `limits`, or ConfigError."""
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ConfigError(f"unknown {what}(s): {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for name in names:
        kind, optional, default = field_rules(cls)[name]
        value = raw.get(name, default)
        if value is None:
            if not optional:
                raise ConfigError(f"{name} is missing")
        elif kind == "int":
            value = _whole_or_unset(name, value, limits[name], optional)
        elif kind == "bool":
            value = boolean(name, value)
        else:
            value = choice_text(name, value)
        values[name] = value
    return values


LABEL_PUNCTUATION = " _-.+()/:@"


def plain_label(text: str) -> bool:
    """Whether a caller's label is plain text: letters, marks and digits of any script ('ранг
    0', '第一', 'é'), spaces and LABEL_PUNCTUATION; no control or format character (a tab, a
    right-to-left override, a zero-width space) and nothing that is markup (<, `, *, |, [)."""
    return all(unicodedata.category(char)[0] in "LMN" or char in LABEL_PUNCTUATION for char in text)


def _whole_or_unset(name: str, value: Any, limits: tuple[int, int], optional: bool) -> int:
    """`whole_number`; for a field that may be left unset, the refusal says how (a 0 is not
    "unset": it is refused, as the page's empty field sends None)."""
    try:
        return whole_number(name, value, limits)
    except ConfigError as error:
        if not optional:
            raise
        raise ConfigError(f"{error}; leave {name} empty if not needed") from None
