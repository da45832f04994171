"""update-pins' choice of a git pin's new commit: where its `track` (a branch or tag) points
upstream (`git ls-remote`, or the GitHub API for github.com URLs, honouring GITHUB_TOKEN);
with `track = "release"`, the newest final release among the tags matching its `tags` glob;
for a derived pin, the commit a file of another pin's tree names: its first full SHA, or with
`#NAME` the ref a recipe line gives (a Dockerfile ARG, a CMake variable; upstream/recipe_values.py),
a full or short SHA, a tag or a branch, resolved in the pin's own repository."""

from __future__ import annotations

import fnmatch
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

import requests
from packaging.version import InvalidVersion, Version

from rocm_build.pins.pin_model import with_values
from rocm_build.pins.tables import FULL_SHA, SHORT_SHA, Pin
from rocm_build.pins.update.host_git import UpdateError, git, redact
from rocm_build.upstream.recipe_values import RecipeValue, recipe_value, split_spec

RELEASE = "release"  # `track = "release"`: the newest tag matching the pin's `tags`
GITHUB_URL = re.compile(r"^https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?$")
# How PyTorch names its AOTriton commit in cmake/External/aotriton.cmake.
CMAKE_COMMIT = re.compile(r'__AOTRITON_CI_COMMIT\s+"?([0-9a-f]{40})"?')
ANY_SHA = re.compile(r"\b([0-9a-f]{40})\b")
# A file named in a build file: `${PROJECT_SOURCE_DIR}/.ci/docker/aotriton_version.txt`.
REFERENCED_FILE = re.compile(r"([\w${}./-]*[\w-]+\.(?:txt|json|cmake))")


@dataclass
class Move:
    name: str
    old: str
    new: str
    why: str
    version: Optional[str] = None  # a release pin's version, from its tag
    track: Optional[str] = None  # a pin derived from a recipe line: the ref the line names


def resolve_ref(name: str, pin: Pin, ref: str, api: str) -> str:
    """The full commit `ref` (a full or short SHA, a tag, a branch) names in the pin's repository."""
    if FULL_SHA.match(ref):
        return ref
    if SHORT_SHA.match(ref) and not GITHUB_URL.match(pin.url):  # the GitHub API takes short SHAs
        return resolve_short_sha(name, pin.url, ref)
    return resolve(name, with_values(pin, {"track": ref}), api)


def resolve_short_sha(name: str, url: str, short: str) -> str:
    """A short SHA as git expands it, in a blob-less fetch of the repository's branches and tags."""
    with tempfile.TemporaryDirectory(prefix="update-pins-sha-") as tmp:
        steps = [
            ("init", "-q", "--", tmp),
            ("-C", tmp, "fetch", "-q", "--filter=blob:none", "--", url, "+refs/heads/*:refs/remotes/up/*", "+refs/tags/*:refs/tags/*"),
            ("-C", tmp, "rev-parse", "--verify", "-q", f"{short}^{{commit}}"),
        ]
        for step in steps:
            result = git(*step, pin_url=url)
            if result.returncode != 0:
                raise UpdateError(
                    f"[{name}] the short SHA {short} names no commit of {redact(url)} (git {step[2] if step[0] == '-C' else step[0]}: "
                    f"{redact(result.stderr.strip()) or 'not found'}); the pins file was not changed."
                )
        return result.stdout.strip()


def derived_value(spec: str, tree: str, name: str) -> RecipeValue:
    """The recipe line `spec` (`pin:path#NAME`) names, read from the tree."""
    source, path, key = split_spec(spec)
    try:
        text = Path(tree, path).read_text()
    except OSError:
        raise UpdateError(f"[{name}] `derived_from = \"{spec}\"`: {path} is not in {source}'s tree") from None
    found = recipe_value(path, text, key)
    if found is None:
        raise UpdateError(f"[{name}] `derived_from = \"{spec}\"`: {path} of {source} does not set {key}")
    return found


def resolve(name: str, pin: Pin, api: str) -> str:
    m = GITHUB_URL.match(pin.url)
    if m:
        return resolve_with_github(name, pin, api, m.group(1), m.group(2))
    return resolve_with_git(name, pin)


def resolve_with_git(name: str, pin: Pin) -> str:
    refs = [f"refs/heads/{pin.track}", f"refs/tags/{pin.track}", f"refs/tags/{pin.track}^{{}}"]
    result = git("ls-remote", "--", pin.url, *refs, pin_url=pin.url)
    if result.returncode != 0:
        raise UpdateError(
            f"[{name}] cannot reach {pin.url}: {redact(result.stderr.strip())}. Check the URL "
            "and the network; the pins file was not changed."
        )
    found = dict(line.split("\t")[::-1] for line in result.stdout.splitlines() if "\t" in line)
    # An annotated tag's peeled commit wins over the tag object.
    for ref in reversed(refs):
        if ref in found:
            return found[ref]
    raise UpdateError(
        f"[{name}] `track = \"{pin.track}\"` is neither a branch nor a tag at {pin.url}. Fix "
        "`track` in the pins file; the pins file was not changed."
    )


