"""What vLLM 0.31.0's own ROCm recipe names, read by the code derived pins use from its sdist
(PyPI, pinned by sha256 in components/archives/vllm-sdist.toml, mirrored by ./setup)."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from rocm_build.pins.archive_pins import parse_archive_pins
from rocm_build.pins.files import read_pins_files
from rocm_build.pins.update.commits import derived_commit
from rocm_build.upstream.recipe_values import recipe_value, split_spec

CACHE = Path(os.environ.get("ROCM_PANTS_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocm-pants")
SDIST = CACHE / "kernel-mirror/files/vllm-0.31.0.tar.gz"


@pytest.fixture(scope="module")
def vllm(tmp_path_factory) -> Path:
    assert SDIST.is_file(), f"{SDIST} is missing: ./setup mirrors it"
    dest = tmp_path_factory.mktemp("vllm")
    with tarfile.open(SDIST) as tar:
        wanted = [m for m in tar.getmembers() if m.name.split("/", 1)[-1] in (
            "docker/Dockerfile.rocm_base", "requirements/build/rocm.txt", "cmake/external_projects/triton_kernels.cmake")]
        tar.extractall(dest, members=wanted)  # fmt: skip
    return dest / "vllm-0.31.0"


def value(tree: Path, spec: str) -> str:
    _, path, name = split_spec(spec)
    found = recipe_value(path, (tree / path).read_text(), name)
    assert found is not None, spec
    return found.value


def test_the_lines_vllms_rocm_recipe_builds_the_chain_from(vllm: Path) -> None:
    dockerfile = "vllm:docker/Dockerfile.rocm_base#"
    assert {name: value(vllm, dockerfile + name) for name in (
        "PYTORCH_BRANCH", "TRITON_BRANCH", "PYTORCH_VISION_BRANCH", "PYTORCH_AUDIO_BRANCH", "FA_BRANCH", "AITER_BRANCH")} == {
        "PYTORCH_BRANCH": "733fca1", "TRITON_BRANCH": "669b31a", "PYTORCH_VISION_BRANCH": "v0.28.0",
        "PYTORCH_AUDIO_BRANCH": "v2.11.0", "FA_BRANCH": "0e60e394", "AITER_BRANCH": "v0.1.23",
    }  # fmt: skip
    requirements = "vllm:requirements/build/rocm.txt#"
    assert [value(vllm, requirements + n) for n in ("torch", "torchvision", "triton", "amdsmi")] == [
        "2.12.0+rocm7.14.0", "0.27.0+rocm7.14.0", "3.7.1+git0263a6a6", "7.0.2"
    ]


def test_the_triton_kernels_archive_is_the_one_vllms_cmake_names(vllm: Path) -> None:
    archive = read_pins_files(Path("components/archives")).parse(parse_archive_pins)["vllm-triton-kernels"]
    commit = derived_commit(archive.derived_from or "", str(vllm), "vllm-triton-kernels")
    assert commit == "669b31acc1dd1b3fd93286afd5db67f65d9f7557"
    assert archive.derive(commit) == {"url": archive.url, "strip_prefix": archive.strip_prefix}


@pytest.mark.parametrize(
    "path, text, name, expected",
    [
        ("Dockerfile", "ARG X='v1' # quoted\n", "X", "v1"),
        ("Dockerfile", "arg X=v2\nARG X=v3\n", "X", "v2"),
        ("Dockerfile", "ARG x=v2\n", "X", None),  # ARG names are case-sensitive
        ("a.cmake", '# set(TAG "old")\nunset(TAG)\nSET(TAG "new")\n', "TAG", "new"),
        ("CMakeLists.txt", 'FetchContent_Declare(\n  fmt\n  GIT_REPOSITORY x\n  GIT_TAG 10.2.1\n)\n', "fmt", "10.2.1"),
        ("requirements.txt", "Torch_Vision[extra] == 0.27.0 ; python_version>'3'\n", "torch.vision", "0.27.0"),  # PEP 503 names
    ],
)
def test_what_a_recipe_line_gives(path: str, text: str, name: str, expected) -> None:
    found = recipe_value(path, text, name)
    assert (found.value if found else None) == expected
