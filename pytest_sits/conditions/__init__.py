"""Conditions: what the suite does to the machine, and the acquire functions that gather evidence under them.

Loads (:mod:`.loads`), NUMA binding (:mod:`.numa`), the DRAM bandwidth hold
(:mod:`.hold`), the STREAM peak (:mod:`.stream`), thermal calibration
(:mod:`.thermal`) and locks between processes (:mod:`.locks`) are context
managers that stop on every exit path and record what they actually did.
The ``acquire_*`` functions of each area run probes under the right
condition and return the evidence a check decides on.
"""
