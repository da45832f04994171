"""The rocm_wheel target type and every field of it: what it builds from, with what, how, and
what its install set needs at run time (`runtime_env`, `runtime_requirements`, `system_libraries`,
the last shared with prebuilt_wheel)."""

from __future__ import annotations

from rocm_build.pants_environments import EnvironmentField
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    BoolField,
    Dependencies,
    DictStringToStringField,
    IntField,
    StringField,
    StringSequenceField,
    Target,
    ValidNumbers,
)
from pants.util.strutil import help_text, softwrap

from rocm_build.upstream.target_types import SystemLibrariesField
from rocm_build.wheel.kinds import KINDS, kind_help


class WheelSourceField(StringField):
    alias = "source"
    required = True
    help = help_text(
        """
        Address of the `upstream_repo` whose patched tree is built, e.g. `:src`; or of an
        `upstream_archive` (a release sdist, pinned by sha256), whose unpacked tree is patched
        with its `patches` and built the same way (its build info names the archive's URL and
        sha256; SOURCE_DATE_EPOCH is its newest member's time).
        """
    )


class WheelToolchainField(StringField):
    alias = "toolchain"
    required = True
    help = "Address of the `rocm_toolchain` to build with, e.g. `components:rocm` (TheRock's SDK) or `components:llvm`."


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
        Unset (`default: None`), `[rocm-build].python` in pants.toml applies (3.11 unless
        pants.toml says otherwise). The Python the wheel is built with (and for): `"3.12"`, or
        an interpreter constraint such as `"CPython==3.12.*"`. The first
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
    valid_choices = tuple(KINDS)
    help = help_text(
        lambda: f"""
        Which upstream the wheel is, where that changes its build or its chain (the table in
        rules/rocm_build/wheel/kinds.py): the ROCm environment extras its build gets, the
        distribution it installs as (which run-time locks of the components built on it leave
        to the chain), the variable its version is set with. {kind_help()}.
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
        left out of locks: builds use the system's cmake (/usr/bin/cmake), which belongs with the
        toolchain, never one from pip.
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


class WheelCargoLockField(StringField):
    alias = "cargo_lock"
    help = help_text(
        lambda: f"""
        The `Cargo.lock` of the patched tree whose crates the build fetches, e.g.
        `"rust/Cargo.lock"` (vLLM's). The lock is the pin list: each crates.io crate is downloaded
        by name and version and checked against the lock's sha256 `checksum`, each git crate is
        fetched at the commit the lock names (its manifest made standalone, as `cargo vendor`
        does); `[rocm-build] mirrors` applies (crates.io's downloads are under
        `https://static.crates.io/crates/`). They are laid out as a vendor directory in the
        build's sandbox, with an empty `CARGO_HOME` whose `config.toml` replaces crates.io and
        every git source of the tree's locks with it and sets cargo offline; `cargo` and `rustc`
        come from /usr/bin, and `rustc -V` is part of the cache key. A crate whose bytes do not
        match the lock stops the build naming the crate.
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


class WheelBuildDirField(StringField):
    alias = "build_dir"
    default = "build"
    help = softwrap(
        """
        The directory of the tree where the upstream's build tool keeps its state: `build`
        for PyTorch, vLLM and setuptools' temp, a CMake binary directory otherwise. With
        `keep_build_dir` it is carried from one build of this component to the next (a named
        cache of this machine), so a changed file recompiles what depends on it and nothing
        else. The tree must have no files of its own there.
        """
    )


class WheelKeepBuildDirField(BoolField):
    alias = "keep_build_dir"
    default = True
    help = softwrap(
        f"""
        Keep `{WheelBuildDirField.alias}` between builds. Its entry is named by everything in
        the build's key but the tree (toolchain, gpu targets, environment, dependency wheels,
        lock, interpreter, recipe): a change to any of those starts from an empty directory;
        a changed tree reuses it, with the times of the tree's files set by content (unchanged
        since the entry was built: an old fixed time; changed: now), so the build tool decides
        what to recompile. Only a build that succeeded leaves an entry to reuse. It is a speed-up
        of this machine, never an input: the wheel is the same bytes as a clean build's, and
        the cache keys are the same. False for an upstream whose build tool does not rebuild
        correctly from a kept directory: then only the compiler cache applies.
        """
    )


# ------------------------------------------------------------------ what the installed wheel needs


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
        requirement lines (names with version specifiers), e.g. `["einops"]`: its upstream's
        Requires-Dist, which the preflight compares with them (same names and specifiers). They are
        locked like `{WheelBuildRequirementsField.alias}`, together with those of every rocm_wheel
        below this one, in `3rdparty/run/py<3.X>/<pin>.lock` (`<pin>` the pin of
        `{WheelSourceField.alias}`; `<pin>.<name>.lock` for a target not named `wheel`), written by
        `pants lock-runtime-requirements <this target>`; what the chain itself builds or pins (torch
        for a requirement that needs it) is left to the chain, never taken from the index. `package` puts the locked wheels in the install set's `wheels/` and pins them
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
        WheelCargoLockField,
        WheelOptionalField,
        WheelTimeoutField,
        WheelMaxJobsField,
        WheelBuildDirField,
        WheelKeepBuildDirField,
        WheelRuntimeEnvField,
        WheelRuntimeRequirementsField,
        SystemLibrariesField,
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
                # locked in 3rdparty/build/py3.12/vllm.lock
                build_requirements=["-r requirements/build.txt"],
                build_command=["python use_existing_torch.py"],
                # components/BUILD sets it for the whole chain
                environment="rocm-build-box",
            )
        """
    )
