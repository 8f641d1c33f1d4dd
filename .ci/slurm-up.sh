#!/usr/bin/env bash
# Bring up a single-node SLURM cluster (Debian 12 slurm-wlm + munge) on this machine.
# Idempotent: safe to run again; only installs / (re)writes / starts what is missing.
# Must run as root.  Exits non-zero with a message if the node is not idle within ~60 s.
# Needs nothing beyond a base Debian 12 (no procps: processes are found through /proc).
set -euo pipefail

die() { echo "slurm-up: ERROR: $*" >&2; exit 1; }
log() { echo "slurm-up: $*"; }

# running NAME: is a process whose command name is exactly NAME alive?
running() {
  local f
  for f in /proc/[0-9]*/comm; do
    [ "$(cat "$f" 2>/dev/null)" = "$1" ] && return 0
  done
  return 1
}

# stop_pidfile FILE NAME: stop the daemon named in FILE and wait (<= 15 s) until it is gone
stop_pidfile() {
  local pid
  [ -s "$1" ] || return 0
  pid="$(cat "$1")"
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 30); do [ -d "/proc/$pid" ] || return 0; sleep 0.5; done
  die "$2 (pid $pid) did not stop"
}

[ "$(id -u)" -eq 0 ] || die "must run as root"

# 1. packages -----------------------------------------------------------------
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
   || ! command -v munged >/dev/null 2>&1 || ! command -v sbatch >/dev/null 2>&1; then
  log "installing slurm-wlm munge"
  export DEBIAN_FRONTEND=noninteractive
  # keep the packages' init scripts from starting daemons (no init system in a container,
  # and no slurm.conf yet): this script starts them itself
  POLICY=/usr/sbin/policy-rc.d
  if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$POLICY" && chmod 755 "$POLICY"
    trap 'rm -f "$POLICY"' EXIT
  fi
  apt-get update -qq || die "apt-get update failed"
  apt-get install -y -qq slurm-wlm munge >/dev/null || die "apt-get install slurm-wlm munge failed"
else
  log "slurm-wlm and munge already installed"
fi

# 2. host name: slurmd finds its node by `hostname -s`; clients reach slurmctld by that name ----
HOST="$(hostname -s 2>/dev/null || true)"
[ -n "$HOST" ] || HOST="$(cat /proc/sys/kernel/hostname)"
HOST="${HOST%%.*}"
[ -n "$HOST" ] || die "cannot determine the host name"
if ! getent hosts "$HOST" >/dev/null 2>&1; then
  log "adding $HOST to /etc/hosts (it did not resolve)"
  echo "127.0.1.1 $HOST" >> /etc/hosts || die "$HOST does not resolve and /etc/hosts is read-only"
fi

# 3. slurm.conf -----------------------------------------------------------------
CPUS="$(nproc)"
MEM_MB="$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)"
REAL_MEM=$(( MEM_MB * 8 / 10 ))          # stay below what the machine has
[ "$REAL_MEM" -ge 1 ] || REAL_MEM=1
CONF=/etc/slurm/slurm.conf
mkdir -p /etc/slurm
# (quoted delimiter: nothing in the text is expanded or run; the values are substituted below)
NEW_CONF="$(cat <<'EOC'
# written by .ci/slurm-up.sh
ClusterName=local
SlurmctldHost=@HOST@
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SlurmUser=root
ReturnToService=2
KillWait=5
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# no slurmdbd: job records go to a text file, read with "sacct -c"
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
NodeName=@HOST@ CPUs=@CPUS@ RealMemory=@MEM@ State=UNKNOWN
PartitionName=debug Nodes=@HOST@ Default=YES MaxTime=INFINITE State=UP
EOC
)"
NEW_CONF="${NEW_CONF//@HOST@/$HOST}"
NEW_CONF="${NEW_CONF//@CPUS@/$CPUS}"
NEW_CONF="${NEW_CONF//@MEM@/$REAL_MEM}"
CONF_CHANGED=0
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$NEW_CONF" ]; then
  printf '%s\n' "$NEW_CONF" > "$CONF"
  CONF_CHANGED=1
  log "wrote $CONF (host=$HOST cpus=$CPUS RealMemory=$REAL_MEM)"
fi

# 4. munge ----------------------------------------------------------------------
getent passwd munge >/dev/null || die "no munge user (the munge package creates it)"
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
chown munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 0700 /etc/munge /var/log/munge
chmod 0711 /var/lib/munge
chmod 0755 /run/munge
KEY=/etc/munge/munge.key
if [ ! -s "$KEY" ]; then
  log "creating $KEY"
  rm -f "$KEY"
  if ! su -s /bin/sh munge -c 'mungekey --create' >/dev/null 2>&1 || [ ! -s "$KEY" ]; then
    dd if=/dev/urandom of="$KEY" bs=1024 count=1 status=none || die "cannot create $KEY"
  fi
fi
chown munge:munge "$KEY"
chmod 0400 "$KEY"

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
# (re)start munged until a credential round-trips; a munged still shutting down is waited for
for _ in $(seq 1 40); do
  munge_ok && break
  if ! running munged; then
    log "starting munged"
    su -s /bin/sh munge -c /usr/sbin/munged || log "munged did not start (retrying)"
  fi
  sleep 0.5
done
munge_ok || die "munge does not work (munge -n | unmunge failed; see /var/log/munge/munged.log)"

# 5. slurm daemons ----------------------------------------------------------------
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
if [ "$CONF_CHANGED" = 1 ]; then
  # config changed under running daemons: stop them via their pid files, then restart
  stop_pidfile /run/slurmd.pid slurmd
  stop_pidfile /run/slurmctld.pid slurmctld
  if running slurmctld || running slurmd; then
    log "WARNING: a slurm daemon not started from /run/*.pid is running; asking it to reconfigure"
    scontrol reconfigure || true
  fi
fi
start_slurm() {  # start whichever slurm daemon is not running (a failed start is retried)
  if ! running slurmctld; then
    log "starting slurmctld"
    slurmctld || log "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
  fi
  if ! running slurmd; then
    log "starting slurmd"
    slurmd || log "slurmd did not start (see /var/log/slurm/slurmd.log)"
  fi
}
start_slurm

# 6. wait for the node ----------------------------------------------------------
STATE=""
for i in $(seq 1 60); do
  [ $((i % 5)) -eq 0 ] && start_slurm
  STATE="$(sinfo -h -n "$HOST" -o '%t' 2>/dev/null | head -n1 || true)"
  case "$STATE" in
    idle|mix|alloc) log "node $HOST is $STATE"; sinfo; exit 0 ;;
    down*|drain*|drng*)
      scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
sinfo >&2 || true
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 2>/dev/null || true
die "node $HOST not idle after 60 s (last state: '${STATE:-none}')"
