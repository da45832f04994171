"""The install set's header steps (package.py's prebuilt_steps): a prebuilt wheel gets a `pip
install --index-url` step only when its requirements on the set's interpreter reach a project
wheels/ does not hold. The wheels are written with the Requires-Dist lines of the real wheels
of components/kernels:build-venv (markers and extras as PyPI ships them) and read by
scripts/elf_links.py as the check reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Sequence

from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST

from rocm_build.goals.package import prebuilt_steps
from rocm_build.install.load_check import needed_elsewhere, set_python, wheel_links
from rocm_build.install.closure import project
from rocm_build.prepare.inputs import BuiltRocmWheel
from rocm_build.testutil.wheel_facts import read_elf_links, wheel

PYPI = "https://pypi.org/simple/"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu/"

# file -> (its Requires-Dist lines, the index of its pin in components/kernels/pins.toml)
KERNELS: Dict[str, tuple] = {
    "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl": (
        [
            "filelock", "typing-extensions>=4.10.0", "setuptools>=77.0.3", "sympy>=1.13.3", "networkx>=2.5.1",
            "jinja2", "fsspec>=0.8.5", 'optree>=0.13.0; extra == "optree"', 'opt-einsum>=3.3; extra == "opt-einsum"',
            'pyyaml; extra == "pyyaml"',
        ],
        TORCH_INDEX,
    ),
    "triton-3.7.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl": (
        [
            'importlib-metadata; python_version < "3.10"', 'cmake<4.0,>=3.20; extra == "build"', 'lit; extra == "build"',
            'numpy; extra == "tests"', 'pytest; extra == "tests"', 'matplotlib; extra == "tutorials"',
        ],
        PYPI,
    ),
    "sympy-1.14.0-py3-none-any.whl": (["mpmath<1.4,>=1.1.0", 'pytest>=7.1.0; extra == "dev"'], PYPI),
    "mpmath-1.3.0-py3-none-any.whl": (['pytest>=4.6; extra == "develop"'], PYPI),
    "jinja2-3.1.6-py3-none-any.whl": (["MarkupSafe>=2.0", 'Babel>=2.7; extra == "i18n"'], PYPI),
    "markupsafe-3.0.4-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl": ([], PYPI),
    "einops-0.8.2-py3-none-any.whl": ([], PYPI),
    "filelock-4.3.1-py3-none-any.whl": ([], PYPI),
    "typing_extensions-4.16.0-py3-none-any.whl": ([], PYPI),
    "networkx-3.6.1-py3-none-any.whl": (['numpy>=1.25; extra == "default"'], PYPI),
    "fsspec-2026.9.0-py3-none-any.whl": (['adlfs; extra == "abfs"'], PYPI),
}
# torch's setuptools comes from the chain's run-time lock (components/flash_attention/BUILD).
RUNTIME = ["setuptools-80.9.0-py3-none-any.whl"]


def header_steps(tmp: Path, names: Sequence[str]) -> List[str]:
    """prebuilt_steps for a set of these kernels wheels (each a prebuilt pin) and the run-time
    wheels, each wheel's requirements read by elf_links.py from its bytes."""
    set_names = [*names, *RUNTIME]
    in_set = {project(n) for n in set_names}
    python = set_python(set_names)
    outside, sources = {}, []
    for name in names:
        requires, index = KERNELS[name]
        found = read_elf_links(wheel(tmp / name, {}, requires), tmp)
        outside[name] = needed_elsewhere(wheel_links(name, found), python, in_set)
        pin = f"kernels-{project(name)}"
        source = {"prebuilt": pin, "index_url": index}
        built = BuiltRocmWheel(
            Address("components/kernels", target_name="build-venv", generated_name=pin), name, "0" * 64, EMPTY_DIGEST,
            EMPTY_DIGEST, json.dumps({"source": source}),
        )
        sources.append((built, source))
    return prebuilt_steps(sources, {}, outside)


def test_a_set_that_holds_every_requirement_has_no_index_step(tmp_path) -> None:
    # Nine of these are pure Python (their METADATA was not read before: each got a step), and
    # triton's one requirement without an extra is for Python < 3.10 only.
    assert header_steps(tmp_path, list(KERNELS)) == []


def test_a_wheel_whose_requirement_is_missing_gets_its_step_and_no_other(tmp_path) -> None:
    # mpmath left out: sympy, which requires it, is installed from its index with it; torch
    # requires sympy, which wheels/ holds, so it needs no step of its own.
    names = [n for n in KERNELS if not n.startswith("mpmath-")]
    assert header_steps(tmp_path, names) == [
        f"# then, the prebuilt sympy and what it requires, from its index: pip install --index-url {PYPI} sympy==1.14.0"
    ]


def test_a_marker_is_evaluated_for_the_sets_interpreter(tmp_path) -> None:
    triton = "triton-3.7.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    found = wheel_links(triton, read_elf_links(wheel(tmp_path / triton, {}, KERNELS[triton][0]), tmp_path))
    assert needed_elsewhere(found, "3.11", {"triton"}) == ()
    assert needed_elsewhere(found, "3.9", {"triton"}) == ("importlib-metadata",)
    # No interpreter named by any wheel: every line without an extra counts.
    assert needed_elsewhere(found, "", {"triton"}) == ("importlib-metadata",)
    assert set_python(["einops-0.8.2-py3-none-any.whl", triton]) == "3.11"
    assert set_python(["einops-0.8.2-py3-none-any.whl"]) == ""
