"""aot.runtime.dlpack and DeviceArray without a GPU: numpy's own capsules (CPU) are what the
consumer half reads, and a DeviceArray over host memory (a stand-in DeviceMemory whose
"device addresses" are a numpy buffer's) is what the producer half exports; torch (CPU) and
numpy consume those exports as third parties."""
from __future__ import annotations

import ctypes
import gc
import sys

import ml_dtypes
import numpy as np
import pytest
import torch

from aot.errors import RunError
from aot.ir.types import DType
from aot.runtime import dlpack
from aot.runtime.device_array import DeviceArray

CPU = (dlpack.KDL_CPU, 0)


class HostMemory:
    """A DeviceMemory over host buffers, counting allocations and frees."""

    def __init__(self, ordinal: int = 0):
        self.ordinal = ordinal
        self.buffers: dict[int, np.ndarray] = {}
        self.freed: list[int] = []

    def alloc(self, nbytes: int) -> int:
        raw = np.zeros(nbytes + 512, np.uint8)
        start = (-raw.ctypes.data) % 256
        address = raw.ctypes.data + start
        self.buffers[address] = raw
        return address

    def free(self, address: int) -> None:
        assert address in self.buffers and address not in self.freed, "freed twice or never allocated"
        self.freed.append(address)

    def upload(self, address: int, host: int, nbytes: int) -> None:
        ctypes.memmove(address, host, nbytes)

    def download(self, host: int, address: int, nbytes: int) -> None:
        ctypes.memmove(host, address, nbytes)


class Producer:
    """A DLPack producer handing out a given capsule and device."""

    def __init__(self, capsule: object, device=(dlpack.KDL_CUDA, 0), takes_stream: bool = True):
        self.capsule = capsule
        self.device = device
        self.takes_stream = takes_stream
        self.streams: list = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        if kwargs and not self.takes_stream:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'stream'")
        self.streams.append(kwargs.get("stream"))
        return self.capsule


def _host_address(capsule_owner: np.ndarray) -> int:
    return capsule_owner.__array_interface__["data"][0]


# -- consuming ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [d for d in DType if not d.needs_ml_dtypes], ids=lambda d: d.manifest_name)
def test_numpy_capsules_give_their_pointer_shape_dtype_and_strides(dtype, rng):
    array = rng.integers(0, 2, (2, 3, 5)).astype(dtype.to_numpy())
    tensor = dlpack.import_capsule(array.__dlpack__(), "input 'x'")
    try:
        assert tensor.address == _host_address(array)
        assert tensor.device == CPU
        assert tensor.shape == (2, 3, 5)
        assert tensor.strides in (None, (15, 5, 1))
        # our dtype table agrees with numpy's own export (kDLBool for bool, kDLUInt, ...)
        assert tensor.dtype == dlpack.dl_dtype(dtype)
        dlpack.check(tensor, "input 'x'", device=CPU, dtype=dtype, shape=[2, 3, 5])
    finally:
        tensor.release()


def test_the_dtype_table_is_one_to_one_and_spells_bfloat16_and_bool_as_dlpack_does():
    triples = [dlpack.dl_dtype(d) for d in DType]
    assert len(set(triples)) == len(triples)
    assert dlpack.dl_dtype(DType.BF16) == (4, 16, 1)
    assert dlpack.dl_dtype(DType.BOOL) == (6, 8, 1)
    assert dlpack.dl_dtype(DType.F8E4M3FN) == (10, 8, 1)
    assert torch.from_dlpack(torch.ones(2, dtype=torch.bfloat16)).dtype == torch.bfloat16  # torch reads code 4


def test_a_view_reads_at_its_own_start_and_a_scalar_has_no_dims():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[1:3]
    tensor = dlpack.import_capsule(view.__dlpack__(), "input 'x'")
    assert tensor.address == _host_address(view) == _host_address(base) + 24
    assert tensor.shape == (2, 6)
    tensor.release()
    scalar = np.array(3.0, np.float64)
    tensor = dlpack.import_capsule(scalar.__dlpack__(), "input 's'")
    assert (tensor.shape, tensor.strides) == ((), None)
    tensor.release()


