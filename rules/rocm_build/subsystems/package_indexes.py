"""Where locks are resolved and wheelhouses downloaded from: Pants' own `[python-repos]`
(`indexes`, `find_links`), the same indexes as Pants' Python resolves, unless `[rocm-build]`'s
`index_urls` or `find_links` is set, which sets builds apart from Pants' own resolves (an
offline wheelhouse for builds while Pants fetches its tools: `[python-repos] indexes = []` would
leave pex without its pip, `No matching distribution found for pip==23.1.2`)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Tuple

from pants.backend.python.subsystems.repos import PythonRepos
from pants.engine.rules import collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem


@dataclass(frozen=True)
class PipIndexArgs:
    """pip's index arguments; they are in lock and download processes' keys."""

    args: Tuple[str, ...]
    where: str  # the option that set them, for messages


def refuse_credentials(option: str, urls: Tuple[str, ...]) -> None:
    """No URL may carry a user, password or token: it would reach keys, logs and messages
    (pip reads those from ~/.netrc instead)."""
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if "@" in parts.netloc:  # shown without its user part: that may be the token
            raise RocmBuildError(
                f"{option}: the URL for {parts.hostname}{parts.path} carries credentials "
                "(`USER[:PASSWORD]@`), which would reach cache keys, logs and error messages. Remove them "
                "from the URL and give them to pip in ~/.netrc (`machine HOST login USER password TOKEN`)."
            )


@rule
async def pip_index_args(repos: PythonRepos, settings: RocmBuildSubsystem) -> PipIndexArgs:
    own_indexes = not settings.options.is_default("index_urls")
    own_links = not settings.options.is_default("find_links")
    urls = tuple(settings.index_urls if own_indexes else repos.indexes)
    # `repos.find_links` with its own deprecated alias, `[python-repos] repos`.
    links = tuple(settings.find_links if own_links else repos.find_links)
    indexes_option = "[rocm-build] index_urls" if own_indexes else "[python-repos] indexes"
    links_option = "[rocm-build] find_links" if own_links else "[python-repos] find_links"
    refuse_credentials(indexes_option, urls)
    refuse_credentials(links_option, links)
    index = ["--index-url", urls[0], *(a for u in urls[1:] for a in ("--extra-index-url", u))] if urls else ["--no-index"]
    where = f"{indexes_option} and {links_option}"
    if own_indexes == own_links:
        where = "[rocm-build] index_urls and find_links" if own_indexes else "[python-repos] indexes and find_links"
    return PipIndexArgs((*index, *(a for link in links for a in ("--find-links", link))), where)


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *PythonRepos.rules(), *RocmBuildSubsystem.rules()])
