#!/bin/bash
# OnCreate for a Slurm cluster, run by the node agent as HyperPod runs it: as root, from the
# downloaded bundle directory (/tmp/<bucket>/<prefix>/), with SAGEMAKER_RESOURCE_CONFIG_PATH
# pointing at the cluster's resource_config.json. Exit 0 makes the node Running.
#
# The node's role comes from provisioning_parameters.json (next to this script):
#   controller_group -> slurmctld (and, with enable_accounting, MariaDB + slurmdbd)
#   login_group      -> slurmd, like a worker, for users to log in and submit from
#   anything else    -> slurmd (a worker), in the partition its worker_groups entry names
# The control plane writes slurm.conf on the controller (configless: the others fetch it
# from slurmctld) and starts the controller's scripts before everyone else's.
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

params=$here/provisioning_parameters.json
[ -f "$params" ] || params=/opt/ml/config/provisioning_parameters.json
config=${SAGEMAKER_RESOURCE_CONFIG_PATH:-/opt/ml/config/resource_config.json}

# This node: the address the kernel picks to reach 10.254.254.254 (HyperPod's way).
self_ip=$(ip -4 -o route get 10.254.254.254 | sed -n 's/.* src \([0-9.]*\).*/\1/p')
group=$(jq -r --arg ip "$self_ip" \
  '.InstanceGroups[] | select(any(.Instances[]?; .CustomerIpAddress == $ip)) | .Name' "$config")
controller_group=$(jq -r '.controller_group // empty' "$params")
login_group=$(jq -r '.login_group // empty' "$params")
if [ -z "$group" ] || [ -z "$controller_group" ]; then
  echo "cannot tell this node's role: group '${group}' (address $self_ip), controller_group" \
    "'${controller_group}' in $params" >&2
  exit 1
fi
case $group in
  "$controller_group") role=controller ;;
  "$login_group") role=login ;;
  *) role=compute ;;
esac
log "node $(hostname) ($self_ip) of group $group: Slurm role $role"

# Job scripts and users find shared data here; /fsx is the cluster's shared file system.
mkdir -p /fsx/ubuntu && chown ubuntu:ubuntu /fsx/ubuntu

case $role in
  controller) bash "$here/setup_controller.sh" "$params" ;;
  *) bash "$here/setup_slurmd.sh" "$config" "$controller_group" ;;
esac
log "lifecycle scripts done on $(hostname) ($role)"
