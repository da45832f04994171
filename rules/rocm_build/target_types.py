"""Target types of the rocm_build plugin: upstream_repo, patch_set, rocm_toolchain, rocm_wheel."""

from __future__ import annotations

import re
from typing import Optional

from pants.core.util_rules.environments import EnvironmentField
from pants.engine.addresses import Address
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    InvalidFieldException,
    BoolField,
    Dependencies,
    DictStringToStringField,
    IntField,
    MultipleSourcesField,
    SpecialCasedDependencies,
    StringField,
    StringSequenceField,
    Target,
    ValidNumbers,
)
from pants.util.strutil import help_text, softwrap

# --------------------------------------------------------------------------- patch_set


class PatchSourcesField(MultipleSourcesField):
    default = ("*.patch", "*.diff", "*.edit.toml")
    expected_file_extensions = (".patch", ".diff", ".toml")
    help = softwrap(
        """
        Patch files, applied in file-name order (prefix them 0001-, 0002-, ...).

        `*.patch` / `*.diff` are unified diffs applied with `git apply` (paths relative to
        the repository root, `a/` `b/` prefixes as `git format-patch` writes them).

        `*.edit.toml` are anchored edits, for places where upstream context lines drift:
        one or more `[[edit]]` tables with `path`, `pattern` (a Python regex), `replace`
        (its replacement, `\\1` for groups) and `count` (how many times `pattern` must
        match, default 1). An optional `applied` regex tells that the edit is already in
        the tree. Both kinds are idempotent: a patch that is already applied is skipped.
        """
    )


class PatchSetTarget(Target):
    alias = "patch_set"
    core_fields = (*COMMON_TARGET_FIELDS, PatchSourcesField)
    help = "An ordered set of patches (unified diffs and anchored edits) for one upstream."


# ----------------------------------------------------------------------- upstream_repo


class PinField(StringField):
    alias = "pin"
    required = True
    help = "The name of the table in the pins file that says which URL and commit to fetch."


class PinsFileField(StringField):
    alias = "pins_file"
    default = "components/pins.toml"
    help = "Path of the pins file, relative to the build root."


class PatchSetsField(SpecialCasedDependencies):
    alias = "patches"
    help = softwrap(
        """
        Addresses of `patch_set` targets applied, in this order, on top of the pinned
        commit, e.g. `["patches/vllm:gfx1151"]`.
        """
    )


class UpstreamRepoTarget(Target):
    alias = "upstream_repo"
    core_fields = (*COMMON_TARGET_FIELDS, PinField, PinsFileField, PatchSetsField)
    help = softwrap(
        """
        A pinned upstream git repository plus our patches: fetches exactly the pinned commit
        (a shallow fetch by SHA, submodules when the pin asks), verifies it and applies the
        patch sets. `pants package` writes the patched tree to dist/ as a tarball.
        """
    )


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


# -------------------------------------------------------------------------- rocm_wheel


class WheelSourceField(StringField):
    alias = "source"
    required = True
    help = "Address of the `upstream_repo` whose patched tree is built, e.g. `:src`."


class WheelToolchainField(StringField):
    alias = "toolchain"
    required = True
    help = "Address of the `rocm_toolchain` to build with, e.g. `//components:therock`."


class GpuTargetsField(StringSequenceField):
    alias = "gpu_targets"
    default = ("gfx1151",)
    help = "AMD GPU architectures to compile for, e.g. `[\"gfx1151\"]`. Checked against known gfx names."


class SupportedGpuTargetsField(StringSequenceField):
    alias = "supported_gpu_targets"
    help = help_text(
        lambda: f"""
        The GPU architectures this component's upstream builds at the pinned commit, read from
        the upstream's own list (give its link in `{SupportedGpuTargetsSourceField.alias}`).
        Empty means no list is known. A `{GpuTargetsField.alias}` entry outside it stops
        `package` and `rocm-plan --check` before any work, naming both lists; an `optional`
        component is skipped instead, with a line saying why.
        """
    )


