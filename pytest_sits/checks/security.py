"""SEC-FIRMWARE (versions on the profile's allow-list) and SEC-TEE (the trusted-execution matrix, report only)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from ..verdict import FAIL, INCONCLUSIVE, PASS, WARN, Verdict
from . import Finding, check

COMPONENTS = ("driver", "vbios", "inforom", "gsp")


def version_key(text: str) -> Tuple[Tuple[int, Any], ...]:
    """'96.00.89.00.01' / 'G520.0200.00.05' / '550.54.15' -> comparable tokens (numbers compare as numbers)."""
    return tuple((0, int(t)) if t.isdigit() else (1, t.lower()) for t in re.findall(r"\d+|[A-Za-z]+", text))


def entry_matches(version: str, entry: Dict[str, Any]) -> bool:
    """An allow-list entry: ``version`` (exact) or a range ``min``/``max`` (inclusive, either may be absent)."""
    if entry.get("version") is not None:
        return version.strip().lower() == str(entry["version"]).strip().lower()
    key = version_key(version)
    if entry.get("min") is not None and key < version_key(str(entry["min"])):
        return False
    if entry.get("max") is not None and key > version_key(str(entry["max"])):
        return False
    return entry.get("min") is not None or entry.get("max") is not None


def _entry_text(entry: Dict[str, Any]) -> str:
    if entry.get("version") is not None:
        return str(entry["version"])
    return f"{entry.get('min') or '*'}..{entry.get('max') or '*'}"


@check("SEC-FIRMWARE")
def check_firmware(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """Driver, VBIOS, InfoROM and GSP firmware versions on the profile's allow-list (``allowed``: per component a
    list of entries with ``version`` or ``min``/``max`` and a ``reason``); the driver module's signature state
    where the kernel exposes it (FAIL on an unsigned module when ``require_signed_module``).  Without an
    allow-list the verdict is WARN, listing what was found.

    evidence: ``versions`` {driver, vbios, inforom, gsp} (str or None), ``module_signature`` {state, reason}."""
    versions = evidence.get("versions") or {}
    allowed = thresholds["allowed"] or {}
    sig = evidence.get("module_signature") or {}
    need_sig = bool(thresholds["require_signed_module"])
    found = ", ".join(f"{c} {versions.get(c) or 'n/a'}" for c in COMPONENTS)
    found += f"; kernel module signature: {sig.get('state', 'not read')}"
    listed = [c for c in COMPONENTS if allowed.get(c)]
    threshold = ("allow-list: " + "; ".join(f"{c} {', '.join(_entry_text(e) for e in allowed[c])}" for c in listed)
                 if listed else "no allow-list in the profile")
    if need_sig:
        threshold += "; signed kernel module"
    f.set(threshold=threshold, evidence=evidence, measured=found,
          method="versions from the management library (or submitted text) against the profile's allow-list; module "
                 "signature from /sys/module/<driver>/taint and sig_enforce")
    bad: List[str] = []
    unread: List[str] = []
    matched: List[str] = []
    for c in listed:
        v = versions.get(c)
        if v is None:
            unread.append(c)
            continue
        hit = next((e for e in allowed[c] if entry_matches(str(v), e)), None)
        if hit is None:
            bad.append(f"{c} {v} is not on the allow-list ({', '.join(_entry_text(e) for e in allowed[c])})")
        else:
            matched.append(f"{c} {v} ({_entry_text(hit)}: {hit.get('reason')})")
    if need_sig and sig.get("state") == "unsigned":
        bad.append(f"the driver module is not signed: {sig.get('reason')}")
    if bad:
        return f(FAIL, "; ".join(bad) + f" (found: {found})",
                 remediation="install the driver / firmware the allow-list names (VBIOS and InfoROM through the OEM's "
                             f"update package), or add the version to the profile's {f.requirement} allow-list with the "
                             "reason it is trusted; sign the module (DKMS with a MOK-enrolled key) where signatures are "
                             "required")
    if unread or (need_sig and sig.get("state") != "signed"):
        why = [f"{c} version not reported" for c in unread]
        if need_sig and sig.get("state") != "signed":
            why.append(f"module signature {sig.get('state', 'not read')}: {sig.get('reason')}")
        return f(INCONCLUSIVE, "; ".join(why) + f" (found: {found})")
    if not listed:
        return f(WARN, f"the profile has no firmware allow-list; found: {found}")
    unlisted = [c for c in COMPONENTS if c not in listed and versions.get(c)]
    return f(PASS, "on the allow-list: " + "; ".join(matched)
             + (f"; not listed by the profile: {', '.join(unlisted)}" if unlisted else ""))


def _find(rows: List[Dict[str, Any]], spec: str) -> List[Dict[str, Any]]:
    cap, _, role = spec.partition(":")
    return [r for r in rows if r["capability"].lower() == cap.strip().lower()
            and (not role or r["role"].lower() == role.strip().lower())]


def _summary(rows: List[Dict[str, Any]]) -> str:
    return ", ".join(f"{r['capability']} ({r['role']}) {r['value']}" for r in rows)


@check("SEC-TEE")
def check_tee(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """The trusted-execution matrix, reported.  Capabilities the profile lists in ``required``
    ("AMD SEV-SNP:host", "GPU confidential computing on") must read ``yes``: ``no`` fails, ``unknown`` is
    INCONCLUSIVE (what a platform cannot tell is never read as no).

    evidence: ``cpu`` and ``gpu`` rows {capability, role, value yes|no|unknown, source, detail}."""
    rows = list(evidence.get("cpu") or []) + list(evidence.get("gpu") or [])
    required = list(thresholds["required"] or [])
    f.set(threshold=("required: " + ", ".join(required)) if required else "report only", evidence=evidence,
          measured=_summary([r for r in rows if r["value"] == "yes"]) or "none",
          method="kernel files (/proc/cpuinfo flags, KVM module parameters, /dev/sev*, /dev/tdx_guest) and NVML "
                 "conf-compute state")
    if not rows:
        return f(INCONCLUSIVE, "no capability could be read")
    missing, unknown = [], []
    for spec in required:
        hits = _find(rows, spec)
        if any(r["value"] == "yes" for r in hits):
            continue
        if not hits or any(r["value"] == "unknown" for r in hits):
            unknown.append(spec + (f" ({hits[0]['detail']})" if hits else " (not in the matrix)"))
        else:
            missing.append(f"{spec} ({hits[0]['detail']})")
    if missing:
        return f(FAIL, f"required trusted-execution capability absent: {'; '.join(missing)}",
                 remediation="enable it in the firmware (BIOS: SEV-SNP / TDX, SMEE, RMP) and the kernel (kvm_amd "
                             "sev_snp=1 / kvm_intel tdx=1), and the GPU's CC mode (`nvidia-smi conf-compute -srs` / "
                             f"the vendor's CC tool), or drop it from the profile's {f.requirement} required list")
    if unknown:
        return f(INCONCLUSIVE, f"cannot tell whether required capabilities are there: {'; '.join(unknown)}")
    yes = [r for r in rows if r["value"] == "yes"]
    unk = [r for r in rows if r["value"] == "unknown"]
    text = (f"{'required capabilities present; ' if required else 'report only: '}"
            f"yes: {_summary(yes) or 'none'}; unknown: {_summary(unk) or 'none'}")
    return f(PASS, text)
