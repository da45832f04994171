"""`pants run rules:update-pins`: move pins forward from upstream, safely.

For every pin that follows a branch or tag (`track`), resolve it upstream (`git ls-remote`,
or the GitHub API for github.com URLs, honouring GITHUB_TOKEN); `track = "release"` takes the
newest final release among the tags matching the pin's `tags` glob and writes its `version`
too; set derived pins (e.g.
aotriton from torch's `cmake/External/aotriton.cmake`), check that each moved component's
patches still apply, and rewrite the pins file atomically, keeping comments and order.
Nothing is written unless every step succeeded.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import hashlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import requests
from packaging.version import InvalidVersion, Version

from rocm_build.wheel import lockfile
from rocm_build.upstream.archive_pins import ArchivePin, parse_archive_pins
from rocm_build.upstream.pins import (
    FULL_SHA,
    Pin,
    PinsError,
    parse_pins,
    parse_prebuilt_pins,
    set_commit_in_text,
    set_fields_in_text,
)
from rocm_build.programs.prebuilt_update import plan_prebuilt
from rocm_build.sandbox_scripts import load_script

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
GIT_URLS = load_script("git_urls.py")
GITHUB_URL = re.compile(r"^https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?$")
# How PyTorch names its AOTriton commit in cmake/External/aotriton.cmake.
CMAKE_COMMIT = re.compile(r'__AOTRITON_CI_COMMIT\s+"?([0-9a-f]{40})"?')
ANY_SHA = re.compile(r"\b([0-9a-f]{40})\b")
# A file named in a build file: `${PROJECT_SOURCE_DIR}/.ci/docker/aotriton_version.txt`.
REFERENCED_FILE = re.compile(r"([\w${}./-]*[\w-]+\.(?:txt|json|cmake))")


class UpdateError(Exception):
    """A failure that leaves the pins file untouched; the message says what to do."""


@dataclass
class Move:
    name: str
    old: str
    new: str
    why: str
    version: Optional[str] = None  # a release pin's version, from its tag


RELEASE = "release"  # `track = "release"`: the newest tag matching the pin's `tags`


def _git(*args: str, cwd: Optional[str] = None, pin_url: str = "") -> subprocess.CompletedProcess:
    """git on this host, with only the schemes the pin allows (scripts/git_urls.py)."""
    allowed = GIT_URLS.git_protocol_allow(GIT_URLS.schemes_for(pin_url))
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV, "GIT_ALLOW_PROTOCOL": allowed},
        capture_output=True, text=True,
    )


def _redact(text: str) -> str:
    token = os.environ.get("GITHUB_TOKEN")
    return GIT_URLS.redact(text.replace(token, "***") if token else text)


def resolve_with_git(name: str, pin: Pin) -> str:
    refs = [f"refs/heads/{pin.track}", f"refs/tags/{pin.track}", f"refs/tags/{pin.track}^{{}}"]
    result = _git("ls-remote", "--", pin.url, *refs, pin_url=pin.url)
    if result.returncode != 0:
        raise UpdateError(
            f"[{name}] cannot reach {pin.url}: {_redact(result.stderr.strip())}. Check the URL "
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


def resolve_release(name: str, pin: Pin) -> Tuple[str, str]:
    """The commit and version of the newest release tag of the pin (git, on any host)."""
    result = _git("ls-remote", "--tags", "--", pin.url, pin_url=pin.url)
    if result.returncode != 0:
        raise UpdateError(
            f"[{name}] cannot reach {_redact(pin.url)}: {_redact(result.stderr.strip())}. Check the URL "
            "and the network; the pins file was not changed."
        )
    found = newest_release(result.stdout, pin.tags)
    if found is None:
        raise UpdateError(
            f"[{name}] `track = \"{RELEASE}\"`: no tag of {_redact(pin.url)} matches `tags = \"{pin.tags}\"` and "
            "names a final release (e.g. v1.2.3). Fix `tags`, or track a branch; the pins file was not changed."
        )
    version, tag, sha = found
    return sha, str(version)


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


def resolve(name: str, pin: Pin, api: str) -> str:
    m = GITHUB_URL.match(pin.url)
    if m:
        return resolve_with_github(name, pin, api, m.group(1), m.group(2))
    return resolve_with_git(name, pin)


def checkout(pin_name: str, url: str, commit: str, dest: str) -> None:
    steps = [
        ("init", "-q", "--", dest),
        ("-C", dest, "fetch", "-q", "--depth", "1", "--", url, commit),
        ("-C", dest, "checkout", "-q", "--detach", "FETCH_HEAD", "--"),
    ]
    for step in steps:
        result = _git(*step, pin_url=url)
        if result.returncode != 0:
            raise UpdateError(
                f"[{pin_name}] cannot fetch {commit} from {url}: {_redact(result.stderr.strip())}; "
                "the pins file was not changed."
            )


def derived_commit(spec: str, tree: str, name: str) -> str:
    return derived_commit_and_source(spec, tree, name)[0]


def derived_commit_and_source(spec: str, tree: str, name: str) -> Tuple[str, str]:
    """The commit `spec`'s file names, and the file it was read from: when the file holds no
    SHA but names another file of the tree (PyTorch's aotriton.cmake reading
    .ci/docker/aotriton_version.txt), that file is read instead."""
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


def patch_files(patches_root: Path, name: str) -> List[str]:
    directory = patches_root / name
    if not directory.is_dir():
        return []
    return sorted(
        str(p) for p in directory.iterdir() if p.name.endswith((".patch", ".diff", ".edit.toml"))
    )


def patches_apply(name: str, tree: str, patches: Sequence[str]) -> Optional[str]:
    """None if every patch applies to the tree, else the first failure's message."""
    if not patches:
        return None
    script = pkgutil.get_data("rocm_build", "scripts/apply_patches.py")
    assert script is not None
    with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as f:
        f.write(script)
    try:
        result = subprocess.run(
            # The same interpreter the build uses for this script (it needs tomllib, 3.11+).
            [shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin") or "python3", f.name, tree,
             *[os.path.abspath(p) for p in patches]],
            capture_output=True, text=True, env={**os.environ, **GIT_ENV},
        )  # fmt: skip
    finally:
        os.unlink(f.name)
    return None if result.returncode == 0 else result.stderr.strip()


