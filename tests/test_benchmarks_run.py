"""The benchmark suite runs: ``benchmarks/run.py --small`` exits 0 and writes valid JSON.

It runs at ``--durability off`` so that the disk's fsync time does not make it slow; the
code it runs is the same at every durability.

No figure is checked: timing belongs in docs/benchmarks.md, not in a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_small_benchmark_run_exits_0_and_writes_json_with_every_workload(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--small", "--durability", "off",
                           "--results", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    latest = json.loads((tmp_path / "latest.json").read_text())
    stamped = [p for p in tmp_path.glob("*.json") if p.name != "latest.json"]
    assert len(stamped) == 1 and json.loads(stamped[0].read_text()) == latest
    assert latest["environment"]["cores"] and latest["environment"]["sqlite"] and latest["environment"]["python"]
    assert latest["environment"]["durability"] == "off"
    assert latest["baseline"]["insert_single"] > 0 and latest["baseline"]["life_batched"] > 0
    assert {row["workload"] for row in latest["rows"]} == {"W1", "W2", "W3", "W4", "W5", "W6"}
    assert not [row["case"] for row in latest["rows"] if row["case"].startswith("failed")]
