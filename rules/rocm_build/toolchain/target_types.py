"""Target types of the toolchain stage: rocm_toolchain, and the `image_recipe` field of
Pants' docker_environment."""

from __future__ import annotations

import re
from typing import Optional

from pants.engine.addresses import Address
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    InvalidFieldException,
    StringField,
    StringSequenceField,
    Target,
)
from pants.util.strutil import help_text, softwrap

# ---------------------------------------------------------------------- rocm_toolchain

TOOLCHAIN_PROVIDERS = ("therock", "path", "llvm")


class ToolchainProviderField(StringField):
    alias = "provider"
    required = True
    valid_choices = TOOLCHAIN_PROVIDERS
    help = softwrap(
        """
        Where the ROCm SDK comes from.
        `therock`: TheRock's `rocm[libraries,devel,device-<gfx>]` pip packages at `version`
        from `index_url`, with the device code of each of the wheel's `gpu_targets` (one
        `rocm-sdk-device-<gfx>` wheel each), installed into a cached venv (root from
        `python -m rocm_sdk path --root`).
        `path`: an existing install at `path` (e.g. /opt/rocm).
        `llvm`: only a clang with the AMDGPU target (e.g. Debian's clang-19): compiles device
        code, has no HIP runtime; the miniature chain uses it.
        """
    )


class ToolchainVersionField(StringField):
    alias = "version"
    help = softwrap(
        """
        therock: the exact `rocm` package version on `index_url`: a release (`10.0.0`) or a
        nightly (`10.1.0a20261120`, TheRock's `X.Y.ZaYYYYMMDD`). It names the wheel label.
        """
    )

    @classmethod
    def compute_value(cls, raw_value: Optional[str], address: Address) -> Optional[str]:
        value = super().compute_value(raw_value, address)
        if value is not None and not re.fullmatch(r"\d+\.\d+\.\d+((a|rc)\d+|\.dev\d+)?", value):
            raise InvalidFieldException(
                f"The `{cls.alias}` field of {address} is {value!r}: an exact `rocm` version is needed, such as "
                "10.0.0 or the nightly 10.1.0a20261120 (a range or a local label matches nothing on the index)."
            )
        return value


class ToolchainIndexUrlField(StringField):
    alias = "index_url"
    help = softwrap(
        """
        therock: TheRock's multi-arch package index, e.g.
        `https://stable.repo.amd.com/rocm/whl-next/` (streams: stable, rc, nightly, dev).
        """
    )


class ToolchainPathField(StringField):
    alias = "path"
    help = "path: the ROCm root (contains bin/hipcc and lib/llvm). Not part of any cache key."


class ToolchainClangField(StringField):
    alias = "clang"
    default = "clang-19"
    help = "llvm: the clang binary name looked up in `search_path`."


class ToolchainSearchPathField(StringSequenceField):
    alias = "search_path"
    default = ("/usr/lib/llvm-19/bin", "/usr/bin")
    help = "llvm: directories searched for `clang`. Not part of any cache key."


class ToolchainLabelField(StringField):
    alias = "label"
    help = softwrap(
        """
        The toolchain part of the wheels' PEP 440 local label. Default: `rocm<version>`
        (therock, path) or `llvm<major>` (llvm).
        """
    )


class RocmToolchainTarget(Target):
    alias = "rocm_toolchain"
    core_fields = (
        *COMMON_TARGET_FIELDS,
        ToolchainProviderField,
        ToolchainVersionField,
        ToolchainIndexUrlField,
        ToolchainPathField,
        ToolchainClangField,
        ToolchainSearchPathField,
        ToolchainLabelField,
    )
    help = softwrap(
        """
        A ROCm toolchain. Its identity (provider, version, compiler `--version`) is part of
        every wheel build's cache key; the place where it is installed is not, so machines
        with the toolchain at different paths share cache entries.
        """
    )


# ------------------------------------------------------------ docker_environment


class ImageRecipeField(StringField):
    alias = "image_recipe"
    help = help_text(
        """
        For a `docker_environment` whose image is built on this machine rather than pulled:
        the script that builds it (a path from the build root; `./setup` runs the
        miniature chain's). Such an image is named by a tag and resolved to its image id
        on each run; the id is what build keys hold. Without this field, `image` must be
        pinned by digest (`name@sha256:<digest>`): rocm_wheel builds refuse an unpinned one.
        """
    )


class ImageContainerfileField(StringField):
    alias = "image_containerfile"
    help = help_text(
        """
        For a `docker_environment` whose image is made here from a recipe but pinned by digest
        like a published one (the real chain's build box): the Containerfile (a path from the
        build root) that `pants run rules:update-pins -- --resolve` builds, tagged with `image`,
        before it writes the digest the engine reports into `image` (`name:tag@sha256:...`).
        Without it, `--resolve` pulls `image` by its tag. Builds read only the pinned `image`.
        """
    )
