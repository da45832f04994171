"""`pants run rules:patch-workspace`: the `patch-workspace` goal by pin name, for scripts.

    pants run rules:patch-workspace -- checkout mini-vllm   # ./pants patch-workspace tests/mini/vllm:src
    (edit, `git commit` in work/mini-vllm with Why:, Upstream:, Drop when: in the message)
    pants run rules:patch-workspace -- save mini-vllm       # ./pants patch-workspace --save tests/mini/vllm:src

A thin entry over the goal (goals/patch_workspace.py), the one implementation: a nested Pants
finds the upstream_repo or upstream_archive target whose `pin` is NAME (`peek`), and a second
runs the goal on it, so the workspace, the patch files and the directory a save writes are the
target's, as the build reads them. `--concurrent`: this program itself runs under a Pants.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import List, Optional, Sequence

UPSTREAM_TYPES = "upstream_repo,upstream_archive"


class NoTarget(Exception):
    pass


def nested(pants: str) -> List[str]:
    return [pants, "--concurrent", "--no-dynamic-ui"]


def peek_command(pants: str) -> List[str]:
    return [*nested(pants), f"--filter-target-type={UPSTREAM_TYPES}", "peek", "::"]


def target_of(peeked: str, pin: str) -> str:
    """The address of the one upstream target whose `pin` is `pin`, from `peek`'s JSON."""
    found = sorted(t["address"] for t in json.loads(peeked) if t.get("pin") == pin)
    if not found:
        raise NoTarget(f"no upstream_repo or upstream_archive target has pin={pin!r}")
    if len(found) > 1:
        raise NoTarget(
            f"pin {pin} is the source of {len(found)} targets ({', '.join(found)}); "
            f"name the one to use: ./pants patch-workspace {found[0]}"
        )
    return found[0]


def goal_command(pants: str, action: str, address: str, patch_set: Optional[str]) -> List[str]:
    save = ["--save"] if action == "save" else []
    chosen = [f"--patch-workspace-patch-set={patch_set}"] if patch_set else []
    return [*nested(pants), "patch-workspace", *save, *chosen, address]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="patch-workspace", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["checkout", "save"])
    parser.add_argument("pin", help="the `pin` of an upstream_repo or upstream_archive target, e.g. mini-vllm")
    parser.add_argument("--patch-set", help="with save, for a target with several patch sets: the one to write to")
    parser.add_argument("--pants", default="./pants")
    args = parser.parse_args(argv)
    peeked = subprocess.run(peek_command(args.pants), stdout=subprocess.PIPE, text=True)
    if peeked.returncode != 0:
        print(f"patch-workspace: `{args.pants} peek` of the upstream targets failed", file=sys.stderr)
        return 1
    try:
        address = target_of(peeked.stdout, args.pin)
    except NoTarget as e:
        print(f"patch-workspace: {e}", file=sys.stderr)
        return 1
    command = goal_command(args.pants, args.action, address, args.patch_set)
    print(" ".join(command[:1] + command[3:]), flush=True)  # without the nested run's own flags
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