def test_consuming_marks_the_capsule_used_and_release_runs_the_deleter_once():
    array = np.zeros((3, 4), np.float32)
    before = sys.getrefcount(array)
    capsule = array.__dlpack__()
    tensor = dlpack.import_capsule(capsule, "input 'x'")
    assert "used_dltensor" in repr(capsule)
    with pytest.raises(RunError, match="'used_dltensor'"):  # a used capsule cannot be taken twice
        dlpack.import_capsule(capsule, "input 'x'")
    del capsule
    gc.collect()
    assert sys.getrefcount(array) == before + 1  # the producer's reference lives until release
    tensor.release()
    tensor.release()
    assert sys.getrefcount(array) == before


def test_a_versioned_capsule_is_read_and_its_read_only_flag_refuses_writing():
    array = np.arange(6, dtype=np.int32)
    array.flags.writeable = False
    capsule = array.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(capsule)
    tensor = dlpack.import_capsule(capsule, "output 'y'")
    try:
        assert tensor.read_only and tensor.address == _host_address(array)
        dlpack.check(tensor, "input 'x'", device=CPU, dtype=DType.I32, shape=[6])
        with pytest.raises(RunError, match="output 'y': the DLPack tensor is read-only"):
            dlpack.check(tensor, "output 'y'", device=CPU, dtype=DType.I32, shape=[6], writable=True)
    finally:
        tensor.release()


def test_something_that_is_not_a_capsule_is_refused():
    with pytest.raises(RunError, match=r"input 'x': __dlpack__\(\) returned a int, not an unused DLPack capsule"):
        dlpack.take(Producer(12345), "input 'x'", None)
    with pytest.raises(RunError, match="returned a ndarray"):
        dlpack.take(Producer(np.zeros(3)), "input 'x'", None)


def test_a_capsule_of_another_name_is_refused():
    make = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        ("PyCapsule_New", ctypes.pythonapi))
    name = ctypes.create_string_buffer(b"not_a_tensor")
    other = make(ctypes.addressof(name), ctypes.addressof(name), None)
    with pytest.raises(RunError, match="a capsule named b'not_a_tensor'"):
        dlpack.take(Producer(other), "input 'x'", None)


def test_the_consumer_stream_is_offered_and_a_producer_without_the_keyword_is_asked_plainly():
    producer = Producer(np.zeros(2, np.float32).__dlpack__())
    dlpack.take(producer, "input 'x'", 0x1234).release()
    assert producer.streams == [0x1234]
    plain = Producer(np.zeros(2, np.float32).__dlpack__(), takes_stream=False)
    dlpack.take(plain, "input 'x'", 0x1234).release()
    assert plain.streams == [None]


