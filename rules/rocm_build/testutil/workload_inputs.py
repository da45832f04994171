"""What the workload tests (rules/rocm_build/workloads/) get from other packages, made up from
the address alone: an archive's and a repository's patched tree, prebuilt and built wheels, a
wheel's install, the Python, the host tools and the network setting. workloads/'s tests run
that package's own rules on these stand-ins, so a test there exercises the package, not the
fetch and build pipeline (whose own tests run it for real)."""

from __future__ import annotations

import json
from typing import Any, Iterable, Type

from pants.core.target_types import GenericTarget
from pants.core.util_rules import source_files
from pants.core.util_rules.system_binaries import BashBinary, BinaryPath
from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST, CreateDigest, Digest, FileContent
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import InferDependenciesRequest, Target
from pants.engine.unions import UnionRule
from pants.testutil.rule_runner import RuleRunner

from rocm_build import declared
from rocm_build.graph import edges
from rocm_build.prebuilt import target_generator
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.toolchain.isolation import NetworkIsolation
from rocm_build.upstream import sources

from rocm_build.pins.tables import Pin
from rocm_build.prebuilt.target_generator import PrebuiltWheelsTarget
from rocm_build.prebuilt.wheel_rules import FetchedPrebuilt, PrebuiltRequest
from rocm_build.prepare.inputs import BuiltRocmWheel
from rocm_build.upstream.archive_source import ArchiveSourcePin
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.upstream.patching import PatchFile
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest, SourceTree
from rocm_build.upstream.target_types import PatchSetTarget, PrebuiltWheelTarget, UpstreamArchiveTarget, UpstreamRepoTarget
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.wheel import source_kind
from rocm_build.wheel.build_spec import WheelRequest
from rocm_build.wheel.target_types import RocmWheelTarget
from rocm_build.workloads import choices, dependency_inference, installed, kernels, sandbox, source, venv
from rocm_build.workloads.installed import InstalledWheel, InstallWheelRequest
from rocm_build.workloads import register as workloads

PYTHON = BuildPython("/usr/bin/python3.11", "CPython", "3.11.2", "/usr")
BASH = "/bin/bash"
PATCHES = (PatchFile("patches/up/0001-first.edit.toml", "1" * 64), PatchFile("patches/up/0002-second.diff", "2" * 64))
BROKEN = "broken"  # a rocm_wheel of this name did not build
SDIST_PIN = ArchiveSourcePin("https://archive.invalid/up-1.0.tar.gz", "0" * 64)
REPO_PIN = Pin(url="file:///up", track="main", commit="a" * 40)
# What a built wheel's build info records of its source (prepare/inputs.py), for every stand-in.
BUILT_SOURCE = {"pin": "up", "url": REPO_PIN.url, "commit": REPO_PIN.commit, "patches": [{"path": PATCHES[0].path, "sha256": PATCHES[0].sha256}]}

def wheel_name(address: Address) -> str:
    return f"{(address.generated_name or address.target_name).replace('-', '_')}-1.0-py3-none-any.whl"

def one_file(path: str, address: Address) -> CreateDigest:
    return CreateDigest([FileContent(path, f"of {address.spec}\n".encode())])

@rule
async def upstream_stand_in(request: UpstreamRequest) -> ResolvedUpstream:
    # The archive (`:sdist` in the tests' BUILD files) carries both patch sets, the repo the first.
    patches = PATCHES if request.address.target_name == "sdist" else PATCHES[:1]
    sdist = request.address.target_name == "sdist"
    pin, identity_key = (SDIST_PIN, "sha256") if sdist else (REPO_PIN, "commit")
    return ResolvedUpstream(request.address, "up", pin, patches, SourceTree(EMPTY_DIGEST, EMPTY_DIGEST), "", 0, identity_key)

@rule
async def merged_tree_stand_in(request: MergedTreeRequest) -> MergedTree:
    # As the real one: the patched tree under TREE_DIR/.
    return MergedTree(await Get(Digest, CreateDigest([FileContent(f"{TREE_DIR}/up/__init__.py", b"# from git\n")])))

@rule
async def prebuilt_stand_in(request: PrebuiltRequest) -> FetchedPrebuilt:
    return FetchedPrebuilt(None, await Get(Digest, one_file(wheel_name(request.address), request.address)))  # type: ignore[arg-type]

@rule
async def built_wheel_stand_in(request: WheelRequest) -> BuiltRocmWheel:
    """A built wheel whose closure holds a wheel below it (`<name>_below`)."""
    address = request.address
    if address.target_name == BROKEN:
        return BuiltRocmWheel(address, None, "", EMPTY_DIGEST, EMPTY_DIGEST, "{}", error="its recipe failed (see the log)")
    below = address.create_generated(f"{address.target_name}-below")
    files = await MultiGet(Get(Digest, one_file(wheel_name(a), a)) for a in (address, below))
    info = json.dumps({"source": BUILT_SOURCE})
    built = [BuiltRocmWheel(a, wheel_name(a), "", f, EMPTY_DIGEST, info) for a, f in zip((address, below), files)]
    return BuiltRocmWheel(address, built[0].wheel_name, "", built[0].wheel, EMPTY_DIGEST, info, closure=tuple(built))

@rule
async def installed_wheel_stand_in(request: InstallWheelRequest) -> InstalledWheel:
    """A wheel's install (a pip process, installed_test.py): one file named for the wheel."""
    name = request.wheel.path
    return InstalledWheel(name, await Get(Digest, CreateDigest([FileContent(f"{name.split('-')[0]}/__init__.py", f"# {name}\n".encode())])))

@rule
async def python_stand_in(request: BuildPythonRequest) -> BuildPython:
    return PYTHON

@rule
async def host_tools_stand_in() -> HostTools:
    return HostTools(git=BinaryPath("/usr/bin/git"), bash=BashBinary(BASH), python=BinaryPath("/usr/bin/python3"))

@rule
async def isolation_stand_in() -> NetworkIsolation:
    return NetworkIsolation(enabled=True)

def workload_rule_runner(*queries: Any, target_types: Iterable[Type[Target]] = ()) -> RuleRunner:
    """workloads/'s rules, the stand-ins above, the two small rules of graph/ it reads (the
    declared dependencies, a file's owner) and the prebuilt_wheels generator, with `queries`;
    the target types a test's BUILD files write, and `target_types`."""
    return isolated_rule_runner(
        rules=[
            # workloads/' own rules, not their rules() (which bring the real ones of what the
            # stand-ins below stand for: two sources of one product).
            *(r for m in (dependency_inference, venv, source, sandbox, kernels, choices) for r in collect_rules(vars(m))),
            installed.install_wheels,
            UnionRule(InferDependenciesRequest, dependency_inference.InferWorkloadEdges),
            *venv.kinds(),
            *kernels.TritonKernelTestRequest.rules(),
            *choices.UpstreamChoicesTestRequest.rules(),
            *source_files.rules(),
            edges.find_plugin_inputs,
            *collect_rules(),
            *declared.rules(),
            *sources.rules(),  # what kind of source a target is: the real rules, from its fields
            *source_kind.rules(),
            edges.find_input_file_owners,
            *target_generator.rules(),
            *queries,
        ],
        target_types=[
            *workloads.target_types(),
            GenericTarget,
            PatchSetTarget,
            PrebuiltWheelTarget,
            PrebuiltWheelsTarget,
            RocmWheelTarget,
            UpstreamArchiveTarget,
            UpstreamRepoTarget,
            *target_types,
        ],
    )
