#!/bin/bash
# The Slurm controller: accounting (optional), then slurmctld.
# usage: setup_controller.sh PROVISIONING_PARAMETERS_JSON
set -euo pipefail
params=$1
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
conf=/opt/slurm/etc/slurm.conf

# The control plane writes slurm.conf before the scripts start; wait a little anyway, as
# HyperPod's own scripts do.
for _ in $(seq 1 60); do grep -q '^SlurmctldHost=' "$conf" 2>/dev/null && break; sleep 1; done
grep -q '^SlurmctldHost=' "$conf" || { echo "$conf has no SlurmctldHost line" >&2; exit 1; }
ctl_host=$(grep '^SlurmctldHost=' "$conf" | awk -F'[=(]' '{print $2}')

if [ "$(jq -r '.enable_accounting // false' "$params")" = true ]; then
  log "accounting: MariaDB and slurmdbd"
  systemctl enable --now mariadb
  password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
  mysql --protocol=socket -u root <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$password';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL
  SLURM_DB_USER=slurm SLURM_DB_PASSWORD=$password \
    envsubst '$SLURM_DB_USER $SLURM_DB_PASSWORD' < /opt/slurm/etc/slurmdbd.conf.template \
    > /opt/slurm/etc/slurmdbd.conf
  chown slurm:slurm /opt/slurm/etc/slurmdbd.conf
  chmod 600 /opt/slurm/etc/slurmdbd.conf
  cat > /opt/slurm/etc/accounting.conf <<ACC
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$ctl_host
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/linux
ACC
  # At every later boot (a reboot keeps the disk; the scripts do not run again) slurmdbd
  # must come up before slurmctld, which registers with it when it starts: order the units
  # and let slurmctld wait (bounded) until slurmdbd listens.
  mkdir -p /etc/systemd/system/slurmctld.service.d /etc/systemd/system/slurmdbd.service.d
  cat > /etc/systemd/system/slurmdbd.service.d/10-hyperfleet-order.conf <<'UNIT'
[Unit]
Wants=mariadb.service
After=mariadb.service
UNIT
  cat > /etc/systemd/system/slurmctld.service.d/10-hyperfleet-order.conf <<'UNIT'
[Unit]
Wants=slurmdbd.service
After=slurmdbd.service
[Service]
ExecStartPre=-/bin/bash -c 'for _ in $(seq 1 150); do (exec 3<>/dev/tcp/127.0.0.1/6819) 2>/dev/null && exit 0; sleep 0.2; done; echo "slurmdbd does not listen on 6819 yet; starting anyway" >&2'
UNIT
  systemctl daemon-reload
  systemctl enable --now slurmdbd
  # slurmctld registers the cluster with slurmdbd when it starts: slurmdbd must listen first.
  for _ in $(seq 1 150); do
    (exec 3<>/dev/tcp/127.0.0.1/6819) 2>/dev/null && break
    sleep 0.2
  done
  (exec 3<>/dev/tcp/127.0.0.1/6819) 2>/dev/null || {
    echo "slurmdbd does not listen on 6819" >&2; tail -20 /var/log/slurm/slurmdbd.log >&2; exit 1; }
fi

log "starting slurmctld"
systemctl enable --now slurmctld
for _ in $(seq 1 150); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
scontrol ping >/dev/null 2>&1 || {
  echo "slurmctld does not answer" >&2; tail -20 /var/log/slurm/slurmctld.log >&2; exit 1; }
if [ -f /opt/slurm/etc/slurmdbd.conf ]; then
  cluster=$(grep '^ClusterName=' /opt/slurm/etc/slurm.conf | cut -d= -f2)
  sacctmgr -i add cluster "$cluster" >/dev/null 2>&1 || true
  sacctmgr -i add account root Cluster="$cluster" >/dev/null 2>&1 || true
  sacctmgr -i add user ubuntu Account=root >/dev/null 2>&1 || true
fi
log "slurmctld is up on $ctl_host"
