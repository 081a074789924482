"""The device error tree behaves like python-can's: typed, and catchable as built-ins."""

from __future__ import annotations

import pytest

from drivers.errors import (
    DeviceDisconnected,
    DeviceError,
    DeviceIdentityError,
    DeviceNotFound,
    DeviceTimeout,
    DriverNotFound,
    ProtocolError,
)


@pytest.mark.parametrize(("cls", "builtin"), [
    (DeviceTimeout, TimeoutError), (DeviceDisconnected, ConnectionError),
    (DeviceNotFound, FileNotFoundError), (DriverNotFound, LookupError),
    (ProtocolError, DeviceError), (DeviceIdentityError, DeviceError),
])
def test_hierarchy(cls: type[DeviceError], builtin: type[BaseException]) -> None:
    err = cls("no heartbeat for 3.0 s", device="shoe")
    assert isinstance(err, DeviceError) and isinstance(err, builtin)
    assert str(err) == "shoe: no heartbeat for 3.0 s" and err.device == "shoe"


def test_raise_from_keeps_the_cause() -> None:
    with pytest.raises(DeviceDisconnected) as info:
        try:
            raise OSError(19, "No such device")
        except OSError as e:
            raise DeviceDisconnected("unplugged", device="shuffler") from e
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == 19