class SupportedGpuTargetsSourceField(StringField):
    alias = "supported_gpu_targets_source"
    help = help_text(
        lambda: f"""
        Where `{SupportedGpuTargetsField.alias}` comes from: a link to the upstream file at
        the pinned commit (e.g. `https://github.com/ROCm/aiter/blob/<commit>/<path>#L10`).
        Required with `{SupportedGpuTargetsField.alias}`, so the list can be checked again
        when the pin moves.
        """
    )


class AllowMissingGpuTargetsField(StringSequenceField):
    alias = "allow_missing_gpu_targets"
    help = help_text(
        lambda: f"""
        Targets of `{GpuTargetsField.alias}` that libraries of the wheel may lack. After each
        build every library in the wheel that carries AMDGPU code (code objects, and offload
        bundles in shared objects) is read, and the build fails when one lacks a requested
        target: a wheel like that fails at run time with `hipErrorInvalidImage` ("device
        kernel image is invalid") on that GPU. List a target here only when its absence is
        known and accepted (e.g. an upstream library that is not used on it); it is recorded
        in `rocm_build_info.json`, with the arches found in each library.
        """
    )


class WheelPythonField(StringField):
    alias = "python"
    help = softwrap(
        """
        The Python the wheel is built with (and for): `"3.12"`, or an interpreter constraint
        such as `"CPython==3.12.*"`; default `[rocm-build].python` in pants.toml. The first
        matching interpreter on `[python-bootstrap].search_path` (pyenv, PATH) is used; its
        implementation and full version are in the build's key and in `rocm_build_info.json`,
        its location is not. `python=parametrize("3.11", "3.12")` gives one target per
        Python, and dependencies follow: each variant builds against the same Python's
        dependency wheels. Locks are per Python minor version: `3rdparty/build/py3.12/<pin>.lock`.
        """
    )


class WheelDependenciesField(Dependencies):
    help = softwrap(
        """
        Other `rocm_wheel` (or `prebuilt_wheel`) targets whose wheels are installed into this
        build's environment (e.g. torch for vllm). A change in any of them rebuilds this wheel.
        """
    )


class WheelEnvField(DictStringToStringField):
    alias = "env"
    help = softwrap(
        """
        Extra environment variables for the build, on top of the ROCm environment the rule
        sets (they win over it). Values may refer to `$ROCM_PATH`, `$HIP_DEVICE_LIB_PATH` and
        `$ROCM_BUILD_DEPS_PREFIX` (the build venv), expanded inside the sandbox. Nothing from
        the host environment reaches the build; every value here is part of the cache key.
        """
    )


class WheelKindField(StringField):
    alias = "kind"
    default = "generic"
    help = softwrap(
        """
        Which component's environment extras apply (see rules/rocm_build/wheel/env.py):
        generic, aotriton, torch, triton, flash_attention, vllm, aiter.
        """
    )


class WheelBuildCommandField(StringSequenceField):
    alias = "build_command"
    help = softwrap(
        """
        Shell commands run in order in the source tree before the wheel build, e.g.
        `["python use_existing_torch.py"]`. `python` is the build venv's interpreter.
        """
    )


class WheelCommandField(StringField):
    alias = "wheel_command"
    default = "python -m pip wheel . --no-deps --no-build-isolation --no-index -w \"$WHEEL_OUT\""
    help = "The command that builds the wheel into `$WHEEL_OUT`."


class WheelBuildRequirementsField(StringSequenceField):
    alias = "build_requirements"
    help = softwrap(
        """
        Python build requirements, as pip requirement lines: names with version specifiers
        (`setuptools-scm>=8,<9`) and `-r FILE` for requirement files in the patched tree
        (`-r requirements/build.txt`). They are the input of this wheel's lock (see `lock`):
        `pants lock-build-requirements <this target>` resolves them once and pins every
        distribution by sha256; the build installs exactly the lock, from a wheelhouse that a
        separate cached process downloads, with `--no-index --require-hashes`. `cmake` is
        left out of locks: builds use the toolchain's system cmake (seed 000).
        """
    )


class WheelLockField(StringField):
    alias = "lock"
    help = softwrap(
        """
        Path (from the build root) of the lockfile made from `build_requirements`.
        Default: `3rdparty/build/py<3.X>/<pin>.lock`, `<pin>` being the pin of `source` and `3.X` the Python minor version of `python`. The lock names
        the pin commit, the Python and the requirement files it was made from; a build whose
        inputs moved since fails and says how to regenerate it.
        """
    )


