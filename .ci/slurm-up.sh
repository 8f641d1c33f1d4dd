#!/usr/bin/env bash
# Bring up a single-node SLURM cluster (Debian 12 slurm-wlm + munge) on this machine.
# Idempotent: safe to run again; only installs / (re)writes / starts what is missing.
# Must run as root.  Exits non-zero with a message if the node is not idle within ~60 s.
set -euo pipefail

die() { echo "slurm-up: ERROR: $*" >&2; exit 1; }
log() { echo "slurm-up: $*"; }

[ "$(id -u)" -eq 0 ] || die "must run as root"

# 1. packages -----------------------------------------------------------------
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
   || ! command -v munged >/dev/null 2>&1 || ! command -v sbatch >/dev/null 2>&1; then
  log "installing slurm-wlm munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed"
  apt-get install -y -qq slurm-wlm munge >/dev/null || die "apt-get install slurm-wlm munge failed"
else
  log "slurm-wlm and munge already installed"
fi

# 2. slurm.conf -----------------------------------------------------------------
HOST="$(hostname -s)"
CPUS="$(nproc)"
MEM_MB="$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)"
REAL_MEM=$(( MEM_MB * 8 / 10 ))          # stay below what the machine has
[ "$REAL_MEM" -ge 1 ] || REAL_MEM=1
CONF=/etc/slurm/slurm.conf
mkdir -p /etc/slurm
NEW_CONF="$(cat <<EOF
# written by .ci/slurm-up.sh
ClusterName=local
SlurmctldHost=${HOST}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SlurmUser=root
ReturnToService=2
KillWait=5
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
# no slurmdbd: job records go to a text file, read with `sacct -c`
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
NodeName=${HOST} CPUs=${CPUS} RealMemory=${REAL_MEM} State=UNKNOWN
PartitionName=debug Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP
EOF
)"
CONF_CHANGED=0
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$NEW_CONF" ]; then
  printf '%s\n' "$NEW_CONF" > "$CONF"
  CONF_CHANGED=1
  log "wrote $CONF (host=$HOST cpus=$CPUS RealMemory=$REAL_MEM)"
fi

# 3. daemons ------------------------------------------------------------------
mkdir -p /var/spool/slurmctld /var/spool/slurmd /run/munge /var/log/slurm
chown munge: /run/munge 2>/dev/null || chown munge /run/munge
[ -f /etc/munge/munge.key ] || die "/etc/munge/munge.key missing (munge package should create it)"

if ! pgrep -x munged >/dev/null; then
  log "starting munged"
  su -s /bin/sh munge -c /usr/sbin/munged || die "munged failed to start"
fi
for _ in $(seq 1 20); do munge -n >/dev/null 2>&1 && break; sleep 0.5; done
munge -n >/dev/null 2>&1 || die "munge does not work (munge -n failed)"

if [ "$CONF_CHANGED" = 1 ]; then
  # config changed under running daemons: stop them via their pid files, then restart
  for pidf in /run/slurmd.pid /run/slurmctld.pid; do
    if [ -s "$pidf" ] && kill "$(cat "$pidf")" 2>/dev/null; then sleep 2; fi
  done
fi
if ! pgrep -x slurmctld >/dev/null; then
  log "starting slurmctld"
  slurmctld || die "slurmctld failed to start (see /var/log/slurm or run: slurmctld -D -vvv)"
fi
if ! pgrep -x slurmd >/dev/null; then
  log "starting slurmd"
  slurmd || die "slurmd failed to start (run: slurmd -D -vvv)"
fi

# 4. wait for the node ----------------------------------------------------------
STATE=""
for _ in $(seq 1 60); do
  STATE="$(sinfo -h -n "$HOST" -o '%t' 2>/dev/null | head -n1 || true)"
  case "$STATE" in
    idle|mix|alloc) log "node $HOST is $STATE"; sinfo; exit 0 ;;
    down*|drain*|drng*)
      scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
sinfo >&2 || true
die "node $HOST not idle after 60 s (last state: '${STATE:-none}')"
