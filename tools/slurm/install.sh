#!/usr/bin/env bash
# Install the Debian packages a local Slurm cluster needs (slurmctld, slurmd, the client commands, munge).
# Safe to re-run: nothing is installed when every command is already there.
set -euo pipefail

PACKAGES=(slurmctld slurmd slurm-client munge)
NEEDED=(slurmctld slurmd srun sbatch sinfo scontrol munged munge unmunge)

missing=()
for cmd in "${NEEDED[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "slurm: packages already installed ($(dpkg-query -W -f='${Version}' slurmd 2>/dev/null || echo present))"
    exit 0
fi
echo "slurm: missing ${missing[*]}; installing ${PACKAGES[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "slurm: error: apt-get not found; install ${PACKAGES[*]} with this system's package manager" >&2
    exit 2
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
        echo "slurm: error: not root and no sudo; run as root: apt-get install ${PACKAGES[*]}" >&2
        exit 2
    fi
fi
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine; refresh them once, then install.
"${SUDO[@]}" apt-get update -qq
# policy-rc.d may deny starting the services (containers); local-cluster.sh starts its own daemons anyway.
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
echo "slurm: installed slurmd $(dpkg-query -W -f='${Version}' slurmd)"
