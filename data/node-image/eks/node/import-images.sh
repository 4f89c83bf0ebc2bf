#!/bin/sh
# Imports the images shipped in the node image (the pod sandbox's pause image) into
# containerd's k8s.io namespace, where the CRI plugin looks; run after containerd starts
# (ExecStartPost of its drop-in), so a rewritten config or a moved root still gets them.
set -eu
for image in /opt/hyperfleet/images/*.tar; do
  [ -e "$image" ] || continue
  ctr -n k8s.io images import "$image" >/dev/null
done
