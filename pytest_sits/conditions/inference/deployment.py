"""What the measurements of a served deployment share (the PLP-* sweep in :mod:`.served`, SVC-SLA in :mod:`.sla`):
the power sources of the accelerators it uses, and the prompts sent to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple


def is_local(url: str) -> bool:
    """Whether the server at ``url`` runs on this machine: its host is a loopback address, or one this machine holds
    (a socket binds to it).  A name that does not resolve is not local."""
    import ipaddress
    import socket
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, addr in infos:
        ip = str(addr[0])
        if ipaddress.ip_address(ip.split("%")[0]).is_loopback:
            return True
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.bind((ip, 0))
            return True
        except OSError:
            continue
    return False


def deployment_power(accelerators: List[Dict[str, Any]], redfish: Optional[Dict[str, Any]],
                     root: Path = Path("/"), local: bool = True) -> Tuple[List[Any], List[str], List[str]]:
    """The power sources of every accelerator the deployment uses and of its host: (sources, why others are
    missing, the primary sources whose sum is the deployment's power P: the accelerators' own sensors, else the
    CPU packages and DRAM from RAPL).  A server on another machine (``local`` false): only its BMC (``redfish``,
    the node's wall power) is read; this machine's sensors say nothing of it."""
    from ...probes.power import discover, redfish_sources

    if not local:
        bmc, bmc_why = redfish_sources(**(redfish or {"url": None}))
        remote = ["the server runs on another machine: this machine's accelerator and CPU sensors are not its "
                  "power (run the suite on the serving node, or give that node's BMC with --sits-redfish)"]
        return list(bmc), remote + ([bmc_why] if bmc_why else []), [s.name for s in bmc]
    sources: List[Any] = []
    missing: List[str] = []
    wanted = [({"NVIDIA": "nvidia", "AMD": "amd"}.get(str(a.get("vendor"))), (a.get("management") or {}).get("index"))
              for a in accelerators] or [(None, None)]
    names = set()
    for kind, index in wanted:
        found, why = discover(root, kind, index, redfish)
        for s in found:
            if s.name in names:
                s.close()
                continue
            names.add(s.name)
            sources.append(s)
        missing.extend(w for w in why if w not in missing)
    from .rig import device_sources, rapl_packages

    return sources, missing, device_sources(sources) or rapl_packages(sources)


def served_workload(client: Any, spec: Dict[str, Any], dataset: Optional[str], tenants: Optional[List[Dict[str, Any]]],
                    seed: int) -> Any:
    """The prompts for a served run: the dataset's, or English-word prompts sized in the server's tokens (measured
    first with two requests); a :class:`ValueError` naming the dataset's fault."""
    from ...inference.workloads import calibrate, load_dataset, synthetic

    cal = calibrate(client, deadline_s=min(30.0, client.deadline_s))
    if dataset:
        return load_dataset(dataset, spec, cal, tenants, seed)
    return synthetic(spec, cal, tenants, seed)
