#!/usr/bin/env bash
# A single-node Slurm on this machine for `make test-cluster`: slurmctld + slurmd + munged, as root, no cgroups.
#   tools/slurm_local.sh start DIR   installs slurm-wlm and munge from the distribution when absent, writes
#                                    DIR/slurm.conf (this host, its CPUs, one partition "debug"), starts the three
#                                    daemons and waits until the node is idle; prints `export SLURM_CONF=...`
#   tools/slurm_local.sh stop DIR    stops the daemons it started (their pid files under DIR) and leaves nothing running
# Needs root (the daemons and apt-get). Facts: proctrack/linuxproc and task/none need no cgroup set-up; the
# munge key must belong to the munge user, mode 400.
set -euo pipefail
cmd=${1:?usage: slurm_local.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: slurm_local.sh start|stop DIR}")
conf=$dir/slurm.conf

stop() {
    # the jobs first, while the controller still answers; then whatever a job left (its steps, its processes:
    # they carry this cluster's SLURM_CONF in their environment), then the daemons
    if [ -f "$conf" ] && [ -f "$dir/slurmctld.pid" ]; then
        SLURM_CONF=$conf scancel --full --user "$(id -un)" 2>/dev/null || true
        for _ in $(seq 50); do
            [ -z "$(SLURM_CONF=$conf squeue -h 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = $$ ] || [ "$pid" = "$PPID" ] && continue
        if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$conf"; then
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    pkill -9 -x slurmstepd 2>/dev/null || true
    for name in slurmd slurmctld; do
        if [ -f "$dir/$name.pid" ]; then kill "$(cat "$dir/$name.pid")" 2>/dev/null || true; fi
    done
    if [ -f "$dir/munge/munged.pid" ]; then kill "$(cat "$dir/munge/munged.pid")" 2>/dev/null || true; fi
    for _ in $(seq 100); do
        alive=0
        for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
            [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null && alive=1
        done
        [ $alive = 0 ] && break
        sleep 0.2
    done
    for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do   # still there after 20 s
        [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null
    done
    rm -f "$dir"/*.pid "$dir/munge/munged.pid"
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "slurm_local.sh: unknown command $cmd (expected start or stop)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "slurm_local.sh: needs root (slurmctld, slurmd and munged run as root here)" >&2; exit 2; }
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "installing slurm-wlm and munge (the distribution's packages)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >"$dir.apt.log" 2>&1 || {
        apt-get update -q >>"$dir.apt.log" 2>&1
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >>"$dir.apt.log" 2>&1
    } || { echo "slurm_local.sh: could not install slurm-wlm and munge (log: $dir.apt.log)" >&2; exit 2; }
fi
mkdir -p "$dir"/{state,spool,log,munge,socket}
chmod 755 "$dir" "$dir/log" "$dir/socket"
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
chown munge:munge "$dir/munge" "$dir/socket"
chmod 700 "$dir/munge"
if [ ! -f "$dir/munge/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chown munge:munge "$dir/munge/munge.key"
    chmod 400 "$dir/munge/munge.key"
fi
# munged on a socket of its own (slurm.conf's AuthInfo names it to the daemons and the client commands), so that
# this cluster neither takes over nor removes the machine's default munge socket
runuser -u munge -- munged --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" --socket="$dir/socket/munge.socket"
cat >"$conf" <<CONF
ClusterName=umlkit-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/socket/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobRequeue=1
MpiDefault=none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=$((6817 + RANDOM % 1000))
SlurmdPort=$((7817 + RANDOM % 1000))
SchedulerType=sched/backfill
MinJobAge=600
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$conf
slurmctld -f "$conf"
slurmd -f "$conf"
for _ in $(seq 100); do
    state=$(sinfo -h -o %t 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.2
done
if [ "$state" != idle ]; then
    echo "slurm_local.sh: the node did not come up (sinfo: ${state:-no answer}); logs under $dir/log" >&2
    stop
    exit 1
fi
echo "export SLURM_CONF=$conf"
