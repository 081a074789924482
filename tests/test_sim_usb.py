"""The simulated USB shuffler behind a pyusb backend: the real pyusb code path finds it,
bulk-writes a command and bulk-reads the ACK; an unplug is USBError errno 19."""

from __future__ import annotations

import errno
import random
import threading

import pytest
import usb.core
import usb.util

from controller.cards import pack
from drivers.framing import Frame, FrameDecoder, encode
from drivers.protocol import Identity, Kind
from simulators.devices import BatchShuffler, ContinuousShuffler
from simulators.faults import make_fault
from simulators.usb_backend import EP_IN, EP_OUT, PRODUCT_ID, VENDOR_ID, SimBackend


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def found(backend: SimBackend) -> usb.core.Device:
    dev = usb.core.find(idVendor=VENDOR_ID, idProduct=PRODUCT_ID, backend=backend)
    assert dev is not None
    return dev


def read_frames(dev: usb.core.Device, dec: FrameDecoder, timeout: int = 100) -> list[Frame]:
    data = bytes(dev.read(EP_IN, 4096, timeout=timeout))
    return [f for f in dec.feed(data) if isinstance(f, Frame)]


def test_find_and_descriptors() -> None:
    backend = SimBackend(BatchShuffler(rng=random.Random(1)))
    assert usb.core.find(idVendor=VENDOR_ID, idProduct=PRODUCT_ID + 1, backend=backend) is None
    dev = found(backend)
    assert (dev.idVendor, dev.idProduct, dev.bNumConfigurations) == (VENDOR_ID, PRODUCT_ID, 1)
    dev.set_configuration()
    cfg = dev.get_active_configuration()
    intf = cfg[(0, 0)]
    assert intf.bInterfaceClass == 0xFF
    out_ep = usb.util.find_descriptor(intf, custom_match=lambda e: usb.util.endpoint_direction(
        e.bEndpointAddress) == usb.util.ENDPOINT_OUT)
    in_ep = usb.util.find_descriptor(intf, custom_match=lambda e: usb.util.endpoint_direction(
        e.bEndpointAddress) == usb.util.ENDPOINT_IN)
    assert (out_ep.bEndpointAddress, in_ep.bEndpointAddress) == (EP_OUT, EP_IN)
    assert usb.util.endpoint_type(in_ep.bmAttributes) == usb.util.ENDPOINT_TYPE_BULK
    assert (dev.serial_number, dev.product) == ("SB000001", "SW-SHUF-B1")
    assert dev.manufacturer == "shoewarden sim"


def test_bulk_write_a_command_and_read_the_ack() -> None:
    sh = BatchShuffler(rng=random.Random(2))
    backend = SimBackend(sh)
    dev = found(backend)
    dev.set_configuration()
    dec = FrameDecoder()
    assert dev.write(EP_OUT, encode(0, Kind.HELLO, {"controller": "t"})) > 0
    hello = read_frames(dev, dec)
    assert [Kind(f.type).name for f in hello] == ["ACK", "IDENTITY"]
    assert Identity.from_body(hello[1].body()).kind == "shuffler"
    sh.load([str(c) for c in pack(1)])
    dev.write(EP_OUT, encode(1, Kind.CMD_SHUFFLE, {}))
    got: list[Frame] = []
    while len(got) < 4:
        got += read_frames(dev, dec)
    # the ACK overtakes the LOADED event still queued
    assert [(Kind(f.type).name, f.body()) for f in got] == [
        ("ACK", {"ack": 1}), ("LOADED", {"count": 52}), ("SHUFFLE_STARTED", {}),
        ("SHUFFLE_DONE", {"count": 52})]


def test_small_reads_split_frames_and_the_decoder_joins_them() -> None:
    backend = SimBackend(ContinuousShuffler(rng=random.Random(3)))
    dev = found(backend)
    dev.write(EP_OUT, encode(0, Kind.HELLO, {}))
    dec = FrameDecoder()
    frames: list[Frame] = []
    for _ in range(60):
        frames += [f for f in dec.feed(bytes(dev.read(EP_IN, 8, timeout=50)))
                   if isinstance(f, Frame)]
        if len(frames) == 2:
            break
    assert [Kind(f.type).name for f in frames] == ["ACK", "IDENTITY"]


def test_read_with_nothing_to_send_times_out() -> None:
    clock = Clock()
    backend = SimBackend(BatchShuffler(), clock=clock)
    dev = found(backend)
    timer = threading.Timer(0.05, lambda: setattr(clock, "t", clock.t + 1.0))
    timer.start()
    with pytest.raises(usb.core.USBTimeoutError) as e:
        dev.read(EP_IN, 64, timeout=500)  # not greeted: the device sends nothing
    timer.join()
    assert e.value.errno == errno.ETIMEDOUT


def test_unplug_is_usberror_errno_19_and_replug_needs_hello() -> None:
    backend = SimBackend(ContinuousShuffler(rng=random.Random(4)))
    dev = found(backend)
    dev.write(EP_OUT, encode(0, Kind.HELLO, {}))
    read_frames(dev, FrameDecoder())
    backend.unplug()
    for op in (lambda: dev.read(EP_IN, 64, timeout=10),
               lambda: dev.write(EP_OUT, encode(1, Kind.CMD_STATUS, {}))):
        with pytest.raises(usb.core.USBError) as e:
            op()
        assert e.value.errno == errno.ENODEV == 19
    assert usb.core.find(idVendor=VENDOR_ID, backend=backend) is None
    backend.plug()
    with pytest.raises(usb.core.USBError):  # the old handle stays dead
        dev.read(EP_IN, 64, timeout=10)
    usb.util.dispose_resources(dev)
    again = found(backend)
    assert again.address != dev.address
    again.write(EP_OUT, encode(0, Kind.HELLO, {}))
    assert [f.seq for f in read_frames(again, FrameDecoder())] == [0, 1]


def test_disconnect_fault_unplugs_for_its_seconds() -> None:
    clock = Clock()
    sh = ContinuousShuffler(rng=random.Random(5), faults=[
        make_fault({"kind": "disconnect", "device": "shuffler", "card": 2, "seconds": 2.0})])
    backend = SimBackend(sh, clock=clock)
    dev = found(backend)
    dev.write(EP_OUT, encode(0, Kind.HELLO, {}))
    dec = FrameDecoder()
    read_frames(dev, dec)
    sh.load(["AS", "KD", "7H"])
    sh.deliver()
    sh.deliver()
    frames = read_frames(dev, dec)
    assert [f.body().get("card") for f in frames if f.type == Kind.DELIVERED] == ["AS"]
    with pytest.raises(usb.core.USBError) as e:
        dev.read(EP_IN, 64, timeout=10)
    assert e.value.errno == 19
    clock.t += 1.0
    assert not backend.plugged
    clock.t += 1.5
    assert backend.plugged
    again = found(backend)
    again.write(EP_OUT, encode(0, Kind.HELLO, {}))
    frames = read_frames(again, FrameDecoder())
    assert [Kind(f.type).name for f in frames] == ["ACK", "IDENTITY", "DELIVERED"]
    assert frames[2].body() == {"card": "KD"}
