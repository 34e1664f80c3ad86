"""Distillation of a cheap inner model from a CGSchNet network, for distilled multiple time stepping (DMTS).

* :mod:`.inner` -- :class:`InnerModel`, the inner model's terms and its energy (the PyTorch reference);
* :mod:`.fit` -- the linear least-squares fit to the network's forces (force matching, plus the stiffness of
  perturbed frames) and the held-out force error;
* :mod:`.io` -- its file (``flashschnet-distill --out inner.pt``), read with ``weights_only=True``.

Sampling the frames (OpenMM runs of the full model) is :mod:`flashschnet.openmm.distill`; running with an inner
model, :mod:`flashschnet.openmm.dynamics`. This package never imports openmm.
"""
from .fit import design, fit, force_error, template_for
from .inner import InnerModel
from .io import load_inner, save_inner

__all__ = ["InnerModel", "design", "fit", "force_error", "load_inner", "save_inner", "template_for"]
