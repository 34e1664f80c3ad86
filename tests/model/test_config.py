"""flashschnet.config: a model config's quantization and compression entries, checked with one-line errors."""
from __future__ import annotations

import pytest
import torch

from flashschnet import InputError
from flashschnet.config import normalize_compression, normalize_quantization, quant_dtype_name


@pytest.mark.parametrize("spec,match", [
    ({"kind": "septic", "knots": 8, "dtype": "float32"}, "kind"),
    ({"kind": "quintic", "knots": 1, "dtype": "float32"}, "knots"),
    ({"kind": "quintic", "knots": True, "dtype": "float32"}, "knots"),
    ({"kind": "quintic", "knots": 8, "dtype": "int8"}, "dtype"),
    ({"kind": "quintic"}, "compression"),
])
def test_bad_compression_configs_are_refused(spec, match):
    with pytest.raises(InputError, match=match):
        normalize_compression(spec)
    assert normalize_compression(None) is None
    assert normalize_compression({"kind": "cubic", "knots": 8, "dtype": "float16"}) == \
        {"kind": "cubic", "knots": 8, "dtype": "float16"}


def test_quantization_dtypes_by_name_alias_or_torch_dtype():
    for given, name in (("fp16", "float16"), ("half", "float16"), ("bf16", "bfloat16"), (torch.float16, "float16"),
                        (torch.bfloat16, "bfloat16"), ("bfloat16", "bfloat16")):
        assert quant_dtype_name(given) == name
    for bad in ("float32", torch.float32, "int8"):
        with pytest.raises(InputError, match="float16 or bfloat16"):
            quant_dtype_name(bad)
    assert normalize_quantization({"dtype": "bf16"}) == {"dtype": "bfloat16", "per_channel": True}
    assert normalize_quantization(None) is None
    with pytest.raises(InputError, match="quantization must be"):
        normalize_quantization("fp16")
