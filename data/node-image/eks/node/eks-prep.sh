#!/bin/sh
# Runs in an EKS node before containerd and the kubelet (hyperfleet-eks-prep.service);
# idempotent. Why each step: docs/kubernetes.md ("A kubelet inside a local node").
set -eu
# nspawn mounts the cgroup v1 controllers read-only inside the node's cgroup namespace;
# runc and the kubelet create cgroups below the node's own.
findmnt -rn -t cgroup,cgroup2 -o TARGET | while read -r target; do
  mount -o remount,rw,bind "$target"
done
# The kubelet sets six global sysctls (the host's): /proc/sys stays read-only and it finds
# them already holding its values, from read-only files bound over them in this node only.
for f in /usr/lib/hyperfleet/eks/sysctl/*; do
  target=/proc/sys/$(basename "$f" | tr . /)
  [ -e "$target" ] || continue
  mountpoint -q "$target" || mount --bind -o ro "$f" "$target"
done
# kube-proxy sets sysctls of the node's own network namespace (net.ipv4.conf.all.route_localnet
# for NodePorts on 127.0.0.1) and exits when it cannot: /proc/sys/net, which shows the reader's
# namespace, is made writable here. The host's namespace is untouched, and the kernel shows
# no host-wide net sysctl (net.core.rmem_max and the like) in another namespace.
mountpoint -q /proc/sys/net || mount --bind /proc/sys/net /proc/sys/net
mount -o remount,bind,rw /proc/sys/net
