#!/bin/bash
# Lifecycle script of an EKS-orchestrated HyperPod cluster's nodes (docs/kubernetes.md). It
# runs before containerd and the kubelet start, as on HyperPod, so it may move their state:
# here, like HyperPod's EKS base configuration, the kubelet's directory goes to the node's
# secondary volume when one is mounted at /opt/sagemaker.
set -euo pipefail
echo "on_create on $(hostname): $(nproc) CPUs"
if mountpoint -q /opt/sagemaker && [ ! -L /var/lib/kubelet ]; then
  mkdir -p /opt/sagemaker/kubelet
  cp -a /var/lib/kubelet/. /opt/sagemaker/kubelet/
  rm -rf /var/lib/kubelet
  ln -s /opt/sagemaker/kubelet /var/lib/kubelet
  echo "kubelet state moved to /opt/sagemaker/kubelet"
fi
