"""What a wheel will require at run time, against what its install set will hold."""

from __future__ import annotations

from rocm_build.install.requires_check import requires_findings

OWNER, BUILD, HOOK = "components/vllm:wheel", "components/vllm/BUILD", "setup.py"


def findings(requires, runtime, chain=("torch", "torchvision", "triton")):
    return requires_findings(OWNER, BUILD, HOOK, requires, chain, runtime)


def test_what_the_chain_provides_or_the_requirements_ask_for_is_satisfied() -> None:
    requires = [
        "torch==2.13.0",  # the chain's, at whatever version it builds
        "Flash_Attn",  # names compare as PEP 503 names
        "numba==0.65.0",  # vLLM's "numba == 0.65.0 # Required for ..." once setuptools read it
        'fastapi[standard]<0.137.0,>=0.133.0',
        'six>=1.16.0; python_version > "3.11"',
        "amdsmi",  # from TheRock's SDK (sdk_modules.py)
    ]
    runtime = ["numba == 0.65.0", "fastapi[standard] >= 0.133.0, < 0.137.0", "six>=1.16.0; python_version > '3.11'"]
    assert findings(requires, runtime, chain=("torch", "flash-attn", "amdsmi")) == []


def test_a_requirement_nobody_asks_for_is_named_with_the_fix() -> None:
    assert findings(["transformers<5.18.0,>=5.10.4"], ["numba==0.65.0"]) == [
        "components/vllm:wheel: its wheel will require `transformers<5.18.0,>=5.10.4` (Requires-Dist, from the metadata "
        "hook of setup.py), which its install set lacks: nothing in its chain provides transformers and no "
        "`runtime_requirements` asks for it. Fix: add `transformers<5.18.0,>=5.10.4` to `runtime_requirements` in "
        "components/vllm/BUILD and relock: pants lock-runtime-requirements components/vllm:wheel"
    ]


def test_a_requirement_asked_for_with_another_specifier_or_fewer_extras() -> None:
    problems = findings(["transformers>=5.20", "fastapi[standard]>=0.133"], ["transformers>=5.10.4,<5.18.0", "fastapi>=0.133"])
    assert problems == [
        "components/vllm:wheel: its wheel will require `transformers>=5.20` (Requires-Dist, from the metadata hook of "
        "setup.py), but the `runtime_requirements` of its chain ask for `transformers<5.18.0,>=5.10.4`, so its lock may "
        "pin a version the wheel refuses. Fix: make the entry `transformers>=5.20` in components/vllm/BUILD and relock: "
        "pants lock-runtime-requirements components/vllm:wheel",
        "components/vllm:wheel: its wheel will require `fastapi[standard]>=0.133` (Requires-Dist, from the metadata hook "
        "of setup.py), but the `runtime_requirements` of its chain ask for `fastapi>=0.133`, so its lock may pin a "
        "version the wheel refuses. Fix: make the entry `fastapi[standard]>=0.133` in components/vllm/BUILD and relock: "
        "pants lock-runtime-requirements components/vllm:wheel",
    ]