@pytest.mark.parametrize("view, message", [
    (lambda a: a[:, ::2], r"input 'x': strides \[8,2\] \(in elements\) are not dense row-major for shape \[4,4\]"),
    (lambda a: a.T, r"strides \[1,8\] .* not dense row-major"),
    (lambda a: a.reshape(-1)[1:17].reshape(4, 4), r"input 'x': data address 0x[0-9a-f]+ is not 16-byte aligned"),
], ids=["strided", "transposed", "misaligned"])
def test_a_strided_or_misaligned_view_is_refused(view, message):
    base = np.zeros(64 + 64, np.float32)
    aligned = base[(-base.ctypes.data % 64) // 4:][:64].reshape(8, 8)
    array = view(aligned)[:4, :4]
    tensor = dlpack.import_capsule(array.__dlpack__(), "input 'x'")
    try:
        with pytest.raises(RunError, match=message):
            dlpack.check(tensor, "input 'x'", device=CPU, dtype=DType.F32, shape=[4, 4])
    finally:
        tensor.release()


def test_size_one_dims_may_have_any_stride_and_empty_tensors_any_strides():
    assert dlpack.is_compact((3, 1), (1, 7))
    assert dlpack.is_compact((1, 4), (99, 1))
    assert dlpack.is_compact((0, 4), (1, 9))
    assert not dlpack.is_compact((2, 4), (1, 2))
    column = np.zeros((1, 3), np.float32).T  # shape (3, 1), strides (1, 3)
    tensor = dlpack.import_capsule(column.__dlpack__(), "input 'x'")
    dlpack.check(tensor, "input 'x'", device=CPU, dtype=DType.F32, shape=[3, 1])
    tensor.release()


@pytest.mark.parametrize("kwargs, message", [
    (dict(device=(dlpack.KDL_CUDA, 1)), r"input 'x' is on cpu, this session runs on cuda:1"),
    (dict(dtype=DType.F16), r"input 'x': expected dtype float16, got float32"),
    (dict(shape=[2, 6]), r"input 'x': expected shape \[2,6\], got \[3,4\]"),
])
def test_device_dtype_and_shape_must_be_the_inputs(kwargs, message):
    array = np.zeros((3, 4), np.float32)
    tensor = dlpack.import_capsule(array.__dlpack__(), "input 'x'")
    want = dict(device=CPU, dtype=DType.F32, shape=[3, 4]) | kwargs
    try:
        with pytest.raises(RunError, match=message):
            dlpack.check(tensor, "input 'x'", **want)
    finally:
        tensor.release()


def test_an_unknown_dlpack_dtype_is_named_by_its_numbers():
    assert dlpack.describe_dl_dtype((5, 64, 1)) == "DLPack dtype (code 5, bits 64, lanes 1)"
    assert dlpack.describe_dl_dtype((2, 32, 1)) == "float32"


# -- producing ---------------------------------------------------------------------------
def test_an_exported_capsule_round_trips_through_the_consumer(rng):
    memory = HostMemory(ordinal=3)
    host = rng.standard_normal((2, 3, 4)).astype(np.float32)
    array = DeviceArray.from_numpy(memory, host)
    assert array.__dlpack_device__() == (dlpack.KDL_CUDA, 3)
    tensor = dlpack.import_capsule(array.__dlpack__(stream=7), "input 'x'")
    try:
        assert tensor.address == array.data_ptr
        assert (tensor.device, tensor.shape, tensor.strides) == ((dlpack.KDL_CUDA, 3), (2, 3, 4), (12, 4, 1))
        dlpack.check(tensor, "input 'x'", device=(dlpack.KDL_CUDA, 3), dtype=DType.F32, shape=[2, 3, 4],
                     writable=True)
        out = np.empty_like(host)
        ctypes.memmove(out.ctypes.data, tensor.address, out.nbytes)
        np.testing.assert_array_equal(out, host)
    finally:
        tensor.release()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.uint16, np.bool_, ml_dtypes.bfloat16])
def test_numpy_round_trips_and_third_parties_read_the_export(dtype, rng):
    host = (rng.standard_normal((5, 7)) * 3).astype(dtype)
    memory = HostMemory()
    array = DeviceArray.from_numpy(memory, host)
    assert (array.shape, array.dtype, array.nbytes, array.device) == ((5, 7), np.dtype(dtype), host.nbytes, "cuda:0")
    np.testing.assert_array_equal(array.numpy(), host)
    # torch (CPU) reads the same struct: exported with a CPU device, it is torch's tensor in place
    capsule = dlpack.export_capsule(array, array.data_ptr, array.shape, array.element, CPU)
    seen = torch.utils.dlpack.from_dlpack(capsule)
    assert seen.data_ptr() == array.data_ptr
    want = torch.from_numpy(host.view(np.uint16)).view(torch.bfloat16) if dtype is ml_dtypes.bfloat16 \
        else torch.from_numpy(host)
    assert torch.equal(seen, want)


