"""Target types of the upstream stage: patch_set, upstream_repo, upstream_archive, prebuilt_wheel."""

from __future__ import annotations

from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    Dependencies,
    DictStringToStringField,
    MultipleSourcesField,
    SpecialCasedDependencies,
    StringField,
    StringSequenceField,
    Target,
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
    default = "components/pins"
    help = softwrap(
        """
        Where the pin's table is, relative to the build root: a pins directory (one file per
        component, e.g. `components/pins/vllm.toml` with `[vllm]`; read as one file holding them
        all) or a single `.toml` file. Pants sees the file that holds the pin as a dependency, so
        `--changed-since` selects the targets of the pin that moved; the directory needs a BUILD
        file owning its files (`files(name="pins", sources=["*.toml"])`).
        """
    )


class PatchSetsField(SpecialCasedDependencies):
    alias = "patches"
    help = softwrap(
        """
        Addresses of `patch_set` targets applied, in this order, on top of the pinned
        commit (of an `upstream_repo`) or the unpacked archive (of an `upstream_archive`, paths
        relative to its root after `strip_prefix`), e.g. `["patches/vllm:gfx1151"]`. Both apply
        them the same way: each patch's paths checked first, a patch that does not apply fails
        naming the patch file and the hunk or edit.
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
    default = "components/archives"
    help = softwrap(
        """
        With `pin`: the archive pins directory (one file per archive, e.g.
        `components/archives/vllm-sdist.toml`) or a single `.toml` file, relative to the build
        root. The file holding the pin is a dependency Pants sees.
        """
    )


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
        PatchSetsField,
    )
    help = softwrap(
        """
        A pinned archive (a tarball or zip), like Bazel's `http_archive`: downloaded once by
        its own process (the only one that touches the network), verified against `sha256`,
        unpacked with `strip_prefix`, patched with its `patches` (as an `upstream_repo` is), and
        cached by content. A `rocm_wheel` names it in `archives` to get the unpacked tree in its
        sandbox, a `triton_kernel_test` in `source` to compile its kernels, e.g.

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


class SystemLibrariesField(DictStringToStringField):
    alias = "system_libraries"
    help = help_text(
        """
        Shared libraries the installed wheel loads from the target machine rather than from a
        wheel of its install set, each with why the machine has it, e.g.
        `{"libdrm.so.2": "Debian's libdrm2 on every gfx1151 box we support"}`. Before `package`
        writes an install set it reads every ELF of every wheel in it (rules/rocm_build/install/closure.py):
        each library an ELF needs must be shipped by a wheel of the set where its RUNPATH
        looks, be one every manylinux system has (auditwheel's policy: libc, libstdc++, ...),
        or be named here; a library named here is also taken to define the unversioned symbols
        nothing in the set defines. In no cache key: changing it rebuilds nothing.
        """
    )


class PrebuiltWheelTarget(Target):
    alias = "prebuilt_wheel"
    core_fields = (*COMMON_TARGET_FIELDS, PrebuiltPinField, PinsFileField, PrebuiltDependenciesField, SystemLibrariesField)
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
