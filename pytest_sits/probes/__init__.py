"""Probes: read the hardware and return evidence.  A probe never decides."""
