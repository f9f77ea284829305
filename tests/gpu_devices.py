"""Picking the plugin's GPU EP device in the GPU tests (``-m gpu``; the ``gpu_host`` fixture is in conftest.py)."""

from __future__ import annotations

import epabi

EP = "EpAbiExecutionProvider"


def gpu_ep_device(host: epabi.Host) -> epabi.EpDevice:
    """The first GPU EP device (``device_kind`` gpu) the epabi plugin lists on ``host``; fails the test when there
    is none."""
    devices = [d for d in host.get_ep_devices() if d.ep_name == EP and d.ep_metadata.get("device_kind") == "gpu"]
    assert devices, f"the plugin lists no GPU EP device: {host.get_ep_devices()}"
    return devices[0]
