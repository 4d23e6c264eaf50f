#!/usr/bin/env bash
# A local Slurm cluster of three nodes (n1, n2, n3) on 127.0.0.1, for the fleet tests.
#
#   bash tools/slurm/local-cluster.sh start|stop|status|env
#
# Every file (slurm.conf, cgroup.conf, munge key and socket, state, spool, logs, pid files) lives under
# $SITS_SLURM_DIR (default /tmp/sits-slurm); nothing in /etc is changed.  The clients find the cluster through
#   export SLURM_CONF=$SITS_SLURM_DIR/slurm.conf          (`local-cluster.sh env` prints this line)
# Debian's Slurm is built with multiple-slurmd support: one slurmd per node name (`slurmd -N nX`), each with
# its own port, spool directory, pid and log file.  A private munged (run as the munge user when started as
# root) signs the credentials; its socket is named in slurm.conf (AuthInfo=socket=...).
# Process tracking is proctrack/linuxproc and TaskPlugin=task/none: no cgroup constraints (cgroup.conf names
# cgroup/v1 with every Constrain* off), so it runs in containers too.
# Prolog: $SITS_SLURM_DIR/prolog runs the executables of $SITS_SLURM_DIR/prolog.d/ (empty unless a test adds one).
# Ports: slurmctld $SITS_SLURM_PORT (default 16817), the slurmds the next three ports.
# start and stop are idempotent: start brings up only what is not running (a node whose slurmd died is
# started again), stop stops what runs.  Install the packages with tools/slurm/install.sh.
set -uo pipefail

DIR=${SITS_SLURM_DIR:-/tmp/sits-slurm}
PORT=${SITS_SLURM_PORT:-16817}
NODES=(n1 n2 n3)
CONF=$DIR/slurm.conf
MUNGE_DIR=$DIR/munge
SOCKET=$MUNGE_DIR/munge.socket
INSTALL_HINT="bash tools/slurm/install.sh   (apt-get install slurmctld slurmd slurm-client munge)"

say() { echo "local-slurm: $*"; }
die() { echo "local-slurm: error: $1" >&2; exit "${2:-1}"; }

need_packages() {
    local missing=()
    for cmd in slurmctld slurmd srun sinfo scontrol munged munge unmunge; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        die "not installed: ${missing[*]}; install with: $INSTALL_HINT" 2
    fi
}

# alive PIDFILE NAME: the pid in PIDFILE runs a program called NAME (guards against reused pids)
alive() {
    local pid
    [ -r "$1" ] || return 1
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

# stop_pid PIDFILE NAME: TERM, wait up to 10 s, then KILL
stop_pid() {
    local pid i
    alive "$1" "$2" || { rm -f "$1"; return 0; }
    pid=$(cat "$1")
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 1 100); do
        alive "$1" "$2" || break
        sleep 0.1
    done
    if alive "$1" "$2"; then
        kill -KILL "$pid" 2>/dev/null
        sleep 0.2
    fi
    rm -f "$1"
}

