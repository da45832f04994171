"""`[rocm-build]` options: the build Python, mirrors, and the package indexes that set builds
apart from Pants' own `[python-repos]` (package_indexes.py, the default). Isolation is
`[build-isolation]` (build_isolation.py), the compiler launcher and its remote storage
`[compiler-cache]` (compiler_cache.py); the keys they took from here still count until their
removal (moved_options.py)."""

from __future__ import annotations

from pants.option.option_types import BoolOption, DictOption, EnumOption, StrListOption, StrOption
from pants.option.subsystem import Subsystem
from pants.util.strutil import softwrap

from rocm_build.subsystems.build_isolation import BuildIsolationSubsystem, ContainerEngineName
from rocm_build.subsystems.compiler_cache import CompilerCacheSubsystem, CompilerLauncher
from rocm_build.subsystems.moved_options import REMOVAL_VERSION, moved_hint


class RocmBuildSubsystem(Subsystem):
    options_scope = "rocm-build"
    help = "The Python rocm_wheel builds use, and the mirrors their upstreams are fetched through."

    python = StrOption(
        default="3.11",
        help=softwrap(
            """
            The Python rocm_wheel targets are built with (and for) when their `python` field is
            not set: `3.12`, or an interpreter constraint such as `CPython==3.12.*`. It is found
            on `[python-bootstrap].search_path` (pyenv, PATH); its implementation and full
            version are part of every build's key, its location is not. (An option of
            `[rocm-build]`: Pants does not allow a `[rocm-wheel]` scope beside the `rocm_wheel`
            target type.)
            """
        ),
    )
    mirrors = DictOption[str](
        default={},
        advanced=True,
        help=softwrap(
            """
            Upstream URL prefixes fetched from a mirror instead, as git's `insteadOf`:
            `{"https://github.com/": "file:///srv/mirrors/github/"}`; the longest prefix wins.
            For git pins and their submodules, archives and package indexes. What is fetched is
            still checked against its pin (commit, sha256), and the table is in no cache key, so
            a wheel built through a mirror is the same cache entry as one built without.
            Mirrors may be https, ssh or file:// URLs.
            """
        ),
    )

    # Package indexes are Pants' `[python-repos]` (package_indexes.py), which Pants' own resolves
    # read too; these two only set builds apart from them, where they must differ.
    index_urls = StrListOption(
        default=[],
        help=softwrap(
            """
            The package indexes builds resolve their locks from and download wheels from, where
            they must differ from Pants' own: by default (unset) they are `[python-repos] indexes`.
            `[]` keeps builds on `find_links` alone (no index) while Pants still fetches its own
            tools (pex's pip, the plugin's requirements) from `[python-repos]`, as the end-to-end
            tests' copies do with their fixture wheels.
            """
        ),
    )
    find_links = StrListOption(
        default=[],
        help=softwrap(
            """
            Local wheel folders or pages for builds, where they must differ from Pants' own: by
            default (unset) `[python-repos] find_links`.
            """
        ),
    )
    # Keys that moved to the scope of their concern: still read there, with a deprecation
    # warning, until REMOVAL_VERSION (moved_options.py).
    # `[build-isolation]` (build_isolation.py).
    network_isolation = BoolOption(
        default=True,
        help="Deprecated: `[build-isolation] network_isolation`.",
        removal_version=REMOVAL_VERSION,
        removal_hint=moved_hint(BuildIsolationSubsystem.options_scope, "network_isolation"),
    )
    container_engine = EnumOption(
        default=None,
        enum_type=ContainerEngineName,
        help="Deprecated: `[build-isolation] container_engine`.",
        removal_version=REMOVAL_VERSION,
        removal_hint=moved_hint(BuildIsolationSubsystem.options_scope, "container_engine"),
    )
    worker_search_path = StrListOption(
        default=["/usr", "/usr/local", "/opt/rocm"],
        advanced=True,
        help="Deprecated: `[build-isolation] worker_search_path`.",
        removal_version=REMOVAL_VERSION,
        removal_hint=moved_hint(BuildIsolationSubsystem.options_scope, "worker_search_path"),
    )
    # `[compiler-cache]` (compiler_cache.py).
    compiler_launcher = EnumOption(
        default=CompilerLauncher.ccache,
        help="Deprecated: `[compiler-cache] launcher`.",
        removal_version=REMOVAL_VERSION,
        removal_hint=moved_hint(CompilerCacheSubsystem.options_scope, "launcher"),
    )
    ccache_remote_storage = StrOption(
        default="",
        advanced=True,
        help="Deprecated: `[compiler-cache] ccache_remote_storage`.",
        removal_version=REMOVAL_VERSION,
        removal_hint=moved_hint(CompilerCacheSubsystem.options_scope, "ccache_remote_storage"),
    )
