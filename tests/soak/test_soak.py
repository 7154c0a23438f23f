"""The soak, for one minute: worker processes, a producer, kills, stops and SIGTERMs (see run.py).

It runs ``run.py`` in a session of its own, so that whatever happens (a
failure, a timeout, an interrupt) every process it started is ended with
it; the report is shown when it fails, and the run's files are kept in the
test's temporary folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).parent / "run.py"
WALL = 180  # one minute of faults, the drain and the checks take about 70 s on 2 cores


def end_session(proc: subprocess.Popen) -> None:
    """SIGKILL every process of the soak's session (the supervisor and its children), stopped ones too."""
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return


@pytest.mark.soak
def test_soak_one_minute(tmp_path: Path) -> None:
    folder = tmp_path / "soak"
    proc = subprocess.Popen([sys.executable, str(RUN), "--minutes", "1", "--seed", "1", "--dir", str(folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=WALL)
    except subprocess.TimeoutExpired:
        end_session(proc)
        out, _ = proc.communicate()
        pytest.fail(f"the soak did not finish within {WALL}s; its files are in {folder}\n{out}")
    finally:
        end_session(proc)  # nothing it started outlives it, whatever happened
    assert proc.returncode == 0, f"the soak failed (status {proc.returncode}); its files are in {folder}\n{out}"
    assert "RESULT: every invariant held" in out
