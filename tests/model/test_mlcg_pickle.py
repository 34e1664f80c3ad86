"""flashschnet.mlcg_pickle: mlcg pickles read without mlcg (the restricted unpickler) see exactly the classes mlcg
pickled (tests/data/oracles/real/, see its README.txt). Converting what it reads, and refusing pickles that would
run code (flashschnet.convert): tests/model/test_convert.py."""
from __future__ import annotations

import pytest

from tests.conftest import SHARED
from flashschnet.mlcg_pickle import read_pickle
from tests.helpers.real_oracles import REAL, S_MODEL, S_ORACLE, load_oracle

CA_ORACLE = REAL / "real_cln_ca.pt"
CA_MODEL = SHARED / "oracles" / "mlcg" / "real" / "real_cln_ca_model.pt"     # not copied: another project's file


def _ca_model():
    if not CA_MODEL.exists():
        pytest.skip(f"{CA_MODEL} not found (../shared/ is absent); the real mlcg file is not bundled")
    return CA_MODEL


@pytest.mark.parametrize("model, oracle", [(S_MODEL, S_ORACLE), (None, CA_ORACLE)])
def test_unpickler_sees_exactly_the_classes_mlcg_pickled(model, oracle):
    model = model or _ca_model()
    _, seen = read_pickle(model)
    assert list(dict.fromkeys(seen)) == load_oracle(oracle)["classes"]
