"""pytest's fixtures for the integration phases (test_integration.py): the work folder every
phase writes to (kept when a check failed, or with TS_KEEP_WORK=1), and the context a phase is
handed (run.py: its checks, the tracer, the paths). Root only: the phases load eBPF programs,
and without root they fail, never skip."""
import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import run as harness  # noqa: E402  (the phases import each other by file name)


def pytest_sessionstart(session):
    if os.geteuid() != 0:
        raise pytest.UsageError("integration tests load eBPF programs: run them as root")
    print(f"integration: with {harness.TOKENSCOPE}", flush=True)


@pytest.fixture(scope="session")
def work(request):
    path = tempfile.mkdtemp(prefix="tokenscope-it-")
    yield path
    if not (harness.failed or request.session.testsfailed or os.environ.get("TS_KEEP_WORK")):
        shutil.rmtree(path, ignore_errors=True)
    else:
        print(f"kept {path} for inspection")


@pytest.fixture(scope="session")
def ctx(work):
    return harness.context(work)


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"integration checks: {harness.passed} passed, "
                                f"{harness.failed} failed")
