"""Fixtures shared by the end-to-end files Pants runs in one pytest process (a batch: the files
tests/e2e/BUILD gives one `batch_compatibility_tag`), and where every e2e file's scratch goes."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from e2e.scratch import use_ram_scratch
from e2e.workspace import Workspace, make_fixture_upstreams


def pytest_configure(config) -> None:
    # Before any tmp_path or copy exists: every file of a run's scratch on the RAM disk (scratch.py).
    use_ram_scratch()


@pytest.fixture(scope="session")
def batch_store(tmp_path_factory) -> Path:
    """A local store for the copies of every file of this batch: the first file that builds the
    miniature chain (or installs the real workloads' venv wheels) fills it, the others read it
    from there (a cold chain is ~30 s of CPU besides the copy's own pantsd; torch's and triton's
    installs as much). New with each run of the batch, so a case's "this built" is
    still about this run. For files whose cases never depend on the store being empty before
    them: a file that proves a cold build keeps a store of its own."""
    return tmp_path_factory.mktemp("batch-store")


@pytest.fixture(scope="session")
def batch_copy(tmp_path_factory, batch_store) -> Iterator[Workspace]:
    """The copy every file of this batch borrows in turn (workspace.py's `borrowed`), on
    `batch_store`: one pantsd for the batch, where each file's own cost a Pants start (~12 s of
    CPU) and a walk of the chain. For the same files as `batch_store`, whose cases also never
    depend on a pantsd of their own (a first start, a restart)."""
    root = tmp_path_factory.mktemp("batch-copy")
    workspace = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), batch_store, root / "named")
    yield workspace
    workspace.stop()


@pytest.fixture
def ws(shared_ws):
    """The copy a file's cases share (its module fixture `shared_ws`, workspace.py's
    `file_copy`), put back after each case (`Workspace.reset`)."""
    yield shared_ws
    shared_ws.reset()