class WheelArchivesField(DictStringToStringField):
    alias = "archives"
    help = softwrap(
        """
        `upstream_archive` targets unpacked into the build's sandbox, keyed by the environment
        variable that receives the unpacked directory, e.g.
        `{"LLVM_SYSPATH": "components/triton:llvm"}`. The variable is set inside the sandbox at
        run time; only the archive's sha256 and content are part of the cache key.
        """
    )


class WheelVersionEnvField(StringSequenceField):
    alias = "version_env"
    help = help_text(
        lambda: f"""
        Environment variables through which the upstream takes its version when its tree has no
        `.git` (a build's tree never has): each is set to the pin's version, e.g.
        `["SETUPTOOLS_SCM_PRETEND_VERSION", "VLLM_VERSION_OVERRIDE"]`. The version is the pin's
        `version` key in the pins file if it has one, else the release its `track` names
        (`v0.31.0` gives `0.31.0`), else `0.0.0+g<first 12 digits of the commit>`. The values
        are part of the cache key; a variable also in `{WheelEnvField.alias}` keeps that value.
        The preflight runs the upstream's metadata hook with them and says when one is missing.
        """
    )


class WheelDownloadsCoveredField(DictStringToStringField):
    alias = "downloads_covered"
    help = help_text(
        lambda: f"""
        Files of the patched tree that would download at configure or build time, each mapped
        to the upstream's own variable that makes it use a local copy instead, e.g.
        `{{"cmake/external_projects/triton_kernels.cmake": "TRITON_KERNELS_SRC_DIR"}}`. The
        variable must be set by this recipe: a key of `{WheelArchivesField.alias}` (a pinned
        archive unpacked in the sandbox) or of `{WheelEnvField.alias}`, and the file must name
        it. A file this build never reaches says why instead, as `"not run: <why>"` (e.g.
        `{{"cmake/external_projects/flashmla.cmake": "not run: CUDA only"}}`). The preflight scans the tree (CMake `FetchContent_Declare`, `ExternalProject_Add`,
        `file(DOWNLOAD`, `git clone`; `urllib`, `requests`, `git clone`, `curl`/`wget` in
        setup scripts) and reports every download in a file not listed here (a `pip install`
        is not one: every build's pip finds only the lock's wheelhouse).
        """
    )


class WheelOptionalField(BoolField):
    alias = "optional"
    default = False
    help = softwrap(
        """
        If true (AITER), a failed build is reported as a warning and dependents are built
        without this wheel.
        """
    )


class WheelTimeoutField(IntField):
    alias = "timeout"
    default = 6 * 3600
    valid_numbers = ValidNumbers.positive_only
    help = "Seconds after which the build is killed and fails."


class WheelMaxJobsField(IntField):
    alias = "max_jobs"
    valid_numbers = ValidNumbers.positive_only
    help = "MAX_JOBS for the build. Default: fits the machine (cores, and 4 GiB of memory per job)."


class WheelRuntimeEnvField(DictStringToStringField):
    alias = "runtime_env"
    help = help_text(
        lambda: f"""
        Environment variables the installed wheel needs at run time, e.g. flash-attention's
        Triton backend switch `{{"FLASH_ATTENTION_TRITON_AMD_ENABLE": "TRUE"}}`. `package` writes
        the union over the chain to the install set's `env.sh` (`export VAR=value` lines, to
        source before running Python); two components of a chain that set one variable to
        different values stop `package` before any build, naming both targets. Unlike
        `{WheelEnvField.alias}` (the build's environment) it is in no cache key: changing it
        rebuilds nothing.
        """
    )


