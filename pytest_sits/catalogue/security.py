"""Security: SEC-FIRMWARE, SEC-TEE (A §4.4 "Govern" and "Map")."""

from .base import BOOL, STR, Cost, Threshold, declare

#: One component's firmware allow-list: entries of an exact ``version`` or a ``min``/``max`` range, each with
#: the reason it is trusted.
ALLOW_LIST = {
    "type": "array",
    "items": {"type": "object", "additionalProperties": False, "required": ["reason"],
              "properties": {"version": STR, "min": STR, "max": STR, "reason": {"type": "string", "minLength": 10}},
              "anyOf": [{"required": ["version"]}, {"required": ["min"]}, {"required": ["max"]}]},
}

declare(
    "SEC-FIRMWARE", "Driver, VBIOS, InfoROM and GSP firmware versions on an allow-list", "A §4.4",
    level="quick", scope="accelerator", family="security",
    note='A §4.4 "Govern": versions checked against an allow-list. Allow-lists are a site\'s own (VBIOS and InfoROM '
         "builds differ by OEM): a lab profile lists, per component (driver, vbios, inforom, gsp), exact versions "
         "or min/max ranges, each with the reason it is trusted. Without one the verdict is WARN, listing what was "
         "found.",
    thresholds={
        "allowed": Threshold({"type": "object", "additionalProperties": False,
                              "properties": {c: ALLOW_LIST for c in ("driver", "vbios", "inforom", "gsp")}},
                             {}, "per component: [{version | min | max, reason}]"),
        "require_signed_module": Threshold(BOOL, False, "DKMS-built drivers are often unsigned; set true where "
                                                        "Secure Boot demands it"),
    },
    cost=Cost("acc", fixed=0.1), platforms=("live", "snapshot", "evidence", "sim"), faults=("firmware-unlisted",),
    fault_thresholds={"allowed": {
        "vbios": [{"version": "96.00.00.00.01", "reason": "the simulated board's VBIOS release"}],
        "driver": [{"min": "550", "reason": "SITS2026 B §4.1 floor and lab validation"}]}})

declare(
    "SEC-TEE", "Trusted-execution capability matrix (report only)", "A §4.4",
    level="quick", scope="report", family="security",
    thresholds={"required": Threshold({"type": "array", "items": STR}, [],
                                      'A §4.4 "Map": a report-only matrix unless a profile requires capabilities')},
    cost=Cost("host", fixed=0.5), platforms=("live", "snapshot", "sim"),
    no_fault="report only: the matrix is produced, and FAILs only where a profile requires a capability "
             "(tests/test_security.py)")
