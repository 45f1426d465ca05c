"""Device: a DLPack device (kind, ordinal). `cpu(0)` is host memory; `ext_dev(0)` is microTVM's kind."""

from __future__ import annotations

from utvm.errors import ArgumentError
from utvm.runtime.capi import DLDevice
from utvm.runtime.typecodes import DLDeviceType

_NAMES = {
    DLDeviceType.CPU: "cpu",
    DLDeviceType.CUDA: "cuda",
    DLDeviceType.CUDA_HOST: "cuda_host",
    DLDeviceType.OPENCL: "opencl",
    DLDeviceType.VULKAN: "vulkan",
    DLDeviceType.METAL: "metal",
    DLDeviceType.VPI: "vpi",
    DLDeviceType.ROCM: "rocm",
    DLDeviceType.EXT_DEV: "ext_dev",
}
_ALIASES = {"llvm": DLDeviceType.CPU, "c": DLDeviceType.CPU, "gpu": DLDeviceType.CUDA,
            "micro_dev": DLDeviceType.EXT_DEV}
_BY_NAME = {name: t for t, name in _NAMES.items()} | _ALIASES
_I32_MAX = 2**31 - 1


class Device:
    """An immutable (device_type, device_id) pair. `Device("cpu", 0)`, `Device(12, 0)`, `cpu()`, `ext_dev()`.

    Device types outside DLDeviceType are allowed (RPC sessions may tag remote devices), printed as
    `device<N>(id)`."""

    __slots__ = ("_device_type", "_device_id")
    _device_type: int
    _device_id: int

    def __init__(self, device_type: int | str, device_id: int = 0) -> None:
        if isinstance(device_type, str):
            try:
                dtype = int(_BY_NAME[device_type.strip().lower()])
            except KeyError:
                raise ArgumentError(
                    f"unknown device kind {device_type!r}; known: {', '.join(sorted(_BY_NAME))}"
                ) from None
        elif isinstance(device_type, int) and not isinstance(device_type, bool) and device_type > 0:
            dtype = int(device_type)
            if dtype > _I32_MAX:
                raise ArgumentError(f"device_type {device_type} does not fit in int32")
        else:
            raise ArgumentError(f"device_type must be a device name or an integer in 1..{_I32_MAX}, "
                                f"got {device_type!r}")
        if isinstance(device_id, bool) or not isinstance(device_id, int) or not 0 <= device_id <= _I32_MAX:
            raise ArgumentError(f"device_id must be an integer in 0..{_I32_MAX}, got {device_id!r}")
        object.__setattr__(self, "_device_type", dtype)
        object.__setattr__(self, "_device_id", int(device_id))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Device is immutable (cannot set {name!r})")

    @property
    def device_type(self) -> int:
        return self._device_type

    @property
    def device_id(self) -> int:
        return self._device_id

    @property
    def kind(self) -> str:
        """The device kind's name ("cpu", "ext_dev", ...) or "device<N>" for a type outside DLDeviceType."""
        try:
            return _NAMES[DLDeviceType(self._device_type)]
        except ValueError:
            return f"device{self._device_type}"

    def to_dl(self) -> DLDevice:
        return DLDevice(self._device_type, self._device_id)

    @classmethod
    def from_dl(cls, dl: DLDevice) -> Device:
        return cls(int(dl.device_type), int(dl.device_id))

    def _key(self) -> tuple[int, int]:
        return (self._device_type, self._device_id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Device):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return f"{self.kind}({self._device_id})"

    def __repr__(self) -> str:
        return f"Device({self.kind!r}, {self._device_id})" if self.kind in _BY_NAME else \
            f"Device({self._device_type}, {self._device_id})"


def device(kind: int | str, device_id: int = 0) -> Device:
    return Device(kind, device_id)


def cpu(device_id: int = 0) -> Device:
    return Device(DLDeviceType.CPU, device_id)


def ext_dev(device_id: int = 0) -> Device:
    return Device(DLDeviceType.EXT_DEV, device_id)
