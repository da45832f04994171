"""Each wheel of a workload test's venv installed once, by content, and linked into every test.

A workload test made its venv in its own sandbox: `pip install` of torch and triton (~1.5 GB
unpacked) took 30 of a choices test's 40 s, for every test and again on every rerun. Here each
wheel is a Process of its own (scripts/install_wheel.sh), keyed by the wheel's bytes, the pinned
pip (subsystems/bootstrap_wheels.py, unpacked once per Python) and the Python's identity, so
Pants runs it once per store (or takes it from the remote cache); its output is an immutable
input of each test that uses the wheel, which Pants materializes once and links into the
sandbox under site/ (kernel_venv.sh puts each on the venv's path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from pants.engine.fs import CreateDigest, Digest, DigestEntries, DigestSubset, FileEntry, MergeDigests, PathGlobs, RemovePrefix
from pants.engine.process import Process, ProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel

from rocm_build.sandbox_scripts import SCRIPTS_DIR, script_files
from rocm_build.subsystems.bootstrap_wheels import BootstrapWheels
from rocm_build.subsystems.host_tools import HostTools
from rocm_build.toolchain.interpreters import PYTHON_LINK, BuildPython
from rocm_build.toolchain.isolation import NetworkIsolation
from rocm_build.subsystems import bootstrap_wheels, host_tools
from rocm_build.toolchain import isolation

SITE = "site"  # where a test's sandbox links each installed wheel: site/<wheel file's stem>
INSTALLED = "installed"
PIP_TREE = "pip-tree"
SCRIPTS = ("install_wheel.sh", "no_network.sh")
# The pinned pip wheel unpacked, its modules byte-compiled with hashes that need no mtime (the
# store keeps none): pip starts in 0.4 s rather than 1.1 s from its zip, for each of up to 74 wheels.
UNPACK = (
    "import compileall, py_compile, sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2]); "
    "compileall.compile_dir(sys.argv[2], quiet=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)"
)


@dataclass(frozen=True)
class PipTreeRequest:
    python: BuildPython


@dataclass(frozen=True)
class PipTree:
    digest: Digest  # the pinned pip's modules and their bytecode for one Python, at the root


@rule(desc="Unpacking the pinned pip for workload tests", level=LogLevel.DEBUG)
async def unpack_pip(request: PipTreeRequest, bootstrap: BootstrapWheels) -> PipTree:
    pip = await Get(Digest, DigestSubset(bootstrap.digest, PathGlobs(["pip-*.whl"])))
    (wheel,) = await Get(DigestEntries, Digest, pip)
    result = await Get(
        ProcessResult,
        Process(
            argv=(request.python.in_sandbox, "-c", UNPACK, wheel.path, PIP_TREE),
            input_digest=pip,
            env={"ROCM_KERNEL_PYTHON_VERSION": request.python.identity},  # the bytecode is this Python's
            output_directories=(PIP_TREE,),
            append_only_caches={request.python.cache_name: PYTHON_LINK},
            description=f"Unpacking {wheel.path} for {request.python.identity}",
            level=LogLevel.DEBUG,
        ),
    )
    return PipTree(await Get(Digest, RemovePrefix(result.output_digest, PIP_TREE)))


@dataclass(frozen=True)
class InstallWheelRequest:
    wheel: FileEntry  # one .whl, at the root
    python: BuildPython


@dataclass(frozen=True)
class InstalledWheel:
    name: str  # the wheel's file name
    digest: Digest  # what `pip install --target` wrote, without console scripts


@dataclass(frozen=True)
class InstalledWheels:
    wheels: Tuple[InstalledWheel, ...]

    def immutable_inputs(self) -> dict:
        """Each wheel's install, by where the test's sandbox finds it."""
        return {f"{SITE}/{w.name[: -len('.whl')]}": w.digest for w in self.wheels}


@rule(desc="Installing a wheel for workload tests", level=LogLevel.DEBUG)
async def install_wheel(request: InstallWheelRequest, tools: HostTools, isolation: NetworkIsolation) -> InstalledWheel:
    # The pinned pip (subsystems/bootstrap_wheels.py), by content as a build's: the install is
    # keyed by what it runs.
    wheel, scripts, pip = await MultiGet(
        Get(Digest, CreateDigest([request.wheel])),
        Get(Digest, script_files(*SCRIPTS)),
        Get(PipTree, PipTreeRequest(request.python)),
    )
    result = await Get(
        ProcessResult,
        Process(
            argv=(tools.bash.path, f"{SCRIPTS_DIR}/install_wheel.sh", request.wheel.path),
            input_digest=await Get(Digest, MergeDigests([wheel, scripts])),
            immutable_input_digests={PIP_TREE: pip.digest},
            env={
                "PATH": "/usr/bin:/bin",
                "ROCM_KERNEL_PYTHON": request.python.in_sandbox,
                "ROCM_KERNEL_PYTHON_VERSION": request.python.identity,  # the interpreter's identity is in the key
                "ROCM_KERNEL_NETWORK": "none" if isolation.enabled else "host",
            },
            output_directories=(INSTALLED,),
            append_only_caches={request.python.cache_name: PYTHON_LINK},
            description=f"Installing {request.wheel.path} for workload tests",
            level=LogLevel.INFO,  # torch's and triton's take most of a minute, once
        ),
    )
    return InstalledWheel(request.wheel.path, await Get(Digest, RemovePrefix(result.output_digest, INSTALLED)))


@dataclass(frozen=True)
class InstallWheelsRequest:
    wheels: Digest  # the venv's wheel files, at the root
    python: BuildPython


@rule(desc="Installing a workload test's wheels", level=LogLevel.DEBUG)
async def install_wheels(request: InstallWheelsRequest) -> InstalledWheels:
    # Each wheel by a process of its own, asked for together: a wheel two venvs share is one install.
    entries = await Get(DigestEntries, Digest, request.wheels)
    files = [e for e in entries if isinstance(e, FileEntry)]
    installed = await MultiGet(Get(InstalledWheel, InstallWheelRequest(f, request.python)) for f in files)
    return InstalledWheels(tuple(installed))


def rules():
    return [*collect_rules(), *bootstrap_wheels.rules(), *host_tools.rules(), *isolation.rules()]
