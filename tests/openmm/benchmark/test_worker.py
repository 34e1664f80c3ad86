"""flashschnet.openmm.benchmark.worker (one configuration in a fresh process): its command line prints the
measurement as ``BENCHMARK_RESULT <json>`` on its last line, a failing configuration becomes a one-line error row
(not a crash), and a wrong command line is refused with its usage."""
from __future__ import annotations

import json

from flashschnet.openmm.benchmark import worker


def test_a_failing_configuration_is_printed_as_an_error_row(capsys):
    assert worker.main([json.dumps({"kind": "no such kind", "threads": 1})]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith(worker.MARKER)
    row = json.loads(lines[-1][len(worker.MARKER):])
    assert row["status"] == "error" and row["error"].startswith("KeyError") and "no such kind" in row["error"]
    assert worker.measure({"kind": "energy_forces"}) == {"status": "error", "error": "KeyError: 'threads'"}


def test_the_command_line_takes_one_configuration(capsys):
    assert worker.main([]) == 2 and worker.main(["{}", "{}"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("usage: python -m flashschnet.openmm.benchmark.worker") == 2