class WheelRuntimeRequirementsField(StringSequenceField):
    alias = "runtime_requirements"
    help = help_text(
        lambda: f"""
        What the installed wheel needs at run time that its chain does not hold, as pip
        requirement lines (names with version specifiers), e.g. `["einops"]`. They are locked
        like `{WheelBuildRequirementsField.alias}`, in `3rdparty/run/py<3.X>/<pin>.lock` (`<pin>`
        the pin of `{WheelSourceField.alias}`), written by `pants lock-runtime-requirements <this
        target>`; `package` puts the locked wheels in the install set's `wheels/` and pins them
        by sha256 in its requirements.txt, so `pip install --no-index --find-links wheels
        --require-hashes -r requirements.txt` installs them. A module that TheRock's SDK ships
        rather than an index (`amdsmi`, in rocm-sdk-core; see rules/rocm_build/install/sdk_modules.py)
        is not locked: requirements.txt says how to install it from the SDK. In no cache key.
        """
    )


class RocmWheelTarget(Target):
    alias = "rocm_wheel"
    core_fields = (
        *COMMON_TARGET_FIELDS,
        WheelSourceField,
        WheelToolchainField,
        GpuTargetsField,
        SupportedGpuTargetsField,
        SupportedGpuTargetsSourceField,
        AllowMissingGpuTargetsField,
        WheelPythonField,
        WheelDependenciesField,
        WheelEnvField,
        WheelKindField,
        WheelBuildCommandField,
        WheelCommandField,
        WheelBuildRequirementsField,
        WheelLockField,
        WheelArchivesField,
        WheelVersionEnvField,
        WheelDownloadsCoveredField,
        WheelOptionalField,
        WheelTimeoutField,
        WheelMaxJobsField,
        WheelRuntimeEnvField,
        WheelRuntimeRequirementsField,
        # Pants' own `environment` field: a name from [environments-preview.names]. A
        # docker_environment there makes the build run inside its image (container.py).
        EnvironmentField,
    )
    help = help_text(
        lambda: f"""
        A wheel built from an `upstream_repo` in a sandbox with the ROCm environment for
        `{GpuTargetsField.alias}`, with the wheels of its `rocm_wheel` dependencies and its
        locked `{WheelBuildRequirementsField.alias}` installed, and no network. The wheel gets a
        local label naming toolchain and arch (e.g. `+rocm7.10gfx1151`) and a
        `rocm_build_info.json` listing pins, patch digests, toolchain, interpreter, lock,
        archives and dependency wheels. `pants rocm-plan <target>` shows the exact process.

        With `environment` naming a `docker_environment` (a name from
        `[environments-preview.names]`), the build runs in a fresh container of that image,
        keyed by the image id: no network, a read-only image, nothing of the host but the
        sandbox and its caches; the toolchain and Python are the image's.

        Example (components/vllm/BUILD):

            upstream_repo(name="src", pin="vllm", patches=["patches/vllm:gfx1151"])

            rocm_wheel(
                name="wheel",
                source=":src",
                toolchain="components:rocm",
                gpu_targets=["gfx1151"],
                kind="vllm",
                dependencies=["components/torch:wheel"],
                build_requirements=["-r requirements/build.txt"],  # lock: 3rdparty/build/py3.12/vllm.lock
                build_command=["python use_existing_torch.py"],
                environment="rocm-build-box",  # components/BUILD sets it for the chain
            )
        """
    )


# -------------------------------------------------------------------- upstream_archive


class ArchiveUrlField(StringField):
    alias = "url"
    help = "Where the archive is downloaded from (https://, http:// or file://). Not with `pin`."


class ArchiveMirrorsField(StringSequenceField):
    alias = "mirrors"
    help = "Other URLs serving the same bytes, tried in order when `url` fails."


class ArchiveSha256Field(StringField):
    alias = "sha256"
    help = softwrap(
        """
        The sha256 of the archive file (64 hex digits). The download is verified against it
        before anything is unpacked, and it is the archive's identity in cache keys. An empty
        string marks an archive nobody has resolved yet: builds that need it stop before any
        work.
        """
    )


class ArchiveStripPrefixField(StringField):
    alias = "strip_prefix"
    help = "A directory prefix removed from every member, e.g. `llvm-3c709802-ubuntu-x64`."


class ArchivePinField(StringField):
    alias = "pin"
    help = softwrap(
        """
        Instead of `url`, `sha256` and `strip_prefix`: the table in `pins_file` that holds
        them, which `pants run rules:update-pins` keeps derived from another pin (e.g. Triton's
        LLVM from `cmake/llvm-hash.txt` at the triton pin).
        """
    )


