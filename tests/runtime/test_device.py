"""Device: constructors, printing, equality, DLDevice conversion and bad input."""

from __future__ import annotations

import pytest

from utvm.errors import ArgumentError
from utvm.runtime import Device, cpu, device, ext_dev
from utvm.runtime.capi import DLDevice
from utvm.runtime.typecodes import DLDeviceType


def test_constructors() -> None:
    assert cpu() == Device("cpu", 0) == Device(1, 0) == device("llvm")
    assert ext_dev(3) == Device("ext_dev", 3) == Device(DLDeviceType.EXT_DEV, 3) == device("micro_dev", 3)
    assert cpu(1) != cpu(0) and cpu(0) != ext_dev(0)
    assert (cpu(2).device_type, cpu(2).device_id) == (1, 2)
    assert ext_dev().kind == "ext_dev"


@pytest.mark.parametrize(("dev", "text"), [
    (cpu(0), "cpu(0)"), (ext_dev(1), "ext_dev(1)"), (Device("cuda", 2), "cuda(2)"),
    (Device(200, 0), "device200(0)"),
])
def test_str(dev: Device, text: str) -> None:
    assert str(dev) == text
    assert eval(repr(dev), {"Device": Device}) == dev  # noqa: S307 - repr round trip


def test_hash_and_immutability() -> None:
    assert len({cpu(0), Device("cpu", 0), ext_dev(0)}) == 2
    with pytest.raises(AttributeError):
        cpu().device_id = 3  # type: ignore[misc]
    assert cpu() != (1, 0)


def test_dl_round_trip() -> None:
    dl = ext_dev(5).to_dl()
    assert isinstance(dl, DLDevice) and (dl.device_type, dl.device_id) == (12, 5)
    assert Device.from_dl(dl) == ext_dev(5)


@pytest.mark.parametrize(("args", "needle"), [
    (("tpu", 0), "unknown device kind 'tpu'"),
    ((0, 0), "device_type must be"),
    ((-1, 0), "device_type must be"),
    ((True, 0), "device_type must be"),
    ((1.0, 0), "device_type must be"),
    ((2**31, 0), "does not fit in int32"),
    (("cpu", -1), "device_id must be"),
    (("cpu", 2**31), "device_id must be"),
    (("cpu", "0"), "device_id must be"),
])
def test_rejects(args: tuple, needle: str) -> None:
    with pytest.raises(ArgumentError, match=needle):
        Device(*args)
