"""magika's real model on the software adapter: every compute node on our EP, outputs equal ORT's CPU EP."""

from __future__ import annotations

import numpy as np
import pytest

import epabi
from magika_model import batch, model_path

EP = epabi.get_ep_name()


@pytest.fixture(scope="module")
def cpu_reference() -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(model_path()), providers=["CPUExecutionProvider"])
    return session.run(None, {"bytes": batch()})[0]


def test_magika_on_software_adapter_matches_ort_cpu(host: epabi.Host, cpu_reference: np.ndarray) -> None:
    so = epabi.SessionOptions()
    so.add_provider_for_devices(host.get_ep_devices())
    with epabi.InferenceSession(str(model_path()), so) as session:
        off_ep = {n: ep for n, ep in session.node_assignment.items() if ep != EP}
        assert off_ep == {}, f"nodes left to the CPU: {off_ep}"
        (scores,) = session.run(None, {"bytes": batch()})
    assert scores.shape == cpu_reference.shape == (len(batch()), 214)
    np.testing.assert_allclose(scores, cpu_reference, rtol=0, atol=1e-4)
    # the predicted labels (argmax) are the same as well
    assert (scores.argmax(1) == cpu_reference.argmax(1)).all()
