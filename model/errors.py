"""Error types. Every error a user can cause by bad input is an :class:`InputError` whose message is one
line naming the file, residue or atom at fault and what to do; command-line front ends print it without a
traceback and exit with status 2."""


class FlashSchNetError(Exception):
    """Base class of the errors this package raises on purpose."""


class InputError(FlashSchNetError, ValueError):
    """Bad user input (a file, a structure, a model, an argument). The message is one line."""


class SimulationInstabilityError(FlashSchNetError, RuntimeError):
    """A simulation produced NaN or huge energies/forces. The message names step and replica."""


class ClusterError(FlashSchNetError, RuntimeError):
    """The cluster running an ensemble's blocks cannot go on (no live worker left, the scheduler gone); the
    run's last checkpoint is intact, so ``--resume`` continues it. The message is one line."""
