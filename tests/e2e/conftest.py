"""Fixtures shared by the end-to-end files Pants runs in one pytest process (a batch: the files
tests/e2e/BUILD gives one `batch_compatibility_tag`)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def batch_store(tmp_path_factory) -> Path:
    """A local store for the copies of every file of this batch: the first file that builds the
    miniature chain (or installs the real workloads' venv wheels) fills it, the others read it
    from there (a cold chain is ~30 s of CPU besides the copy's own pantsd; torch's and triton's
    installs as much). New with each run of the batch, so a case's "this built" is
    still about this run. For files whose cases never depend on the store being empty before
    them: a file that proves a cold build keeps a store of its own."""
    return tmp_path_factory.mktemp("batch-store")


@pytest.fixture
def ws(shared_ws):
    """The copy a file's cases share (its module fixture `shared_ws`, workspace.py's
    `file_copy`), put back after each case (`Workspace.reset`)."""
    yield shared_ws
    shared_ws.reset()
