"""Builds inside a container image: the `environment` field of a rocm_wheel.

The environment is declared the Pants way (a `docker_environment` target, its name in
`[environments-preview.names]`, the standard `environment` field), but the build process is
run by us, with the engine's CLI (`podman run` / `docker run`), not by Pants' Docker
runner. Pants 2.17 runs every process of an image in one long-lived container that has
the network and the whole local_execution_root_dir (/tmp by default: every sandbox) mounted;
what a build wrote outside its sandbox would be seen by the next one. Ours is a fresh
container per build, removed after it: `--network=none`, a read-only image with a private
/tmp, and nothing of the host but the sandbox and the named caches the build declares.

Only the build runs in the image. Fetches, archives, the wheelhouse and Pants' own work stay
on the host; the image's toolchain and Python are read by small probes run in the image.
Keys hold the image id (its config digest), never its name or tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from rocm_build.pants_environments import DockerImageField, EnvironmentNameRequest, EnvironmentTarget
from pants.core.util_rules.system_binaries import BinaryPathRequest, BinaryPaths, BinaryPathTest
from pants.engine.environment import LOCAL_ENVIRONMENT_MATCHER, EnvironmentName
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope, ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import DescriptionField
from pants.util.logging import LogLevel
from pants.core.util_rules import system_binaries
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.errors import RocmBuildError, indent, tail
from rocm_build.subsystems.build_isolation import BuildIsolationSubsystem
from rocm_build.subsystems.rocm_build import RocmBuildSubsystem
from rocm_build.toolchain.target_types import ImageContainerfileField, ImageRecipeField
from rocm_build.subsystems.host_tools import SYSTEM_DIRS
from rocm_build.pants_environments import environment_rules

# Where the sandbox is mounted in the container: the same fixed path as namespaced host
# builds use (build_wheel.sh), so compilers see one path everywhere.
FIXED_DIR = "/mnt/rocm-build"
ENGINES = ("podman", "docker")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class ContainerEngine:
    name: str  # podman or docker; "" when none is installed
    path: str


@dataclass(frozen=True)
class BuildImage:
    """The image a build runs in, as this machine has it."""

    environment: str  # the name in [environments-preview.names]
    target: str  # the docker_environment's address
    reference: str  # `image` as written: for people and messages, never in a key
    image_id: str  # sha256:<config digest>: in every key
    repo_digests: Tuple[str, ...]  # sha256:<manifest digest>, without the names they are under
    engine: str  # path of the engine's CLI

    def describe(self) -> str:
        return f"{self.environment} ({self.target}): {self.reference} = {self.image_id}"


@dataclass(frozen=True)
class BuildEnvironmentRequest:
    raw: str  # the target's `environment`
    owner: str


@dataclass(frozen=True)
class BuildEnvironment:
    name: str
    image: Optional[BuildImage]  # None: the build runs on this machine

    def describe(self) -> str:
        return self.image.describe() if self.image else f"{self.name} (this machine)"

    def to_json(self) -> dict:
        if not self.image:
            return {"name": self.name}
        return {"name": self.name, "image_id": self.image.image_id, "repo_digests": list(self.image.repo_digests)}


@rule(desc="Finding the container engine")
async def find_container_engine(isolation: BuildIsolationSubsystem, settings: RocmBuildSubsystem) -> ContainerEngine:
    engine = isolation.engine(settings)
    wanted = (engine,) if engine else ENGINES
    for name in wanted:
        paths = await Get(
            BinaryPaths, BinaryPathRequest(binary_name=name, search_path=SYSTEM_DIRS, test=BinaryPathTest(["--version"]))
        )
        if paths.first_path:
            return ContainerEngine(name, paths.first_path.path)
    return ContainerEngine("", "")


def unpinned_message(env: str, target: str, reference: str, containerfile: str) -> str:
    directory = target.split(":", 1)[0]
    flag = "" if directory == "components" else f" --pins-file {directory}/pins"
    how = (
        f"builds it from {containerfile} (where its base image's registry is reachable)"
        if containerfile
        else "pulls it by its tag (where its registry is reachable)"
    )
    return (
        f"{target}: image {reference} (environment {env}) is not resolved: it is not pinned by digest. "
        f"Run `pants run rules:update-pins -- --resolve{flag}`: it {how} and writes `{reference}@sha256:<digest>` "
        f"as the `image` of {target}. Never write a digest you have not pulled or built."
    )


def missing_message(env: str, target: str, reference: str, recipe: str, description: str, said: str) -> str:
    how = (
        f"build it with its recipe: `{recipe}` (./setup runs it)"
        if recipe
        else f"run `podman pull {reference}` where the registry is reachable"
        + (f" ({description})" if description else "")
    )
    return (
        f"{target}: image {reference} (environment {env}) is not on this machine: "
        f"{how}.\n{indent(tail(said, 3))}"
    )


@rule(desc="Resolving a build environment")
async def build_environment(request: BuildEnvironmentRequest, engine: ContainerEngine) -> BuildEnvironment:
    if request.raw == LOCAL_ENVIRONMENT_MATCHER:
        return BuildEnvironment(LOCAL_ENVIRONMENT_MATCHER, None)
    name = await Get(
        EnvironmentName, EnvironmentNameRequest(request.raw, description_of_origin=f"the `environment` field of {request.owner}")
    )
    env_target = (await Get(EnvironmentTarget, EnvironmentName, name)).val
    if env_target is None or not env_target.has_field(DockerImageField):
        return BuildEnvironment(name.val or LOCAL_ENVIRONMENT_MATCHER, None)
    reference = env_target[DockerImageField].value
    recipe = env_target[ImageRecipeField].value or ""
    env, where = name.val or request.raw, env_target.address.spec
    description = env_target[DescriptionField].value or ""
    if not recipe and not _DIGEST.search(reference):
        raise RocmBuildError(unpinned_message(env, where, reference, env_target[ImageContainerfileField].value or ""))
    if not engine.path:
        raise RocmBuildError(
            f"{where}: environment {env} runs builds in a container, and no container "
            f"engine ({' or '.join(ENGINES)}) is installed: run ./setup, or install podman."
        )
    inspected = await Get(
        FallibleProcessResult,
        Process(
            argv=(engine.path, "image", "inspect", "--format", "{{.Id}} {{range .RepoDigests}}{{.}} {{end}}", reference),
            env={"PATH": "/usr/bin:/bin"},
            description=f"Looking up image {reference}",
            level=LogLevel.DEBUG,
            # Machine state: looked up again by every run, so a rebuilt image is seen.
            cache_scope=ProcessCacheScope.PER_SESSION,
        ),
    )
    if inspected.exit_code != 0:
        raise RocmBuildError(
            missing_message(env, where, reference, recipe, description, inspected.stderr.decode(errors="replace"))
        )
    image_id, *digests = inspected.stdout.decode().split()
    image_id = image_id if image_id.startswith("sha256:") else f"sha256:{image_id}"
    pinned = reference.split("@", 1)[1] if "@" in reference else ""
    if pinned and not any(d.endswith(f"@{pinned}") for d in digests):
        raise RocmBuildError(
            f"{where}: image {reference} (environment {env}) does not match: the "
            f"image this machine has under that name has digests {', '.join(digests) or 'none'}. "
            f"Pull it again where the registry is reachable (`podman pull {reference}`), or run "
            "`pants run rules:update-pins -- --resolve`, which says whether its tag still names that digest."
        )
    manifests = tuple(sorted({d.rpartition("@")[2] for d in digests}))
    return BuildEnvironment(env, BuildImage(env, where, reference, image_id, manifests, engine.path))


def probe_process(image: BuildImage, script: str, args: Tuple[str, ...], description: str) -> Process:
    """A short command in a fresh container of the image, without network. Keyed by the
    image id and the command: the answer is the image's content, so it is cached for good."""
    return Process(
        argv=(image.engine, "run", "--rm", "--network=none", "--read-only", image.image_id, "bash", "-c", script, "probe", *args),
        env={"PATH": "/usr/bin:/bin"},
        description=description,
        level=LogLevel.DEBUG,
    )


# Lists the image's Python interpreters: path, implementation, version, base prefix.
PYTHONS_SCRIPT = """
for p in /usr/local/bin/python3.* /usr/bin/python3.* /opt/python/*/bin/python3.*; do
  case "$p" in *-config|*[a-z]) continue ;; esac
  [ -x "$p" ] && printf '%s ' "$p" && "$p" -c 'import platform, sys; print(platform.python_implementation(), platform.python_version(), sys.base_prefix)'
done
true
"""


@dataclass(frozen=True)
class ImagePythons:
    found: Tuple[Tuple[str, str, str, str], ...]  # (path, implementation, version, prefix)


@rule(desc="Listing the Pythons of an image")
async def image_pythons(image: BuildImage) -> ImagePythons:
    result = await Get(ProcessResult, Process, probe_process(image, PYTHONS_SCRIPT, (), f"Listing the Pythons of {image.reference}"))
    rows = [line.split(maxsplit=3) for line in result.stdout.decode().splitlines()]
    return ImagePythons(tuple((r[0], r[1], r[2], r[3]) for r in rows if len(r) == 4))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *environment_rules.rules(), *system_binaries.rules()])
