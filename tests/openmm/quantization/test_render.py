"""flashschnet.openmm.quantization.render (the quantization report's output) on a made-up report: one verdict line
per variant (its worst force error against the 1 % target, Langevin stability, NVE drift measurable or not), and
the models whose quantized weights repeat an earlier model's."""
from __future__ import annotations

from flashschnet.openmm.quantization.render import TARGET_REL_RMSE, same_weights, verdicts


def test_one_verdict_per_variant():
    report = {"settings": {"variants": ["fp16", "bf16", "fp16-cast"]},
              "frame_errors": [{"variant": "fp16", "force_rel_rmse_vs_fp32": 0.004},
                               {"variant": "fp16", "force_rel_rmse_vs_fp32": 0.008},
                               {"variant": "bf16", "force_rel_rmse_vs_fp32": 0.03},
                               {"variant": "bf16", "force_rel_rmse": 0.05},           # no fp32 comparison
                               {"variant": "none", "force_rel_rmse_vs_fp32": 0.0}],
              "langevin": [{"variant": "fp16", "stable": True, "steps": 200},
                           {"variant": "bf16", "stable": False, "steps": 200}],
              "nve": {"fp16": {"drift_kJ_mol_ns": 1.0, "drift_stderr_kJ_mol_ns": 2.0, "steps": 100},
                      "bf16": {"drift_kJ_mol_ns": -50.0, "drift_stderr_kJ_mol_ns": 5.0, "steps": 100}}}
    assert TARGET_REL_RMSE == 0.01
    assert verdicts(report) == [
        "**fp16**: worst force relative RMSE vs float32 0.008 (within the 1 % target); 200-step Langevin run stable; "
        "NVE drift +1 ± 2 kJ/mol/ns (not measurable over 100 steps).",
        "**bf16**: worst force relative RMSE vs float32 0.03 (MISSES the 1 % target); 200-step Langevin run NOT "
        "stable; NVE drift -50 ± 5 kJ/mol/ns (MEASURABLE over 100 steps).",
        "**fp16-cast**: worst force relative RMSE vs float32 - (MISSES the 1 % target); 0-step Langevin run NOT "
        "stable."]


def test_same_weights_names_the_first_model_with_them():
    ranges = {"a": [{"name": "w", "amax": [1.0]}], "b": [{"name": "w", "amax": [2.0]}],
              "c": [{"amax": [1.0], "name": "w"}], "d": [{"name": "w", "amax": [2.0]}]}
    assert same_weights({"channel_ranges": ranges}) == {"c": "a", "d": "b"}
    assert same_weights({"channel_ranges": {"a": ranges["a"]}}) == {}
