"""`[rocm-build]` options: where locked build requirements come from, the build Python, mirrors and
the compiler launcher. Isolation is `[build-isolation]` (build_isolation.py)."""

from __future__ import annotations

import urllib.parse
from enum import Enum
from typing import Tuple

from pants.option.option_types import BoolOption, DictOption, EnumOption, StrListOption, StrOption
from pants.option.subsystem import Subsystem
from pants.util.strutil import softwrap

from rocm_build.errors import RocmBuildError
from rocm_build.subsystems.build_isolation import BuildIsolationSubsystem, ContainerEngineName
from rocm_build.subsystems.moved_options import REMOVAL_VERSION, moved_hint


class CompilerLauncher(Enum):
    ccache = "ccache"
    sccache = "sccache"


class RocmBuildSubsystem(Subsystem):
    options_scope = "rocm-build"
    help = "How rocm_wheel builds get their locked build requirements, their Python, mirrors and compiler launcher."

    index_urls = StrListOption(
        default=["https://pypi.org/simple"],
        help=softwrap(
            """
            Package indexes that locks are resolved against and wheelhouses are downloaded
            from (the first is pip's `--index-url`, the others `--extra-index-url`). Empty: no
            index, only `find_links`. Every file is checked against the lock's sha256, so an
            index can change the speed of a build, never its inputs.
            """
        ),
    )
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
    find_links = StrListOption(
        default=[],
        help="Directories or URLs with wheels, searched as pip's `--find-links` (e.g. a local mirror).",
    )
    # Moved to `[build-isolation]` (subsystems/build_isolation.py); read there, with these.
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
    compiler_launcher = EnumOption(
        default=CompilerLauncher.ccache,
        help=softwrap(
            """
            What launches the builds' C, C++ and HIP compiles: `ccache` (the host's or the
            image's, as it is found on PATH; nothing if there is none) or `sccache` (Mozilla's,
            pinned by `[sccache]`: its server lives inside each build, on a Unix socket in the
            sandbox, and stops with it). Either keeps its store in a named cache per component
            and arch. The sccache binary is an input of the build, so its digest is in every
            build's key: wheels built with one launcher are not cache hits for the other.
            """
        ),
    )
    ccache_remote_storage = StrOption(
        default="",
        advanced=True,
        help=softwrap(
            """
            A Redis server that builds share their compiler cache (ccache) through, so a
            machine whose own cache is empty still reuses the objects another machine
            compiled: `redis://[[USER:]PASSWORD@]HOST[:PORT][/DB]` or
            `redis+unix:/PATH/TO/SOCKET`, optionally followed by ccache attributes after `|`
            (`|read-only=true`). Set it from the environment,
            `PANTS_ROCM_BUILD_CCACHE_REMOTE_STORAGE=redis://...`, not in a committed file: it
            may hold credentials. It is in no cache key (builds have no network; a forwarder
            outside the build relays ccache's requests through a socket in its sandbox), and
            a server that does not answer costs a warning, not a failed build.
            """
        ),
    )

    def launcher(self) -> str:
        return self.compiler_launcher.value  # Pants refuses any other value, naming the choices

    def pip_index_args(self) -> Tuple[str, ...]:
        """pip's index arguments; they are in lock and download processes' keys, so no URL
        may carry a user, password or token (pip reads those from ~/.netrc instead)."""
        for option, values in (("index_urls", self.index_urls), ("find_links", self.find_links)):
            for url in values:
                parts = urllib.parse.urlsplit(url)
                if "@" in parts.netloc:  # shown without its user part: that may be the token
                    raise RocmBuildError(
                        f"[rocm-build] {option}: the URL for {parts.hostname}{parts.path} carries credentials "
                        "(`USER[:PASSWORD]@`), which would reach cache keys, logs and error messages. Remove them "
                        "from the URL and give them to pip in ~/.netrc (`machine HOST login USER password TOKEN`)."
                    )
        urls = list(self.index_urls)
        args = ["--index-url", urls[0], *(a for u in urls[1:] for a in ("--extra-index-url", u))] if urls else ["--no-index"]
        return (*args, *(a for link in self.find_links for a in ("--find-links", link)))
