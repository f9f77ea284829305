"""GlobalMaxPool and GlobalAveragePool on the GPU EP device against onnxruntime's CPU EP (skipped without an NVIDIA
GPU): plane sizes below, at and past the CUDA max kernel's four loads per lane (128 per warp step), a NaN that must
stick in its plane, and magika's [1, 512, 508]; eager runs and a captured graph's replays."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import epabi
from gpu_devices import EP, gpu_ep_device
from linear_models import ort_cpu

pytestmark = pytest.mark.gpu

if epabi.hardware.cuda_gpu_count() == 0:
    pytest.skip("no NVIDIA GPU with a working driver", allow_module_level=True)

SHAPES = [(1, 512, 508), (2, 3, 7, 5), (1, 4, 130), (1, 2, 1), (3, 5, 96), (1, 3, 127), (1, 2, 129)]


def _model(op: str, shape: tuple[int, ...]) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], op,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9   # the H200's onnxruntime 1.30 reads IR <= 13
    return model


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("op", ["GlobalMaxPool", "GlobalAveragePool"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_global_pool_matches_ort_cpu(gpu_host: epabi.Host, op: str, shape: tuple[int, ...], graphs: bool) -> None:
    rng = np.random.default_rng(len(shape) * 1000 + shape[-1])
    x = rng.standard_normal(shape).astype(np.float32) * 10
    if shape[-1] > 1:
        x.reshape(-1, shape[-1])[-1, shape[-1] // 2] = np.nan   # the last plane's max is NaN
    model = _model(op, shape)
    expected = ort_cpu(model, {"x": x})
    so = epabi.SessionOptions()
    so.add_provider_for_devices([gpu_ep_device(gpu_host)], {"enable_cuda_graph": "1" if graphs else "0"})
    with epabi.InferenceSession(model, so) as session:
        assert set(session.node_assignment.values()) == {EP}, session.node_assignment
        binding = session.io_binding()
        xv = epabi.OrtValue.ortvalue_from_numpy(x, "cuda", 0, host=gpu_host)
        yv = epabi.OrtValue.ortvalue_from_shape_and_type(list(expected.shape), np.float32, "cuda", 0, host=gpu_host)
        binding.bind_ortvalue_input("x", xv)
        binding.bind_ortvalue_output("y", yv)
        for call in range(3):
            yv.update_inplace(np.full(expected.shape, -7.0, np.float32))
            session.run_with_iobinding(binding)
            np.testing.assert_allclose(yv.numpy(), expected, rtol=1e-5, atol=1e-5, err_msg=f"call {call}")
