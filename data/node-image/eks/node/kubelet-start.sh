#!/bin/sh
# Starts the kubelet of an EKS node (kubelet.service) with the agent's flags from
# /etc/hyperfleet/kubelet.env (KUBELET_ARGS, the same for every release) plus the ones only
# some releases take, so that newer Kubernetes binaries work with the same files.
set -eu
minor=$(/usr/local/bin/kubelet --version | sed -n 's/^Kubernetes v1\.\([0-9][0-9]*\).*/\1/p')
extra=""
# Before 1.24 the kubelet uses dockershim unless told to speak CRI; 1.27 removed the flag.
if [ "${minor:-99}" -lt 24 ]; then extra="--container-runtime=remote"; fi
# shellcheck disable=SC2086 # KUBELET_ARGS is a list of flags
exec /usr/local/bin/kubelet ${KUBELET_ARGS:-} $extra
