"""The base of the pins models (tables.py, archive_pins.py), on pydantic 2 and on pydantic 1.

pydantic 2 is what the plugin is written for: Pants 2.32 runs on Python 3.14, where pydantic 1
does not work. Pants 2.17.1, this repository's own, pins typing-extensions==4.3.0 and so keeps
pydantic 2 (>=4.6.1) out of its venv: there the plugin runs on pydantic 1.10. Everything that
differs between the two is in this module, so the models read alike on both and a user sees the
same error text on both (pins/BUILD runs tables_test.py and pin_model_test.py once in each
resolve). One difference is left, on pydantic 1's side: it reads `track = true` as "True", where
pydantic 2 refuses it ("str type expected").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Mapping, Type, TypeVar

import pydantic
from pydantic import BaseModel, ValidationError

PYDANTIC_MAJOR = int(pydantic.VERSION.split(".")[0])
M = TypeVar("M", bound=BaseModel)

if PYDANTIC_MAJOR >= 2:
    from pydantic import ConfigDict, field_validator

    class PinModel(BaseModel):
        # Frozen: pins are part of build requests, so they must hash. Numbers read as strings,
        # as pydantic 1 reads them (`version = 1.2` in a pins file is "1.2").
        model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    def checks(*fields: str) -> Callable:
        """A validator of `fields`: a function (cls, value) -> value that raises ValueError."""
        return field_validator(*fields)

    def field_names(model: Type[BaseModel]) -> List[str]:
        return list(model.model_fields)

    def with_values(pin: M, values: Mapping[str, str]) -> M:
        """A copy of `pin` with `values` set: values a program has just checked (update-pins)."""
        return pin.model_copy(update=values)

else:
    from pydantic import Extra, validator

    class PinModel(BaseModel):  # type: ignore[no-redef]
        class Config:
            extra = Extra.forbid
            allow_mutation = False
            frozen = True

    def checks(*fields: str) -> Callable:  # type: ignore[misc]
        """A validator of `fields`: a function (cls, value) -> value that raises ValueError."""
        return validator(*fields, allow_reuse=True)

    def field_names(model: Type[BaseModel]) -> List[str]:  # type: ignore[misc]
        return list(model.__fields__)

    def with_values(pin: M, values: Mapping[str, str]) -> M:  # type: ignore[misc]
        """A copy of `pin` with `values` set: values a program has just checked (update-pins)."""
        return pin.copy(update=values)


MISSING = "missing"
UNKNOWN = "unknown"
INVALID = "invalid"
# pydantic 1's error types, then pydantic 2's.
_KINDS = {
    "value_error.missing": MISSING,
    "missing": MISSING,
    "value_error.extra": UNKNOWN,
    "extra_forbidden": UNKNOWN,
}
# pydantic 2 puts this before the message of a ValueError a validator raises; pydantic 1 does not.
_VALUE_ERROR_PREFIX = "Value error, "
# pydantic 2's errors of the kinds a pins file can make, said as pydantic 1 says them (the texts
# users of this repository have seen so far, and that tests and scripts match).
_PYDANTIC_1_TEXTS = {
    "missing": "field required",
    "extra_forbidden": "extra fields not permitted",
    "string_type": "str type expected",
    "bool_type": "value could not be parsed to a boolean",
    "bool_parsing": "value could not be parsed to a boolean",
}


@dataclass(frozen=True)
class FieldProblem:
    """One field a table got wrong: where, which kind (MISSING, UNKNOWN, INVALID), and the
    message of the check that refused it."""

    field: str
    kind: str
    message: str


def field_problems(error: ValidationError) -> List[FieldProblem]:
    return [
        FieldProblem(
            field=".".join(str(part) for part in err["loc"]),
            kind=_KINDS.get(err["type"], INVALID),
            message=_message(err["type"], str(err["msg"])),
        )
        for err in error.errors()
    ]


def _message(error_type: str, message: str) -> str:
    if error_type in _PYDANTIC_1_TEXTS:
        return _PYDANTIC_1_TEXTS[error_type]
    if error_type == "value_error" and message.startswith(_VALUE_ERROR_PREFIX):
        return message[len(_VALUE_ERROR_PREFIX) :]
    return message
