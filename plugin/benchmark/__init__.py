"""flashschnet.openmm.benchmark: the measurements behind ``flashschnet-benchmark``.

* :mod:`.defaults` -- what is measured when not told otherwise, with no checkout needed: the BPTI structure
  shipped as package data and a CGSchNet built in code (the CGSchNet architecture, seeded random weights);
* :mod:`.measure` -- one configuration: ``energy_forces`` timing and peak memory, or the OpenMM step loop;
* :mod:`.machine` -- what machine the numbers come from;
* :mod:`.report` -- labels, ratios, the memory predictions that skip a configuration, the printed table, the
  JSON file;
* :mod:`.worker` -- one configuration in a fresh process: ``python -m flashschnet.openmm.benchmark.worker
  '<json>'`` prints ``BENCHMARK_RESULT <json>`` as its last line; :func:`.worker.run_worker` starts it.

For the maintainer's tools (``tools/``): the performance model of a GPU step (:mod:`.perf_model`, calibrated by
:mod:`.perf_model_calibration` on the first GPU run); the prepared GPU run (``tools/device/device_checks.py``: the
stages of :mod:`.device_main`, :mod:`.device_stages`, :mod:`.device_timings` and :mod:`.device_martini`, the per-tree
row worker :mod:`.device_rows`, the records and plans :mod:`.device_checks`, the report :mod:`.device_report` and its
tables :mod:`.device_tables`) and OpenMM's share of a step (:mod:`.overhead`: a network force that does nothing);
the threads, sampling and multiple-time-stepping benchmarks (:mod:`.threads`, :mod:`.sampling`, :mod:`.dmts`).

The command line (argument parsing, the loop over configurations, printing) is ``flashschnet.scripts.benchmark``.
Nothing is imported here, so that ``python -m flashschnet.openmm.benchmark.worker`` runs the worker module once.
"""
