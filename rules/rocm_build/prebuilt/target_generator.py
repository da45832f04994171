"""prebuilt_wheels: one `prebuilt_wheel` per `[prebuilt.<name>]` table of a pins file, as
`python_requirements` makes one `python_requirement` per line of a requirements file. The pins
file stays the one list (update-pins writes it); BUILD names it once instead of repeating every
pin (components/kernels/BUILD: the kernel tests' venv of 74 wheels in two targets)."""

from __future__ import annotations

import fnmatch
from typing import Any, Iterable, Optional, Tuple, Union

from pants.engine.addresses import Address
from pants.engine.rules import collect_rules, rule
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    Field,
    GeneratedTargets,
    GenerateTargetsRequest,
    InvalidFieldTypeException,
    TargetGenerator,
)
from pants.engine.unions import UnionMembership, UnionRule
from pants.util.strutil import help_text

from rocm_build.pins.load import load_pins
from rocm_build.pins.tables import PREBUILT, parse_prebuilt_pins
from rocm_build.upstream.target_types import SystemLibrariesField
from rocm_build.upstream.target_types import PinsFileField, PrebuiltPinField, PrebuiltWheelTarget


class PrebuiltPinsMatchField(Field):
    alias = "pins"
    default = ("*",)
    value: Tuple[str, ...]
    help = help_text(
        f"""
        Which `[{PREBUILT}.<name>]` tables of `pins_file` become targets: a glob over `<name>`
        (e.g. `"kernels-*"`), or a list of globs where `!glob` leaves out what it matches
        (`["kernels-*", "!kernels-setuptools"]`). Each generated `prebuilt_wheel` is named
        `<generator>#<name>`; depending on the generator depends on all of them. To depend on
        all of a set but some, make a generator of just those: Pants lists every generated
        target of a generator a target depends on, whatever `!` its `dependencies` write.
        """
    )

    @classmethod
    def compute_value(cls, raw_value: Optional[Union[str, Iterable[str]]], address: Address) -> Tuple[str, ...]:
        value: Any = super().compute_value(raw_value, address)
        globs = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else None
        if globs is None or not all(isinstance(g, str) for g in globs):
            raise InvalidFieldTypeException(address, cls.alias, raw_value, expected_type="a glob or a list of globs")
        return globs


def pin_matches(name: str, globs: Tuple[str, ...]) -> bool:
    """`name` matches a glob and no `!glob`, in any order, as the `!` of Pants' own source globs."""
    excluded = any(fnmatch.fnmatchcase(name, g[1:]) for g in globs if g.startswith("!"))
    return not excluded and any(fnmatch.fnmatchcase(name, g) for g in globs if not g.startswith("!"))


class PrebuiltWheelsTarget(TargetGenerator):
    alias = "prebuilt_wheels"
    core_fields = (*COMMON_TARGET_FIELDS, PinsFileField, PrebuiltPinsMatchField)
    generated_target_cls = PrebuiltWheelTarget
    copied_fields = COMMON_TARGET_FIELDS
    moved_fields = (SystemLibrariesField,)
    help = help_text(
        f"""
        A `prebuilt_wheel` for each `[{PREBUILT}.<name>]` table of `pins_file` whose name matches
        `pins`, so a set of wheels pinned in one file is one line of BUILD, e.g.

            prebuilt_wheels(name="venv", pins_file="components/kernels/pins.toml", pins="kernels-*")

        makes `components/kernels:venv#kernels-torch`, `...#kernels-triton`, ... A table added to
        or removed from the file adds or removes its target; each depends on the pins file. All
        of them but some is a generator of its own, e.g. `pins=["kernels-*", "!kernels-setuptools"]`.
        """
    )


class GeneratePrebuiltWheelsRequest(GenerateTargetsRequest):
    generate_from = PrebuiltWheelsTarget


@rule(desc="Generating prebuilt_wheel targets from a pins file")
async def generate_prebuilt_wheels(request: GeneratePrebuiltWheelsRequest, union_membership: UnionMembership) -> GeneratedTargets:
    generator = request.generator
    pins_file = generator[PinsFileField].value
    loaded = await load_pins(pins_file, generator.address.spec, parse_prebuilt_pins)
    wanted = generator[PrebuiltPinsMatchField].value
    return GeneratedTargets(
        generator,
        [
            PrebuiltWheelTarget(
                {**request.template, PrebuiltPinField.alias: name, PinsFileField.alias: pins_file},
                request.template_address.create_generated(name),
                union_membership,
            )
            for name, _ in loaded.pins
            if pin_matches(name, wanted)
        ],
    )


def rules():
    return [*collect_rules(), UnionRule(GenerateTargetsRequest, GeneratePrebuiltWheelsRequest)]
