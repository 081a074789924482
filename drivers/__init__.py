"""Device drivers: bytes from shoes, scanners and shufflers in, typed device messages out.

Drivers may import ``controller.events`` to build input events; the controller
never imports a driver (docs/architecture.md).
"""