class ArchivePinsFileField(StringField):
    alias = "pins_file"
    default = "components/archives.toml"
    help = "With `pin`: the archive pins file, relative to the build root."


class UpstreamArchiveTarget(Target):
    alias = "upstream_archive"
    core_fields = (
        *COMMON_TARGET_FIELDS,
        ArchiveUrlField,
        ArchiveMirrorsField,
        ArchiveSha256Field,
        ArchiveStripPrefixField,
        ArchivePinField,
        ArchivePinsFileField,
    )
    help = softwrap(
        """
        A pinned archive (a tarball or zip), like Bazel's `http_archive`: downloaded once by
        its own process (the only one that touches the network), verified against `sha256`,
        unpacked with `strip_prefix`, and cached by content. A `rocm_wheel` names it in
        `archives` to get the unpacked tree in its sandbox, e.g.

            upstream_archive(
                name="llvm",
                url="https://example.org/llvm-3c709802-ubuntu-x64.tar.gz",
                sha256="<64 hex digits>",
                strip_prefix="llvm-3c709802-ubuntu-x64",
            )
        """
    )


# -------------------------------------------------------------------- prebuilt_wheel


class PrebuiltPinField(StringField):
    alias = "pin"
    required = True
    help = "The name of the `[prebuilt.<name>]` table in the pins file: index, project, file and sha256."


class PrebuiltDependenciesField(Dependencies):
    help = softwrap(
        """
        For a device wheel (its pin has `device_of`, e.g. TheRock's amd-torch-device-gfx1151):
        the `prebuilt_wheel` targets of its host wheel and of the device wheels it requires
        (its family wheel, amd-torch-device-gfx115x). They go with it into install sets;
        `rocm_wheel`s compile against host wheels only, device wheels never enter a build venv.
        """
    )


class PrebuiltWheelTarget(Target):
    alias = "prebuilt_wheel"
    core_fields = (*COMMON_TARGET_FIELDS, PrebuiltPinField, PinsFileField, PrebuiltDependenciesField)
    help = help_text(
        f"""
        A wheel someone else built (e.g. TheRock's torch for gfx1151), pinned in the pins file
        by index, project, version, file name and sha256. It stands wherever a `rocm_wheel`
        dependency stands: downloaded once, verified by sha256, installed into the build
        venvs of the wheels that depend on it, recorded in their `rocm_build_info.json` and
        written to dist/ with the chain. `pants run rules:update-pins` resolves its `track`
        (a version specifier) against the index.

        TheRock splits torch and torchvision into a host wheel and device wheels (one per gpu
        target, and family wheels): one `prebuilt_wheel` each. A device wheel's pin names its
        host (`device_of`) and takes exactly the host's version; its target depends on the
        host's (and family's) targets. A `rocm_wheel` depends on the device wheels of its
        `gpu_targets` (the host comes with them): it compiles against the host, its install set
        holds them all and its requirements.txt says `torch[device-gfx1151]==<version>`.

        Example (components/pins.toml, then a BUILD file):

            [prebuilt]
            index_url = "https://stable.repo.amd.com/rocm/whl-next/"   # every table's default
            python = "3.12"

            [prebuilt.therock-torch]
            project = "torch"
            track = "==2.13.0+rocm10.0.0"
            version = ""   # update-pins fills version, file, sha256, requires_rocm
            file = ""
            sha256 = ""

            [prebuilt.therock-torch-gfx1151]
            device_of = "therock-torch"
            project = "amd-torch-device-gfx1151"   # update-pins also fills extra, requires_devices

            prebuilt_wheel(name="torch", {PrebuiltPinField.alias}="therock-torch")  # components/therock
            prebuilt_wheel(name="torch-gfx1151", {PrebuiltPinField.alias}="therock-torch-gfx1151",
                           dependencies=[":torch", ":torch-gfx115x"])
        """
    )


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


def target_types():
    return [PatchSetTarget, UpstreamRepoTarget, RocmToolchainTarget, RocmWheelTarget, UpstreamArchiveTarget, PrebuiltWheelTarget]