@dataclass
class ArchiveMove:
    name: str
    values: Dict[str, str]  # url, strip_prefix, sha256
    why: str


def download_sha256(url: str) -> str:
    digest = hashlib.sha256()
    with requests.get(url, stream=True, timeout=60) as response:
        response.raise_for_status()
        for chunk in response.iter_content(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def plan_archives(archives: Dict[str, ArchivePin], commits: Dict[str, str], pins: Dict[str, Pin], tree_of) -> List[ArchiveMove]:
    """Derived archives whose source pin (at its new commit) names another file, or that
    were never resolved: new url and strip_prefix, and the sha256 of the downloaded file."""
    moves = []
    for name, archive in archives.items():
        source = (archive.derived_from or "").partition(":")[0]
        if source not in commits:
            continue
        values = archive.derive(derived_commit(archive.derived_from or "", tree_of(source), name))
        if values["url"] == archive.url and archive.sha256:
            continue
        try:
            values["sha256"] = download_sha256(values["url"])
            why = f"{archive.derived_from} at {source} {commits[source][:12]}"
        except requests.RequestException as e:
            values["sha256"] = ""
            why = f"UNRESOLVED, {values['url']} could not be downloaded ({_redact(str(e))})"
        moves.append(ArchiveMove(name, values, why))
    return moves


def plan(args: argparse.Namespace, pins: Dict[str, Pin]) -> List[Move]:
    selected = set(args.only or pins)
    unknown = selected - set(pins) - set(getattr(args, "prebuilt", {}))
    if unknown:
        raise UpdateError(f"--only: no pin named {', '.join(sorted(unknown))} in {args.pins_file}")
    new: Dict[str, str] = {}
    moves: List[Move] = []
    for name, pin in pins.items():
        if pin.derived_from or name not in selected:
            continue
        if pin.track == RELEASE:
            sha, version = resolve_release(name, pin)
            new[name] = sha
            if sha != pin.commit or version != pin.version:
                moves.append(Move(name, pin.commit, sha, f"newest release {version} (tags {pin.tags!r})", version))
            continue
        sha = resolve(name, pin, args.github_api)
        new[name] = sha
        if sha != pin.commit:
            moves.append(Move(name, pin.commit, sha, f"{pin.track} moved"))
    trees = {}
    with tempfile.TemporaryDirectory(prefix="update-pins-") as tmp:

        def tree_of(source: str) -> str:
            if source not in trees:
                trees[source] = os.path.join(tmp, source)
                checkout(source, pins[source].url, new.get(source, pins[source].commit), trees[source])
            return trees[source]

        for name, pin in pins.items():
            if not pin.derived_from:
                continue
            source = pin.derived_from.partition(":")[0]
            if source not in pins:
                raise UpdateError(f"[{name}] `derived_from` names `{source}`, which is not a pin")
            if source not in selected and name not in selected:
                continue
            commit = new.get(source, pins[source].commit)
            sha, read = derived_commit_and_source(pin.derived_from, tree_of(source), name)
            if sha != pin.commit:
                via = "" if read == pin.derived_from.partition(":")[2] else f", read from {read}, which it names"
                moves.append(Move(name, pin.commit, sha, f"{pin.derived_from} at {source} {commit[:12]} names it{via}"))
        commits = {n: new.get(n, p.commit) for n, p in pins.items() if n in selected}
        commits.update({m.name: m.new for m in moves})
        args.archive_moves = plan_archives(args.archives, commits, pins, tree_of)
        if not args.no_patch_check:
            failures = []
            for move in moves:
                patches = patch_files(Path(args.patches_dir), move.name)
                if not patches:
                    continue
                tree = os.path.join(tmp, f"check-{move.name}")
                checkout(move.name, pins[move.name].url, move.new, tree)
                problem = patches_apply(move.name, tree, patches)
                if problem:
                    failures.append((move, problem))
            for move, problem in failures:
                print(f"[{move.name}] patches do not apply to {move.new}:\n  {problem}", file=sys.stderr)
            if failures and not args.force:
                failed = {m.name for m, _ in failures}
                moves = [m for m in moves if m.name not in failed]
                print(
                    f"not moving {', '.join(sorted(failed))}: refresh the patches, or pass --force "
                    "to move the pins anyway", file=sys.stderr,
                )  # fmt: skip
                args.patch_failures = True
    return moves


@dataclass
class LockState:
    path: Path
    pin: str
    commit: str
    target: str  # the rocm_wheel the lock belongs to


def read_locks(locks_dir: Path) -> List[LockState]:
    """The build-requirements locks (see lockfile.py), with the pin commit each was made at."""
    states = []
    for path in sorted(locks_dir.rglob("*.lock")):  # py3.12/<pin>.lock: one per Python
        try:
            lock = lockfile.parse(path.read_text(), str(path))
        except lockfile.LockError as e:
            raise UpdateError(str(e)) from None
        states.append(LockState(path, lock.pin, lock.commit, lock.regenerate.rpartition(" ")[2]))
    return states


def stale_locks(locks: Sequence[LockState], pins: Dict[str, Pin], moves: Sequence[Move]) -> List[LockState]:
    """Locks whose pin is at another commit now, or will be once `moves` are written."""
    after = {name: pin.commit for name, pin in pins.items()}
    after.update({m.name: m.new for m in moves})
    return [lock for lock in locks if lock.pin in after and lock.commit != after[lock.pin]]


def refresh_locks(pants: str, locks: Sequence[LockState]) -> Optional[str]:
    """Regenerates `locks` with a nested Pants (`--concurrent`: this program runs under one)."""
    if not locks:
        return None
    targets = [lock.target for lock in locks]
    print(f"refreshing {len(locks)} lock(s): {pants} lock-build-requirements {' '.join(targets)}")
    result = subprocess.run([pants, "--concurrent", "--no-dynamic-ui", "lock-build-requirements", *targets])
    return None if result.returncode == 0 else f"`{pants} lock-build-requirements {' '.join(targets)}` failed"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="update-pins", description=__doc__.splitlines()[0])
    parser.add_argument("--pins-file", default="components/pins.toml")
    parser.add_argument("--patches-dir", default="patches", help="patches of pin NAME are in DIR/NAME/")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="only these pins")
    parser.add_argument("--check", action="store_true", help="list outdated pins, exit 1 if any; change nothing")
    parser.add_argument("--dry-run", action="store_true", help="print the diff; change nothing")
    parser.add_argument("--force", action="store_true", help="move pins even if their patches fail")
    parser.add_argument("--no-patch-check", action="store_true", help="skip checking that patches apply")
    parser.add_argument("--locks-dir", default="3rdparty/build", help="build-requirements locks (py*/*.lock)")
    parser.add_argument("--archives-file", default="components/archives.toml", help="archive pins (upstream_archive pin=)")
    parser.add_argument("--no-lock-refresh", action="store_true", help="leave the locks of moved pins stale")
    parser.add_argument("--pants", default="./pants", help="the Pants launcher that refreshes locks")
    parser.add_argument(
        "--github-api",
        default=os.environ.get("ROCM_PANTS_GITHUB_API", "https://api.github.com"),
        help="GitHub API base URL (env ROCM_PANTS_GITHUB_API)",
    )
    args = parser.parse_args(argv)
    args.patch_failures = False
    args.archive_moves = []
    path = Path(args.pins_file)
    try:
        text = path.read_text()
        pins = parse_pins(str(path), text)
        locks = read_locks(Path(args.locks_dir))
        archives_path = Path(args.archives_file)
        archives_text = archives_path.read_text() if archives_path.exists() else ""
        args.archives = parse_archive_pins(str(archives_path), archives_text)
        args.prebuilt = parse_prebuilt_pins(str(path), text)
        moves = plan(args, pins)
        prebuilt_moves = plan_prebuilt(args.prebuilt, args.only)
    except (UpdateError, PinsError, OSError) as e:
        print(f"update-pins: {e}", file=sys.stderr)
        return 1
    for move in moves:
        print(f"{move.name}: {move.old[:12]} -> {move.new[:12]} ({move.why})")
    for archive in args.archive_moves:
        print(f"{archive.name}: {archive.values['url'] or '(no url)'} sha256 {archive.values['sha256'][:12] or '-'} ({archive.why})")
    for pmove in prebuilt_moves:
        print(f"{pmove.name}: {pmove.old or '(not resolved)'} -> {pmove.values['version']} {pmove.values['file']} ({pmove.why})")
    if not moves and not args.archive_moves and not prebuilt_moves:
        print("all pins are up to date")
    stale = stale_locks(locks, pins, moves)
    if args.check:
        for lock in stale:
            print(f"{lock.path}: made at {lock.pin} {lock.commit[:12]}, stale; regenerate: "
                  f"pants lock-build-requirements {lock.target}")  # fmt: skip
        return 1 if moves or args.archive_moves or prebuilt_moves or args.patch_failures or stale else 0
    new_text = text
    for move in moves:
        new_text = set_commit_in_text(new_text, move.name, move.new)
        if move.version:
            new_text = set_fields_in_text(new_text, move.name, {"version": move.version}, add_missing=True)
    for pmove in prebuilt_moves:
        new_text = set_fields_in_text(new_text, pmove.table, pmove.values, add_missing=True)
    if args.dry_run:
        sys.stdout.writelines(difflib.unified_diff(
            text.splitlines(True), new_text.splitlines(True), str(path), str(path)))  # fmt: skip
    new_archives = archives_text
    for archive in args.archive_moves:
        new_archives = set_fields_in_text(new_archives, archive.name, archive.values)
    if args.dry_run:
        sys.stdout.writelines(difflib.unified_diff(
            archives_text.splitlines(True), new_archives.splitlines(True), str(archives_path), str(archives_path)))  # fmt: skip
        return 0
    for file, before, after in ((path, text, new_text), (archives_path, archives_text, new_archives)):
        if after != before:
            tmp = file.with_name(f".{file.name}.tmp")
            tmp.write_text(after)
            os.replace(tmp, file)
            print(f"wrote {file}")
    problem = None if args.no_lock_refresh else refresh_locks(args.pants, stale)
    if problem:
        print(f"update-pins: {problem}; the pins are moved, the locks are stale", file=sys.stderr)
    return 1 if args.patch_failures or problem else 0


if __name__ == "__main__":
    sys.exit(main())
