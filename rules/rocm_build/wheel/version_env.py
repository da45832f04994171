"""The version an upstream takes from its pin, for trees without `.git`.

A build's tree is checked out of a pack: no `.git`, so setuptools-scm, `git describe` and
their kin cannot say which version the tree is. The pin says it instead, and the recipe's
`version_env` names the upstream's own variables that take it (`SETUPTOOLS_SCM_PRETEND_VERSION`,
`VLLM_VERSION_OVERRIDE`): the pin's `version` key if it has one, else the release its `track`
names (`v0.31.0` -> `0.31.0`), else a describe-like `0.0.0+g<sha12>`. The values go into the
build's environment, so they are part of its key.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, Optional

# A release tag: v0.31.0, 2.8.3.post1, v3.7.1, 0.12b (AOTriton); not a branch like main or
# release/2.13.
RELEASE_TAG = re.compile(r"^v?(\d+(?:\.\d+)+(?:[a-z]+\d*)?(?:\.post\d+)?)$")


def pin_version(version: Optional[str], track: str, commit: str) -> str:
    if version:
        return version
    tag = RELEASE_TAG.match(track)
    return tag.group(1) if tag else f"0.0.0+g{commit[:12]}"


def version_values(names: Iterable[str], version: str) -> Dict[str, str]:
    return {name: version for name in names}
