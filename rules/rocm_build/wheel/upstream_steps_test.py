"""The upstream's own cheap steps: the tree scan over a real fetched tree, what the findings say."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from pants.core.util_rules import system_binaries
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner
from pants.util.frozendict import FrozenDict

from rocm_build import register
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.testutil.git_fixtures import commit_files, init_repo, pins_toml
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRequest
from rocm_build.wheel.chain_versions import ChainVersions, ChainVersionsRequest, release, version_findings
from rocm_build.wheel.upstream_steps import TreeScan, TreeScanRequest, download_findings, hook_findings
from rocm_build.wheel.version_env import pin_version

KERNELS_CMAKE = """\
include(FetchContent)
if (DEFINED ENV{KERNELS_SRC_DIR})
  FetchContent_Declare(kernels SOURCE_DIR $ENV{KERNELS_SRC_DIR})
else()
  FetchContent_Declare(
    kernels
    GIT_REPOSITORY https://github.com/ROCm/triton.git)
endif()
"""
UPSTREAM = {
    "CMakeLists.txt": (
        'set(TORCH_SUPPORTED_VERSION_CUDA "2.9.0")\nset(TORCH_SUPPORTED_VERSION_ROCM "2.9.1")\n'
        "# FetchContent_Declare(old GIT_REPOSITORY https://example.invalid/old.git)\n"
        "ExternalProject_Add(local SOURCE_DIR ${CMAKE_SOURCE_DIR}/sub)\n"
        "execute_process(COMMAND ${GIT_EXECUTABLE} clone https://github.com/ROCm/aiter.git)\n"
    ),
    "cmake/external_projects/kernels.cmake": KERNELS_CMAKE,
    "setup.py": (
        "import os\nimport urllib.request\n\n"
        'if os.getenv("FORCE_BUILD", "FALSE") != "TRUE":\n'
        "    urllib.request.urlretrieve(url, 'prebuilt.whl')\n"
        'install_requires = ["torch==2.12.0", "einops"]\n'
        'assert os.path.exists("csrc/ck"), "csrc/ck is missing, use a source distribution or git clone"\n'
        'subprocess.check_call([sys.executable, "-m", "pip", "install", "-r", "requirements.txt"])\n'
    ),
    # Another project's setup.py in the tree (flash-attention's hopper/): scanned, but this
    # build does not run it.
    "hopper/setup.py": "import urllib.request\nurllib.request.urlretrieve(url, 'fa3.whl')\n",
    "requirements/build/rocm.txt": "torch==2.12.0+rocm7.14.0\ntriton==3.7.1+git0263a6a6\n",
    "requirements/build/cuda.txt": "torch==2.9.0\n",
    # Not scanned: documentation, and library code below the top-level build directories.
    "docs/CMakeLists.txt": "FetchContent_Declare(d URL https://example.invalid/d.tgz)\n",
    "pkg/download.py": "import requests\nrequests.get('https://example.invalid')\n",
}
# A patch that drops the clone: the scan reads the patched file, not the pack's.
PATCH = """\
--- a/CMakeLists.txt
+++ b/CMakeLists.txt
@@ -3,3 +3,2 @@
 # FetchContent_Declare(old GIT_REPOSITORY https://example.invalid/old.git)
 ExternalProject_Add(local SOURCE_DIR ${CMAKE_SOURCE_DIR}/sub)
-execute_process(COMMAND ${GIT_EXECUTABLE} clone https://github.com/ROCm/aiter.git)
"""


@pytest.fixture
def rule_runner() -> RuleRunner:
    return RuleRunner(
        rules=[
            *register.rules(),
            *system_binaries.rules(),
            QueryRule(ResolvedUpstream, [UpstreamRequest]),
            QueryRule(TreeScan, [TreeScanRequest]),
            QueryRule(WheelBuildSpec, [WheelRequest]),
            QueryRule(ChainVersions, [ChainVersionsRequest]),
        ],
        target_types=register.target_types(),
        isolated_local_store=True,
    )


def setup_chain(rule_runner: RuleRunner, tmp_path: Path, patched: bool = False, extra: str = "") -> str:
    repo = init_repo(tmp_path / "up")
    sha = commit_files(repo, UPSTREAM, "upstream")
    torch = init_repo(tmp_path / "torch")
    torch_sha = commit_files(torch, {"setup.py": "from setuptools import setup\nsetup()\n"}, "torch")
    patches = ", patches=['c/p:p']" if patched else ""
    rule_runner.write_files(
        {
            "c/pins.toml": pins_toml(
                up={"url": f"file://{repo}", "track": "v0.31.0", "commit": sha},
                torch={"url": f"file://{torch}", "track": "main", "commit": torch_sha},
            ),
            "c/p/0001-no-clone.patch": PATCH,
            "c/p/BUILD": "patch_set(name='p', sources=['*.patch'])\n",
            "c/BUILD": (
                "rocm_toolchain(name='llvm', provider='llvm', path='/usr/lib/llvm-19')\n"
                f"upstream_repo(name='src', pin='up', pins_file='c/pins.toml'{patches})\n"
                "upstream_repo(name='torch-src', pin='torch', pins_file='c/pins.toml')\n"
                "rocm_wheel(name='torch', source=':torch-src', toolchain=':llvm', kind='torch',"
                " env={'PYTORCH_BUILD_VERSION': '2.13.0'})\n"
                "rocm_wheel(name='up', source=':src', toolchain=':llvm', kind='vllm', dependencies=[':torch'],"
                f" version_env=['SETUPTOOLS_SCM_PRETEND_VERSION']{extra})\n"
            ),
        }
    )
    return sha


def scan_of(rule_runner: RuleRunner) -> dict:
    upstream = rule_runner.request(ResolvedUpstream, [UpstreamRequest(Address("c", target_name="src"), "test")])
    return json.loads(rule_runner.request(TreeScan, [TreeScanRequest(upstream.source, "c:up")]).result)


def test_the_scan_reads_build_files_of_the_patched_tree_only(rule_runner: RuleRunner, tmp_path: Path) -> None:
    setup_chain(rule_runner, tmp_path)
    scan = scan_of(rule_runner)
    assert [(d["file"], d["line"], d["what"]) for d in scan["downloads"]] == [
        ("CMakeLists.txt", 5, "git clone"),
        ("cmake/external_projects/kernels.cmake", 5, "FetchContent_Declare"),  # the SOURCE_DIR one is local
        ("hopper/setup.py", 2, "urllib"),
        ("setup.py", 5, "urllib"),  # not line 7's prose "... or git clone"
        ("setup.py", 8, "pip install"),
    ]
    assert scan["env_vars"] == {
        "CMakeLists.txt": [], "cmake/external_projects/kernels.cmake": ["KERNELS_SRC_DIR"], "hopper/setup.py": [], "setup.py": ["FORCE_BUILD"]
    }
    assert [(v["file"], v["line"], v["name"], v["version"]) for v in scan["versions"]] == [
        ("CMakeLists.txt", 2, "torch", "2.9.1"),
        ("requirements/build/rocm.txt", 1, "torch", "2.12.0+rocm7.14.0"),
        ("requirements/build/rocm.txt", 2, "triton", "3.7.1+git0263a6a6"),
        ("setup.py", 6, "torch", "2.12.0"),
    ]  # requirements/build/cuda.txt names another device's torch: left out
    assert scan["files_scanned"] == 6

    rule_runner.write_files({"c/BUILD": rule_runner.read_file("c/BUILD").replace("pins_file='c/pins.toml')", "pins_file='c/pins.toml', patches=['c/p:p'])", 1)})
    assert "CMakeLists.txt" not in {d["file"] for d in scan_of(rule_runner)["downloads"]}


def test_findings_name_file_line_and_fix(rule_runner: RuleRunner, tmp_path: Path) -> None:
    sha = setup_chain(rule_runner, tmp_path, extra=", archives={}, env={'FORCE_BUILD': 'TRUE'},"
                      " downloads_covered={'setup.py': 'FORCE_BUILD', 'cmake/external_projects/kernels.cmake': 'KERNELS_SRC_DIR',"
                      " 'gone.cmake': 'FORCE_BUILD', 'CMakeLists.txt': 'not run: CUDA only'}, build_requirements=['-r requirements/build/rocm.txt']")
    spec = rule_runner.request(WheelBuildSpec, [WheelRequest(Address("c", target_name="up"))])
    assert spec.env["SETUPTOOLS_SCM_PRETEND_VERSION"] == "0.31.0" and spec.version == "0.31.0"
    where = f"up at {sha}"
    problems, notes = download_findings(spec, where, scan_of(rule_runner))
    assert problems == [
        "c:up: `downloads_covered` maps cmake/external_projects/kernels.cmake to KERNELS_SRC_DIR, but the recipe does not "
        "set KERNELS_SRC_DIR: add it to `archives` (a pinned upstream_archive) or `env` in c/BUILD.",
    ]
    uncovered = {**spec.downloads_covered}
    del uncovered["CMakeLists.txt"]
    assert download_findings(replace(spec, downloads_covered=FrozenDict(uncovered)), where, scan_of(rule_runner))[0][0] == (
        f"c:up: CMakeLists.txt ({where}) would download at build time, which a build cannot (no network): line 5 git clone: "
        "`execute_process(COMMAND ${GIT_EXECUTABLE} clone https://github.com/ROCm/aiter.git)`. Fix: pin what it fetches "
        "(an upstream_archive in `archives`) and map the file to the variable that makes it use that copy in "
        '`downloads_covered` in c/BUILD (or `"not run: <why>"` where this build never reaches it), or patch the download out.'
    )
    assert notes == [
        "setup.py line 8 runs pip (`subprocess.check_call([sys.executable, \"-m\", \"pip\", \"install\", \"-r\", \"requirements.txt\"])`): "
        "it installs from the lock's wheelhouse only",
        f"`downloads_covered` names gone.cmake, which downloads nothing at {where}: drop it",
    ]

    chain = rule_runner.request(ChainVersions, [ChainVersionsRequest(Address("c", target_name="up"))])
    assert chain.versions == (("torch", "2.13.0", "c:torch (`env` PYTORCH_BUILD_VERSION)"),)
    assert dict(chain.provided) == {"torch": "c:torch"}
    versions = version_findings(spec, where, scan_of(rule_runner), chain.versions)
    assert versions[0] == (
        f"c:up: CMakeLists.txt line 2 ({where}) names torch 2.9.1 (`set(TORCH_SUPPORTED_VERSION_ROCM \"2.9.1\")`), but "
        "the chain's torch is 2.13.0 (c:torch (`env` PYTORCH_BUILD_VERSION)). Fix: move one of the pins so they agree, "
        "or patch the line if upstream's is wrong."
    )
    assert [p.split(" (")[0] for p in versions] == [
        "c:up: CMakeLists.txt line 2", "c:up: requirements/build/rocm.txt line 1", "c:up: setup.py line 6"
    ]  # triton: the chain has none to compare with
    # A requirement file the recipe does not read names no version it builds with.
    unread = version_findings(replace(spec, requirements=()), where, scan_of(rule_runner), chain.versions)
    assert [p.split(" (")[0] for p in unread] == ["c:up: CMakeLists.txt line 2", "c:up: setup.py line 6"]

    hook = {
        "file": "pyproject.toml", "ok": False, "needs_git": False, "missing_module": "torch",
        "unmet_requires": [
            {"requirement": "torch == 2.13.0", "name": "torch", "installed": None},
            {"requirement": "setuptools>=77.0.3,<81.0.0", "name": "setuptools", "installed": "75.1.0"},
            {"requirement": "cmake>=3.26.1", "name": "cmake", "installed": None},
        ],
        "tail": ["Traceback (most recent call last):", "ModuleNotFoundError: No module named 'torch'"],
    }  # fmt: skip
    problems, notes = hook_findings(spec, "", where, hook, dict(chain.provided))
    assert problems == [
        f"c:up: pyproject.toml of {where} requires `setuptools>=77.0.3,<81.0.0` to build, but the lock has setuptools "
        "75.1.0. Fix: add `setuptools>=77.0.3,<81.0.0` to `build_requirements` in c/BUILD and relock: "
        "pants lock-build-requirements c:up"
    ]
    assert notes == [
        "pyproject.toml build-system requires `torch == 2.13.0`: c:torch provides it (built first)",
        "the metadata hook of pyproject.toml imports torch, which c:torch provides once built: checked by the build",
    ]
    said = "LookupError: setuptools-scm was unable to detect version for /mnt/rocm-build/tree."
    scm = {**hook, "unmet_requires": [], "missing_module": None, "needs_git": True, "git_said": said, "tail": [said, "..."]}
    (problem,) = hook_findings(spec, "", where, scm, {})[0]
    assert problem == (
        f"c:up: the metadata hook of pyproject.toml ({where}) needs `.git` to know its version, and a build's tree has "
        "none (`version_env` = ['SETUPTOOLS_SCM_PRETEND_VERSION'] did not reach it):\n"
        "        LookupError: setuptools-scm was unable to detect version for /mnt/rocm-build/tree.\n"
        "      Fix: set `version_env` in c/BUILD to the variable the upstream reads instead, e.g. "
        '`version_env=["SETUPTOOLS_SCM_PRETEND_VERSION"]`; it gets 0.31.0 (the pin\'s version: add `version = "..."` '
        "to [up] in c/pins.toml if that is not it)."
    )


def test_a_variable_name_that_is_not_one_is_refused(rule_runner: RuleRunner, tmp_path: Path) -> None:
    setup_chain(rule_runner, tmp_path, extra=", downloads_covered={'setup.py': 'FORCE BUILD'}")
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(WheelBuildSpec, [WheelRequest(Address("c", target_name="up"))])
    assert "c:up: 'FORCE BUILD' in `version_env` or `downloads_covered` is not an environment variable name" in str(e.value)


def test_the_pin_says_the_version() -> None:
    sha = "db9527a46873454610df6dbedf79a36d6bf1a7f6"
    assert pin_version(None, "v0.31.0", sha) == "0.31.0"
    assert pin_version(None, "v2.8.3.post1", sha) == "2.8.3.post1"
    assert pin_version(None, "0.12b", sha) == "0.12b"
    assert pin_version(None, "release/2.13", sha) == "0.0.0+gdb9527a46873"
    assert pin_version(None, "main", sha) == "0.0.0+gdb9527a46873"
    assert pin_version("0.32.0", "main", sha) == "0.32.0"
    assert release("2.13.0+rocm7.14.0") == release("2.13.0a0+gitcf30153") == "2.13.0"
