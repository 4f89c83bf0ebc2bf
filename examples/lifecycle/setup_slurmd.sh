#!/bin/bash
# A worker or login node: slurmd, configless, pointed at the controller.
# usage: setup_slurmd.sh RESOURCE_CONFIG_JSON CONTROLLER_GROUP
set -euo pipefail
config=$1 controller_group=$2
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

ctl_ip=$(jq -r --arg g "$controller_group" \
  '[.InstanceGroups[] | select(.Name == $g) | .Instances[]?.CustomerIpAddress][0] // empty' "$config")
[ -n "$ctl_ip" ] || { echo "no controller address in $config" >&2; exit 1; }

# HyperPod's slurmd unit carries a literal $SLURMD_OPTIONS for the scripts to fill in.
unit=/etc/systemd/system/slurmd.service
SLURMD_OPTIONS="--conf-server $ctl_ip" envsubst '$SLURMD_OPTIONS' < "$unit" > "$unit.new"
mv "$unit.new" "$unit"
systemctl daemon-reload
log "starting slurmd (configuration from $ctl_ip)"
systemctl enable --now slurmd

# Done when the controller sees this node (slurmd registered and got its configuration).
me=$(hostname)
for _ in $(seq 1 150); do
  # Until slurmd has fetched the configuration, scontrol has none and fails.
  state=$(scontrol show node "$me" 2>/dev/null | sed -n 's/.*State=\([A-Z+_]*\).*/\1/p' | head -1) || state=
  case $state in IDLE*|ALLOCATED*|MIXED*) break ;; esac
  sleep 0.2
done
case ${state:-} in
  IDLE*|ALLOCATED*|MIXED*) log "slurmd registered: $me is ${state}" ;;
  *) echo "slurmd on $me did not register with the controller (state '${state:-unknown}')" >&2
     systemctl status slurmd --no-pager >&2 || true
     tail -20 /var/log/slurm/slurmd.log >&2 || true
     exit 1 ;;
esac
