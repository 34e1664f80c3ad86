"""flashschnet.openmm.quantization: what channel-wise 16-bit weights (:func:`flashschnet.quantize`) cost in
accuracy, measured and reported.

* :mod:`.accuracy` -- the measurements: per-channel weight ranges and round-trip errors, energy and force errors
  of each variant on frames, a Langevin run's stability, an NVE run's energy drift (:func:`.accuracy.drift_fit`);
* :mod:`.report` -- the report generator's command line (``python tools/benchmarks/quantization_report.py``, a
  maintainer's tool run from a checkout): runs the measurements in order;
* :mod:`.render` -- the report's Markdown, JSON and PNG plots, and the verdicts against the 1 % target.

Nothing is imported here.
"""
