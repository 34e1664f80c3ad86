"""Parallel tempering and replica ensembles: walkers in blocks of packed Contexts, on one process or on Dask.

* :mod:`.run` -- an ensemble run from start to finish (:func:`~.run.run_ensemble`; the CG run hands it the builder);
* :mod:`flashschnet.openmm.ladder` -- the temperature ladder (``--temperatures``), re-exported here;
* :mod:`.exchange` -- the Metropolis swaps (:class:`Exchanger`);
* :mod:`.integrator` -- Langevin (middle scheme) with a temperature per particle;
* :mod:`.block` -- one packed Context of walkers (:class:`WalkerBlock`), its trajectories and checkpoints (the
  plain run's reporters, checkpoint format and step-loop chunk);
* :mod:`.records` -- the driving process's files (log, exchanges, walkers: the plain run's writers) and the run's
  checkpoint;
* :mod:`.demux` -- per-temperature trajectories from the per-walker ones;
* :mod:`.driver` -- the loop: advance the blocks, log, exchange, checkpoint, recover lost blocks;
* :mod:`.cluster` -- the blocks as Dask actors (imported only for ``--workers`` / ``--scheduler``).
"""
from .driver import BlocksLost, EnsemblePlan, EnsembleResult, LocalBlocks, block_specs, check_plan, drive
from .exchange import Exchanger, swap_probability
from ..ladder import check_ladder, geometric_ladder, parse_temperatures

__all__ = ["BlocksLost", "EnsemblePlan", "EnsembleResult", "Exchanger", "LocalBlocks", "block_specs", "check_ladder",
           "check_plan", "drive", "geometric_ladder", "parse_temperatures", "swap_probability"]
