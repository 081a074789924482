"""Simulated devices speaking the same protocols as the drivers, for bench tests.

Simulators may import ``drivers`` (for the shared framer) and ``controller.cards``;
nothing imports a simulator except the bench and the tests.
"""
