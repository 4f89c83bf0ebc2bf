#!/bin/bash
# A minimal lifecycle script, run by the node agent as HyperPod runs OnCreate: as root, from
# the downloaded bundle directory (/tmp/<bucket>/<prefix>/), with SAGEMAKER_RESOURCE_CONFIG_PATH
# pointing at this cluster's resource_config.json. Exit 0 makes the node Running.
set -euo pipefail

config=${SAGEMAKER_RESOURCE_CONFIG_PATH:-/opt/ml/config/resource_config.json}
# HyperPod's way of finding this node: the address the kernel picks to reach 10.254.254.254.
self_ip=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("10.254.254.254", 1)); print(s.getsockname()[0])')
group=$(jq -r --arg ip "$self_ip" \
  '.InstanceGroups[] | select(any(.Instances[]?; .CustomerIpAddress == $ip)) | .Name' "$config")
name=$(jq -r --arg ip "$self_ip" \
  '.InstanceGroups[].Instances[]? | select(.CustomerIpAddress == $ip) | .InstanceName' "$config")

# IMDSv2, as on EC2.
token=$(curl -sf -X PUT http://169.254.169.254/latest/api/token \
  -H 'X-aws-ec2-metadata-token-ttl-seconds: 60')
type=$(curl -sf -H "X-aws-ec2-metadata-token: $token" \
  http://169.254.169.254/latest/meta-data/instance-type)

echo "I am $name ($(hostname), $self_ip) in group $group (instance type $type, $(nproc) CPUs)"
echo "Cluster members:"
jq -r '.InstanceGroups[] | .Name as $g | .Instances[]? | "  \($g)  \(.InstanceName)  \(.InstanceId)  \(.CustomerIpAddress)"' "$config"
# /fsx is shared by the cluster's nodes; everything else is this node's own.
echo "$(hostname) $group" >> /fsx/members
echo "Lifecycle script done on $(hostname)"
