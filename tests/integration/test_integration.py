"""The integration phases (run.py's PHASES), one pytest case each, in the order a whole run
takes them: `run.sh` runs them all, `run.sh --only h2` one (make integration PHASE=h2). A
phase's checks each say what failed and the phase goes on; the case fails if any did, and
lists them."""
import pytest

import run as harness


@pytest.mark.parametrize("phase", list(harness.PHASES))
def test_phase(phase, ctx):
    before = len(harness.FAILURES)
    harness.PHASES[phase](ctx)
    failed = harness.FAILURES[before:]
    assert not failed, f"{len(failed)} checks of {phase} failed:\n" + "\n".join(failed[:40])
