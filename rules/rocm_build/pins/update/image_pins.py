"""update-pins --resolve for build images: each `docker_environment` of a BUILD file whose
`image` is a tag, pinned by the digest the container engine reports for it.

An image is pulled by its tag (`--tls-verify=false` only for a registry on this machine's
loopback) and pinned by the digest the registry reports for the tag (Registry API v2
`Docker-Content-Digest`, the one any machine can pull by), which the pulled image must carry;
or built from its `image_containerfile` where it is made rather than published, and pinned by
the digest the engine reports. The pin is written back into the BUILD file as
`name:tag@sha256:<digest>`, which is what builds use (and refuse without). An image already pinned is checked: if its tag now names another digest,
the pin stays and the change is reported with both digests. Images with an `image_recipe` are
made on each machine and resolved to their id on each run: they are not pinned here.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import requests

DIGEST_MARK = "@sha256:"
LOOPBACK_REGISTRIES = ("127.0.0.1", "localhost", "[::1]")
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)


@dataclass(frozen=True)
class ImageEnv:
    """A docker_environment as its BUILD file writes it."""

    build_file: Path
    name: str
    image: str
    literal: Tuple[int, int]  # where the `image` string literal is in the file's UTF-8 bytes (as ast counts)
    recipe: str = ""
    containerfile: str = ""

    @property
    def address(self) -> str:
        return f"{self.build_file.parent.as_posix()}:{self.name}"

    @property
    def tag(self) -> str:
        return self.image.partition(DIGEST_MARK)[0]

    @property
    def digest(self) -> str:
        return self.image.partition("@")[2]

    @property
    def has_tag(self) -> bool:
        """`name:tag@sha256:...` (a tag to check the pin against), not `name@sha256:...`."""
        return ":" in self.tag.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ImageMove:
    env: ImageEnv
    digest: str
    why: str


class ImageError(Exception):
    """Why an image could not be pinned; the message names the image and the command."""


def image_envs(build_file: Path, text: str) -> List[ImageEnv]:
    """The docker_environment calls of a BUILD file (read as Python, never run)."""
    found = []
    starts = _line_starts(text)
    for node in ast.walk(ast.parse(text, str(build_file))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "docker_environment"):
            continue
        strings = {k.arg: k.value for k in node.keywords if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)}
        if "image" not in strings or "name" not in strings:
            continue
        literal = strings["image"]
        span = (starts[literal.lineno - 1] + literal.col_offset, starts[literal.end_lineno - 1] + literal.end_col_offset)  # type: ignore[operator]
        found.append(ImageEnv(
            build_file, strings["name"].value, literal.value, span,
            strings["image_recipe"].value if "image_recipe" in strings else "",
            strings["image_containerfile"].value if "image_containerfile" in strings else "",
        ))  # fmt: skip
    return found


def _line_starts(text: str) -> List[int]:
    """The byte offset of each line (ast's col_offset counts UTF-8 bytes)."""
    starts, offset = [], 0
    for line in text.encode().splitlines(keepends=True):
        starts.append(offset)
        offset += len(line)
    return starts + [offset]


def engine() -> str:
    found = shutil.which("podman") or shutil.which("docker")
    if not found:
        raise ImageError("no container engine (podman or docker) on PATH: ./setup installs podman")
    return found


def _run(argv: Sequence[str]) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        command = " ".join([Path(argv[0]).name, *argv[1:]])
        raise ImageError(f"`{command}` failed (exit {proc.returncode}): {said[-1] if said else 'no output'}")
    return proc.stdout.strip()


def _loopback(registry: str) -> bool:
    host = registry[: registry.index("]") + 1] if registry.startswith("[") else registry.split(":", 1)[0]
    return host in LOOPBACK_REGISTRIES


def split_reference(tag: str) -> Tuple[str, str, str]:
    """(registry, repository, tag) as engines read a reference: docker.io and library/ implied."""
    first, _, rest = tag.partition("/")
    if not rest or not ("." in first or ":" in first or first == "localhost"):
        first, rest = "docker.io", tag
    if first in ("docker.io", "index.docker.io"):  # Docker Hub: its API host, official images under library/
        first, rest = "registry-1.docker.io", rest if "/" in rest else f"library/{rest}"
    repository, _, name = rest.rpartition(":") if ":" in rest.rsplit("/", 1)[-1] else (rest, "", "latest")
    return first, repository, name


def registry_digest(tag: str) -> str:
    """The digest the registry serves for `tag` (anonymous pull token where it asks for one)."""
    registry, repository, name = split_reference(tag)
    url = f"{'http' if _loopback(registry) else 'https'}://{registry}/v2/{repository}/manifests/{name}"
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    try:
        response = requests.head(url, headers=headers, timeout=30)
        if response.status_code == 401:
            headers["Authorization"] = f"Bearer {_anonymous_token(response.headers.get('WWW-Authenticate', ''))}"
            response = requests.head(url, headers=headers, timeout=30)
        response.raise_for_status()
    except requests.RequestException as e:
        raise ImageError(f"the registry did not say which digest {tag} names ({url}: {e})") from None
    digest = response.headers.get("Docker-Content-Digest", "")
    if not digest.startswith("sha256:"):
        raise ImageError(f"{url} answered without a sha256 Docker-Content-Digest header")
    return digest


def _anonymous_token(challenge: str) -> str:
    """An anonymous pull token, as the registry's `WWW-Authenticate: Bearer realm=...` offers one."""
    fields: Dict[str, str] = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = fields.pop("realm", "")
    if not challenge.startswith("Bearer ") or not realm:
        raise ImageError(f"the registry asks for credentials this program does not have ({challenge!r})")
    response = requests.get(realm, params=fields, timeout=30)
    response.raise_for_status()
    token = response.json().get("token") or response.json().get("access_token")
    if not token:
        raise ImageError(f"{realm} gave no anonymous token")
    return str(token)


def engine_digests(tool: str, tag: str) -> List[str]:
    """The digests the engine holds for its image under `tag` (RepoDigests, digests only)."""
    out = _run([tool, "image", "inspect", "--format", "{{json .RepoDigests}}", tag])
    return [d.partition("@")[2] for d in json.loads(out or "[]")]


def fetch_image(env: ImageEnv, root: Path) -> str:
    """Pulls (or builds) the image of `env` by its tag; returns the digest to pin."""
    tool = engine()
    if env.containerfile and Path(tool).name != "podman":
        raise ImageError("building an image to pin it needs podman (docker reports no digest for a local build): ./setup installs it")
    if env.containerfile:
        containerfile = root / env.containerfile
        _run([tool, "build", "-t", env.tag, "-f", str(containerfile), str(containerfile.parent)])
        return _run([tool, "image", "inspect", "--format", "{{.Digest}}", env.tag])
    tls = ["--tls-verify=false"] if _loopback(split_reference(env.tag)[0]) and Path(tool).name == "podman" else []
    _run([tool, "pull", *tls, env.tag])
    digest = registry_digest(env.tag)
    held = engine_digests(tool, env.tag)
    if digest not in held:
        raise ImageError(f"the registry says {env.tag} is {digest}, but the image the engine pulled is {', '.join(held) or 'without a digest'}")
    return digest


def plan_images(envs: Sequence[ImageEnv], root: Path, only: Optional[Sequence[str]] = None) -> Tuple[List[ImageMove], List[str]]:
    """(moves, problems): each unpinned image pinned; each pinned one whose tag moved, reported."""
    moves: List[ImageMove] = []
    problems: List[str] = []
    # Made on each machine (image_recipe), built here once and pinned, or pinned with no tag:
    # nothing to ask a registry.
    todo = [
        e for e in envs
        if not e.recipe and not (e.digest and (e.containerfile or not e.has_tag)) and (not only or e.name in only)
    ]  # fmt: skip
    for env in todo:
        how = f"built from {env.containerfile}" if env.containerfile else f"pulled {env.tag}"
        try:
            # A pinned image is only checked: does its tag still name the pinned digest?
            digest = registry_digest(env.tag) if env.digest else fetch_image(env, root)
        except ImageError as e:
            problems.append(f"image {env.address} ({env.tag}): {e}")
            continue
        if not env.digest:
            moves.append(ImageMove(env, digest, f"{how}; {'the engine' if env.containerfile else 'the registry'} reports {digest}"))
        elif env.digest != digest:
            problems.append(
                f"image {env.address}: its tag {env.tag} now names {digest}, but {env.build_file} pins {env.digest}; "
                "the pin was kept. If the new image is expected, check it and set the new digest "
                f"(or remove `{DIGEST_MARK}...` from `image` and run update-pins -- --resolve)"
            )
    return moves, problems


def pinned_build_file(text: str, moves: Sequence[ImageMove]) -> str:
    """The BUILD file's text with each moved image's literal replaced (last first, so offsets hold)."""
    data = text.encode()
    for move in sorted(moves, key=lambda m: m.env.literal[0], reverse=True):
        start, end = move.env.literal
        data = data[:start] + f'"{move.env.tag}@{move.digest}"'.encode() + data[end:]
    return data.decode()
