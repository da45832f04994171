"""Running a fuzz target with atheris: a fixed number of inputs in a test (CI), hours by hand.

A target module defines `test_one_input(data: bytes)`, which feeds the bytes to our parsers
and lets only their intended error types pass, `SEEDS` (inputs that reach deep into the
parser, so a short run gets past the syntax), `RUNS` (how many inputs the suite's run tries)
and `INSTRUMENTED`, the modules whose coverage guides the fuzzer (only ours: instrumenting all
of Pants would take most of a short run). Anything else the parser raises is a crash: libFuzzer
stops and writes the input as `crash-<sha1>` under the artifact prefix.

By hand (hours, with a corpus that grows across runs; crashes land in the artifact prefix):
    mkdir -p /tmp/fuzz/crashes
    pants run tests/fuzz/fuzz_pins.py -- -max_total_time=3600 -artifact_prefix=/tmp/fuzz/crashes/ /tmp/fuzz/pins
(fuzz_index.py, fuzz_patches.py and fuzz_patch_headers.py alike). A crash is an input that raised something other than
the parser's intended error: turn it into a test beside the harness, fix the parser.
"""

from __future__ import annotations

import hashlib
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import atheris


def main(target: types.ModuleType, argv: Sequence[str]) -> None:
    """`python fuzz_x.py [libFuzzer flags] [CORPUS_DIR]`: the seeds are added to the corpus."""
    corpora = [a for a in argv[1:] if not a.startswith("-")]
    if corpora:
        write_seeds(Path(corpora[0]), target.SEEDS)
    prefixes = [a.split("=", 1)[1] for a in argv if a.startswith("-artifact_prefix=")]
    instrument(target.INSTRUMENTED)
    atheris.Setup(list(argv), recording(target.test_one_input, Path(prefixes[-1] if prefixes else ".")))
    atheris.Fuzz()


def instrument(modules: Sequence[types.ModuleType]) -> None:
    """Coverage feedback from every function and method the modules define."""
    for module in modules:
        for value in list(vars(module).values()):
            members = vars(value).values() if isinstance(value, type) else [value]
            for member in members:
                member = getattr(member, "__func__", member)  # classmethods, staticmethods
                if isinstance(member, types.FunctionType) and member.__module__ == module.__name__:
                    atheris.instrument_func(member)


def recording(test_one_input: Callable[[bytes], None], where: Path) -> Callable[[bytes], None]:
    """`test_one_input` that also writes an input that raised to `where/crash-<sha1>` (atheris
    reports the exception, but this libFuzzer build writes no artifact for it)."""

    def run(data: bytes) -> None:
        try:
            test_one_input(data)
        except BaseException:
            (where / f"crash-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
            raise

    return run


def write_seeds(corpus: Path, seeds: Sequence[bytes]) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    for number, seed in enumerate(seeds):
        (corpus / f"seed-{number}").write_bytes(seed)


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    output: str  # libFuzzer's and the crash's text
    crashes: Sequence[Path]  # the inputs that crashed, to turn into regression tests


def fuzz_for(target: types.ModuleType, work: Path) -> Outcome:
    """Fuzzes `target` with its `RUNS` inputs in a forked child (libFuzzer ends its process), its
    seeds, log and any crashing inputs in `work` (a test's tmp_path: pytest keeps its last runs'
    and removes older ones, where a folder of our own in /tmp stayed after every run)."""
    corpus = work / "corpus"
    write_seeds(corpus, target.SEEDS)
    log = work / "fuzz.log"
    # A fixed seed and a number of inputs, not a time: the suite's run is the same inputs every
    # time, however loaded the machine, so a red run is reproducible and never a draw; new ground
    # is for the long runs by hand (above), which take libFuzzer's random seed.
    argv = [target.__name__, "-seed=1", f"-runs={target.RUNS}", "-timeout=10", "-rss_limit_mb=2048",
            f"-artifact_prefix={work}/", str(corpus)]  # fmt: skip
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: only fuzzes, and leaves without running pytest's exit code
        code = 70
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            instrument(target.INSTRUMENTED)
            atheris.Setup(argv, recording(target.test_one_input, work))
            atheris.Fuzz()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8
    return Outcome(code, log.read_text(errors="replace"), sorted(work.glob("crash-*")) + sorted(work.glob("timeout-*")))