write_config() {
    local user host
    user=$(id -un)
    host=$(hostname -s)
    mkdir -p "$DIR/state" "$DIR/log" "$DIR/run"
    for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done
    cat > "$CONF.tmp" <<CONF
# Written by tools/slurm/local-cluster.sh: three nodes on 127.0.0.1, one slurmd each (slurmd -N).
ClusterName=sits-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=10
KillWait=5
InactiveLimit=0
MinJobAge=300
Prolog=$DIR/prolog
PrologFlags=Alloc
NodeName=DEFAULT CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT + 1))
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT + 2))
NodeName=n3 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT + 3))
PartitionName=sits Nodes=n[1-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
    mv -f "$CONF.tmp" "$CONF"
    # The prolog runs each executable of prolog.d/ (none by default; the tests of sits health --mode=prolog
    # put one there for the duration of a test); the first that fails fails the prolog.  PrologFlags=Alloc runs it
    # when the job is allocated, and srun waits for it however long it takes (run at the first step instead, a
    # prolog slower than srun's launch timeout of 2 x MessageTimeout ends srun first and the job is cancelled).
    mkdir -p "$DIR/prolog.d"
    cat > "$DIR/prolog.tmp" <<'PROLOG'
#!/bin/sh
for f in "$(dirname "$0")"/prolog.d/*; do
    [ -x "$f" ] || continue
    "$f" || exit $?
done
exit 0
PROLOG
    chmod 0755 "$DIR/prolog.tmp"
    mv -f "$DIR/prolog.tmp" "$DIR/prolog"
    cat > "$DIR/cgroup.conf" <<CONF
# No constraints: the local cluster tracks processes with proctrack/linuxproc and binds nothing.
CgroupPlugin=cgroup/v1
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainSwapSpace=no
ConstrainDevices=no
CONF
}

start_munge() {
    if alive "$MUNGE_DIR/munged.pid" munged; then return 0; fi
    mkdir -p "$MUNGE_DIR"
    chmod 0755 "$DIR" "$MUNGE_DIR"
    local as=()
    if [ "$(id -u)" -eq 0 ]; then
        id munge >/dev/null 2>&1 || die "user 'munge' does not exist; reinstall munge: $INSTALL_HINT" 2
        as=(runuser -u munge --)
        chown munge:munge "$MUNGE_DIR"
    fi
    if [ ! -s "$MUNGE_DIR/munge.key" ]; then
        umask 077
        dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1024 count=1 status=none || die "cannot write the munge key"
        umask 022
    fi
    chmod 0600 "$MUNGE_DIR/munge.key"
    [ "$(id -u)" -eq 0 ] && chown munge:munge "$MUNGE_DIR/munge.key"
    rm -f "$SOCKET" "$SOCKET.lock"
    "${as[@]}" munged --socket="$SOCKET" --key-file="$MUNGE_DIR/munge.key" --pid-file="$MUNGE_DIR/munged.pid" \
        --log-file="$MUNGE_DIR/munged.log" --seed-file="$MUNGE_DIR/munged.seed" \
        || die "munged did not start; see $MUNGE_DIR/munged.log"
    local i
    for i in $(seq 1 50); do
        munge -S "$SOCKET" -n 2>/dev/null | unmunge -S "$SOCKET" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "munged does not answer on $SOCKET; see $MUNGE_DIR/munged.log"
}

cmd_start() {
    need_packages
    local fresh=0
    if ! alive "$DIR/run/slurmctld.pid" slurmctld; then
        write_config
        fresh=1
    fi
    start_munge
    export SLURM_CONF=$CONF
    if [ "$fresh" -eq 1 ]; then
        # -c: a cold start (no jobs or node states carried over from an earlier run of this cluster)
        slurmctld -c -f "$CONF" || die "slurmctld did not start; see $DIR/log/slurmctld.log"
    fi
    local n
    for n in "${NODES[@]}"; do
        if ! alive "$DIR/run/slurmd-$n.pid" slurmd; then
            slurmd -N "$n" -f "$CONF" || die "slurmd -N $n did not start; see $DIR/log/slurmd-$n.log"
        fi
    done
    local i state
    for i in $(seq 1 150); do
        state=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)
        if [ -n "$state" ] && ! grep -qvE ' (idle|alloc|mix|drain|drng|comp)$' <<<"$state"; then
            break
        fi
        sleep 0.2
    done
    if [ -z "$state" ] || grep -qvE ' (idle|alloc|mix|drain|drng|comp)$' <<<"$state"; then
        # A node that was down (killed) comes back with ReturnToService=2 once its slurmd registers; one
        # marked down by hand needs a resume.
        scontrol update nodename="$(IFS=,; echo "${NODES[*]}")" state=resume >/dev/null 2>&1
        sleep 1
        state=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)
        if [ -z "$state" ] || grep -qvE ' (idle|alloc|mix|drain|drng|comp)$' <<<"$state"; then
            echo "$state" >&2
            die "nodes not up after 30 s; logs in $DIR/log"
        fi
    fi
    say "up: $(tr '\n' ' ' <<<"$state")(config $CONF)"
    echo "export SLURM_CONF=$CONF"
}

cmd_stop() {
    local n
    for n in "${NODES[@]}"; do stop_pid "$DIR/run/slurmd-$n.pid" slurmd; done
    # slurmstepd of a node killed by hand may outlive its slurmd
    stop_pid "$DIR/run/slurmctld.pid" slurmctld
    stop_pid "$MUNGE_DIR/munged.pid" munged
    say "stopped (files kept in $DIR)"
}

cmd_status() {
    local rc=0 n
    if alive "$MUNGE_DIR/munged.pid" munged; then say "munged    running"; else say "munged    not running"; rc=1; fi
    if alive "$DIR/run/slurmctld.pid" slurmctld; then say "slurmctld running"; else say "slurmctld not running"; rc=1; fi
    for n in "${NODES[@]}"; do
        if alive "$DIR/run/slurmd-$n.pid" slurmd; then say "slurmd $n running"; else say "slurmd $n not running"; rc=1; fi
    done
    if [ -r "$CONF" ] && command -v sinfo >/dev/null 2>&1; then
        SLURM_CONF=$CONF sinfo -N -o '%N %P %t %E' 2>&1 | sed 's/^/  /' || rc=1
    fi
    [ "$rc" -eq 0 ] && echo "export SLURM_CONF=$CONF"
    return "$rc"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: $0 start|stop|status|env   (files under \$SITS_SLURM_DIR, default /tmp/sits-slurm)" >&2; exit 4 ;;
esac
