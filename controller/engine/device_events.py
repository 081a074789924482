"""The devices' reports (:class:`DeviceEvents`): a fault opens the ``device_fault`` state
(play is applied to the interrupted state, :meth:`TableEngine._handle_under_fault`) and
its clearing resumes it; a device connected, a diagnostic (malformed traffic, a refused
identity, the anchors unwritable) and the floor's signed checkpoint are recorded."""

from __future__ import annotations

from typing import Any

from controller.engine.day import Refused
from controller.engine.dealing import Dealing
from controller.engine.states import DEVICE_FAULT, State
from controller.events import (
    ANCHOR_WRITE_FAILED,
    DeviceConnected,
    DeviceDiagnostic,
    DeviceFault,
    DeviceOk,
    WitnessCheckpoint,
)
from controller.outputs import Note, Output


class DeviceEvents(Dealing):
    """The handlers of the devices' events (module docstring)."""

    def _on_device_fault(self, e: DeviceFault, out: list[Output]) -> State | None:
        key = (e.device, e.code)
        self._faults[key] = e.detail
        out.append(Note("device_fault", f"{e.device}: {e.code}" + (f" ({e.detail})"
                        if e.detail else ""), {"device": e.device, "code": e.code}))
        if self.state == DEVICE_FAULT:
            return None
        self._resume = self.state
        self._fault_flagged = False
        return DEVICE_FAULT

    def _on_device_ok(self, e: DeviceOk, out: list[Output]) -> State | None:
        key = (e.device, e.code)
        if key not in self._faults:
            raise Refused(f"no open fault {e.device}:{e.code}")
        del self._faults[key]
        out.append(Note("device_ok", f"{e.device}: {e.code} cleared",
                        {"device": e.device, "code": e.code}))
        if self._faults:
            return None
        resume, self._resume = self._resume, None
        return None if resume is None else State(resume)

    def _on_device_connected(self, e: DeviceConnected, out: list[Output]) -> State | None:
        who = " ".join(x for x in (e.model, e.serial) if x) or "a device"
        text = f"{e.device}: {who}" + (f" firmware {e.firmware}" if e.firmware else "") + \
            (f" on {e.port}" if e.port else "") + (f" ({e.driver})" if e.driver else "")
        data = {k: v for k, v in e.to_record().items() if k not in ("type", "t")}
        out.append(Note("device_connected", text, data))
        return None

    def _on_witness_checkpoint(self, e: WitnessCheckpoint, out: list[Output]) -> State | None:
        """Recorded, never judged: the floor's signed word on the chain so far."""
        return None

    def _on_device_diagnostic(self, e: DeviceDiagnostic, out: list[Output]) -> State | None:
        evidence: dict[str, Any] = {k: v for k, v in e.to_record().items()
                                    if k not in ("type", "t", "code")}
        if e.code == "PROTOCOL_ERROR":
            what = e.kind or "malformed traffic"
            count = f"{e.count} " if e.count else ""
            total = f"; {e.total} so far on this device" if e.total else ""
            out.append(self._make(
                "PROTOCOL_ERROR", f"{e.device}: {count}{what} on the link{total}"
                + (f" ({e.detail})" if e.detail else ""), **evidence))
        elif e.code == ANCHOR_WRITE_FAILED:
            out.append(self._make(
                ANCHOR_WRITE_FAILED, "the audit log's anchors cannot be written: "
                + (e.detail or "no detail") + "; the log goes on, but until anchors are "
                "written again a cut of its tail would go unnoticed", **evidence))
        elif e.code == "DEVICE_IDENTITY":
            out.append(self._make(
                "DEVICE_IDENTITY", f"{e.device} refused: "
                + (e.detail or f"its identity differs ({e.kind or 'identity'})"), **evidence))
        else:
            out.append(Note("device_diagnostic", f"{e.device}: {e.code}"
                            + (f" {e.kind}" if e.kind else "")
                            + (f": {e.detail}" if e.detail else ""), {"code": e.code, **evidence}))
        return None
