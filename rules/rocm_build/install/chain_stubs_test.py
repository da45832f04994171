"""Chain stubs against real pip: a run-time requirement that needs torch gets the chain's torch
(left out of the lock, naming its target), not an index's torch and what that one pulls in."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from rocm_build.install.chain_stubs import CONSTRAINTS, chain_stubs, resolve_args, stub_wheel
from rocm_build.locks import lockfile

CHAIN = [("torch", "2.13.0", "components/torch:wheel"), ("torchvision", "", "components/vision:wheel")]


def pyenv_python() -> str:
    found = sorted(Path.home().glob(".pyenv/versions/3.1[12]*/bin/python3.1[12]"))
    return str(found[0]) if found else "python3"


def index_wheel(directory: Path, name: str, version: str, requires: list) -> None:
    """A wheel as an index serves it: metadata only, with its Requires-Dist."""
    filename, data = stub_wheel(name, version, requires)
    (directory / filename).write_bytes(data)


def test_stub_files_constraints_and_left_out_names() -> None:
    files, left_out = chain_stubs(CHAIN)
    assert sorted(files) == [CONSTRAINTS, "chain-wheels/torch-2.13.0+chain-py3-none-any.whl"]
    assert files[CONSTRAINTS] == b"torch==2.13.0+chain\n"
    assert left_out == {"torch": "provided by the chain: components/torch:wheel", "torchvision": "provided by the chain: components/vision:wheel"}
    # A version with a local label (a prebuilt pin) is used as it is; the bytes do not vary.
    assert chain_stubs([("torch", "2.13.0+rocm10.0.0", "t")])[0][CONSTRAINTS] == b"torch==2.13.0+rocm10.0.0\n"
    assert stub_wheel("flash-attn", "2.8.3+chain") == stub_wheel("flash-attn", "2.8.3+chain")
    assert stub_wheel("flash-attn", "2.8.3+chain")[0] == "flash_attn-2.8.3+chain-py3-none-any.whl"


def test_pip_resolves_a_chain_dependency_to_the_stub(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    # The index has torch 2.13.0 and a newer one, both pulling in a GPU runtime of their own.
    index_wheel(index, "torch", "2.13.0", ["nvidia-runtime-stand-in"])
    index_wheel(index, "torch", "2.14.0", ["nvidia-runtime-stand-in"])
    index_wheel(index, "nvidia-runtime-stand-in", "1.0", [])
    index_wheel(index, "peft-stand-in", "0.21.2", ["torch>=2.0", "six"])
    index_wheel(index, "six", "1.16.0", [])
    files, left_out = chain_stubs(CHAIN)
    sandbox = tmp_path / "sandbox"
    for path, data in files.items():
        (sandbox / path).parent.mkdir(parents=True, exist_ok=True)
        (sandbox / path).write_bytes(data)
    (sandbox / "in.txt").write_text("peft-stand-in\n")
    run = subprocess.run(
        [pyenv_python(), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary=:all:", "--quiet",
         "--report", "report.json", "-r", "in.txt", *resolve_args(), "--no-index", "--find-links", str(index)],
        cwd=sandbox, env={"PATH": os.environ["PATH"], "PIP_CONFIG_FILE": "/dev/null"}, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads((sandbox / "report.json").read_text())
    assert {i["metadata"]["name"]: i["metadata"]["version"] for i in report["install"]} == {
        "peft-stand-in": "0.21.2", "six": "1.16.0", "torch": "2.13.0+chain",
    }  # fmt: skip
    for item in report["install"]:  # pip reports no hash for a file it did not download
        item["download_info"].setdefault("archive_info", {})["hashes"] = {"sha256": "0" * 64}
    dists, left = lockfile.from_pip_report(report, left_out)
    assert sorted(d.name for d in dists) == ["peft-stand-in", "six"]
    assert left == ("torch==2.13.0+chain (provided by the chain: components/torch:wheel)",)