def resolve_with_github(name: str, pin: Pin, api: str, owner: str, repo: str) -> str:
    headers = {"Accept": "application/vnd.github+json"}
    if os.environ.get("GITHUB_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['GITHUB_TOKEN']}"
    url = f"{api.rstrip('/')}/repos/{owner}/{repo}/commits/{pin.track}"
    try:
        response = requests.get(url, headers=headers, timeout=30)
    except requests.RequestException as e:
        raise UpdateError(
            f"[{name}] cannot reach the GitHub API at {api}: {type(e).__name__}. Check the "
            "network or --github-api; the pins file was not changed."
        ) from None
    if response.status_code in (403, 429) and (
        response.headers.get("X-RateLimit-Remaining") == "0" or "rate limit" in response.text.lower()
    ):
        reset = response.headers.get("X-RateLimit-Reset", "unknown")
        raise UpdateError(
            f"[{name}] the GitHub API rate limit is exhausted (HTTP {response.status_code}, resets "
            f"at epoch {reset}). Set GITHUB_TOKEN to a token for a higher limit, or retry later; "
            "the pins file was not changed."
        )
    if response.status_code in (404, 422):
        raise UpdateError(
            f"[{name}] `track = \"{pin.track}\"` is not a branch or tag of {owner}/{repo} "
            f"(HTTP {response.status_code}). Fix `track`; the pins file was not changed."
        )
    if response.status_code != 200:
        raise UpdateError(
            f"[{name}] the GitHub API answered HTTP {response.status_code} for {owner}/{repo}; "
            "the pins file was not changed."
        )
    sha = response.json().get("sha", "")
    if not FULL_SHA.match(sha):
        raise UpdateError(f"[{name}] the GitHub API gave no commit SHA for {pin.track}")
    return sha


def resolve_release(name: str, pin: Pin) -> Tuple[str, str]:
    """The commit and version of the newest release tag of the pin (git, on any host)."""
    result = git("ls-remote", "--tags", "--", pin.url, pin_url=pin.url)
    if result.returncode != 0:
        raise UpdateError(
            f"[{name}] cannot reach {redact(pin.url)}: {redact(result.stderr.strip())}. Check the URL "
            "and the network; the pins file was not changed."
        )
    found = newest_release(result.stdout, pin.tags)
    if found is None:
        raise UpdateError(
            f"[{name}] `track = \"{RELEASE}\"`: no tag of {redact(pin.url)} matches `tags = \"{pin.tags}\"` and "
            "names a final release (e.g. v1.2.3). Fix `tags`, or track a branch; the pins file was not changed."
        )
    version, tag, sha = found
    return sha, str(version)


def newest_release(ls_remote: str, pattern: str) -> Optional[Tuple[Version, str, str]]:
    """(version, tag, commit) of the newest final release among `git ls-remote --tags` lines
    (`<sha>\trefs/tags/<name>`, with `<name>^{}` for an annotated tag's commit)."""
    objects: Dict[str, str] = {}
    for line in ls_remote.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.startswith("refs/tags/"):
            objects[ref[len("refs/tags/"):]] = sha
    releases = []
    for tag, sha in objects.items():
        if tag.endswith("^{}") or not fnmatch.fnmatchcase(tag, pattern):
            continue
        try:
            version = Version(tag[1:] if tag[:1] in "vV" else tag)
        except InvalidVersion:
            continue
        if not (version.is_prerelease or version.is_devrelease or version.local):
            releases.append((version, tag, objects.get(f"{tag}^{{}}", sha)))
    return max(releases) if releases else None


def derived_commit(spec: str, tree: str, name: str) -> str:
    return derived_commit_and_source(spec, tree, name)[0]


def derived_commit_and_source(spec: str, tree: str, name: str) -> Tuple[str, str]:
    """The commit `spec`'s file names, and the file it was read from: when the file holds no
    SHA but names another file of the tree (PyTorch's aotriton.cmake reading
    .ci/docker/aotriton_version.txt), that file is read instead."""
    if "#" in spec:  # one line of a recipe: for an archive's {hash}, it must be a full SHA
        line = derived_value(spec, tree, name)
        if not FULL_SHA.match(line.value):
            raise UpdateError(f"[{name}] `derived_from = \"{spec}\"`: {line.where(spec.partition(':')[0])} names {line.value!r}, not a full commit SHA")
        return line.value, line.path
    _, _, path = spec.partition(":")
    try:
        text = Path(tree, path).read_text()
    except OSError:
        raise UpdateError(f"[{name}] `derived_from = \"{spec}\"`: {path} is not in that commit") from None
    m = CMAKE_COMMIT.search(text) or ANY_SHA.search(text)
    if m:
        return m.group(1), path
    for referenced in REFERENCED_FILE.findall(text):
        found = _find_in_tree(tree, referenced)
        if found:
            m = ANY_SHA.search(Path(tree, found).read_text())
            if m:
                return m.group(1), found
    raise UpdateError(f"[{name}] `derived_from = \"{spec}\"`: no commit SHA in {path}, nor in a file it names")


def _find_in_tree(tree: str, reference: str) -> Optional[str]:
    """A path as a build file spells it (`${VAR}/../.ci/docker/x.txt`), found in the tree."""
    parts = [p for p in reference.split("/") if p and p not in (".", "..") and not p.startswith("$")]
    for start in range(len(parts)):
        candidate = "/".join(parts[start:])
        if Path(tree, candidate).is_file():
            return candidate
    return None
