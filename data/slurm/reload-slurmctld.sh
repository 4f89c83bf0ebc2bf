#!/bin/sh
# Applies a new slurm.conf on the Slurm controller node. The node agent runs it as root with
# /bin/sh after the control plane changed the file (embedded in the binary; see
# SlurmReloadArguments in include/hyperfleet/agent/agent.h).
# usage: reload-slurmctld.sh restart|reconfigure [REMOVED_NODE...]
#   restart      nodes came or went, or the controller moved (Slurm 22.05 needs a restart)
#   reconfigure  any other change: `scontrol reconfigure` also hands configless slurmds the file
#   REMOVED_NODE names slurm.conf no longer defines: set DOWN before the restart, so that their
#                jobs end (or requeue) now instead of waiting in COMPLETING for nodes that are gone
# Only where the lifecycle scripts set slurmctld up; a slurmctld that died is started again.
mode=$1
shift
systemctl is-enabled --quiet slurmctld || exit 0
restart=0
[ "$mode" = restart ] && restart=1
systemctl is-active --quiet slurmctld || restart=1
if [ "$restart" = 1 ]; then
  if [ $# -gt 0 ]; then
    removed=$(IFS=,; printf '%s' "$*")
    { systemctl is-active --quiet slurmctld &&
      scontrol update NodeName="$removed" State=DOWN Reason='removed from the cluster'; } || true
  fi
  systemctl restart slurmctld
  i=0
  until scontrol ping >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt 100 ]; then
      echo 'slurmctld did not answer after its restart'
      exit 1
    fi
    sleep 0.2
  done
fi
scontrol reconfigure