def test_the_memory_is_freed_once_when_the_consumer_is_done():
    memory = HostMemory()
    array = DeviceArray.from_numpy(memory, np.arange(6, dtype=np.float32))
    address = array.data_ptr
    capsule = dlpack.export_capsule(array, address, array.shape, array.element, CPU)
    del array
    gc.collect()
    assert memory.freed == []  # the capsule keeps it
    seen = np.from_dlpack(Producer(capsule, device=CPU))
    del capsule
    gc.collect()
    assert memory.freed == []  # numpy's array keeps it now
    np.testing.assert_array_equal(seen, np.arange(6, dtype=np.float32))
    del seen
    gc.collect()
    assert memory.freed == [address]


def test_the_memory_is_freed_once_when_our_consumer_releases_it():
    memory = HostMemory()
    array = DeviceArray.from_numpy(memory, np.ones(4, np.int32))
    tensor = dlpack.import_capsule(array.__dlpack__(), "input 'x'")
    del array
    gc.collect()
    assert memory.freed == []
    tensor.release()
    tensor.release()
    gc.collect()
    assert len(memory.freed) == 1


def test_a_capsule_never_consumed_frees_the_memory_once_it_is_destroyed():
    memory = HostMemory()
    array = DeviceArray.from_numpy(memory, np.ones(4, np.int32))
    capsule = array.__dlpack__()
    del array
    gc.collect()
    assert memory.freed == []
    del capsule
    gc.collect()
    assert len(memory.freed) == 1


def _consume_and_raise(capsule, value):
    raise AssertionError("not reached")


def test_a_capsule_dropped_while_an_exception_propagates_keeps_that_exception():
    # A ctypes-callback destructor would turn this ZeroDivisionError into SystemError.
    # The capsule holds the only reference: the memory is freed during that propagation.
    memory = HostMemory()
    with pytest.raises(ZeroDivisionError):
        _consume_and_raise(DeviceArray.from_numpy(memory, np.ones(4, np.int32)).__dlpack__(), 1 / 0)
    assert len(memory.freed) == 1


def test_a_device_array_frees_its_memory_once_without_exports():
    memory = HostMemory()
    array = DeviceArray.empty(memory, (0, 3), np.float32)
    assert array.nbytes == 0 and array.numpy().shape == (0, 3)
    del array
    gc.collect()
    assert len(memory.freed) == 1


def test_dlpack_requests_it_cannot_honour_are_buffer_errors():
    array = DeviceArray.from_numpy(HostMemory(ordinal=1), np.ones(3, np.float32))
    with pytest.raises(BufferError, match="cuda:1 cannot be exported to DLPack device"):
        array.__dlpack__(dl_device=CPU)
    with pytest.raises(BufferError, match="copy=True"):
        array.__dlpack__(copy=True)
    array.__dlpack__(dl_device=(dlpack.KDL_CUDA, 1), copy=False, max_version=(1, 0))


def test_the_cuda_array_interface_describes_the_memory_and_not_bfloat16():
    array = DeviceArray.from_numpy(HostMemory(), np.zeros((2, 5), np.float16))
    assert array.__cuda_array_interface__ == {"shape": (2, 5), "typestr": "<f2", "data": (array.data_ptr, False),
                                              "strides": None, "version": 3, "stream": None}
    assert not hasattr(DeviceArray.from_numpy(HostMemory(), np.zeros(2, ml_dtypes.bfloat16)),
                       "__cuda_array_interface__")


def test_a_device_array_refuses_what_it_cannot_hold():
    with pytest.raises(RunError, match="cannot hold dtype"):
        DeviceArray.empty(HostMemory(), (2,), np.complex64)
    with pytest.raises(RunError, match="needs a CUDA Session, got str"):
        DeviceArray.empty("cuda", (2,), np.float32)
    assert repr(DeviceArray.empty(HostMemory(), (2, 1), np.float32)) == \
        "DeviceArray(shape=[2, 1], dtype=float32, device='cuda:0')"
