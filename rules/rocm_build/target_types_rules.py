"""Looking up a target that a field names, and insisting on its type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Type, TypeVar

from pants.engine.addresses import Address
from pants.engine.rules import Get
from pants.engine.target import Target, WrappedTarget, WrappedTargetRequest

from rocm_build.errors import RocmBuildError

T = TypeVar("T", bound=Target)


@dataclass(frozen=True)
class TargetRequest:
    """A request about one target, and who named it: `description_of_origin` ("the `source`
    field of components/vllm:wheel") is what errors about the target say it came from.
    Each rule's request subclasses it (`UpstreamRequest`, `ArchiveRequest`, ...), so the
    engine tells them apart."""

    address: Address
    description_of_origin: str


async def expect_target(address: Address, expected: Type[T], description_of_origin: str) -> T:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(address, description_of_origin))
    target = wrapped.target
    if not isinstance(target, expected):
        article = "an" if expected.alias[0] in "aeiou" else "a"
        raise RocmBuildError(
            f"{description_of_origin} names {target.address.spec}, a `{target.alias}`; it must be "
            f"{article} `{expected.alias}` target"
        )
    return target
