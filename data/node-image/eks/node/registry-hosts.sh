#!/bin/sh
# Runs before containerd starts (containerd.service's ExecStartPre, after the lifecycle
# scripts): maps localhost:PORT, the name the host pushes to and pods pull from, to the host's
# local registry on this node's default gateway (the cluster bridge's host address), in
# containerd's per-registry hosts directory (config.toml's config_path). Without
# /etc/hyperfleet/registry.env (the server runs no registry) nothing is mapped.
# docs/kubernetes.md "Registry and images".
set -eu
env=/etc/hyperfleet/registry.env
[ -r "$env" ] || exit 0
# shellcheck source=/dev/null
. "$env"
port=${HYPERFLEET_REGISTRY_PORT:?registry.env has no HYPERFLEET_REGISTRY_PORT}
gateway=$(ip -4 route show default | sed -n 's/^default via \([0-9.]*\).*/\1/p' | head -n 1)
if [ -z "$gateway" ]; then
  echo "registry-hosts: no default route: localhost:$port is not mapped" >&2
  exit 0
fi
dir=/etc/containerd/certs.d/localhost:$port
mkdir -p "$dir"
cat > "$dir/hosts.toml.new" <<T
# Written by registry-hosts.sh at containerd's start: the host's local registry (plain HTTP).
server = "http://$gateway:$port"

[host."http://$gateway:$port"]
  capabilities = ["pull", "resolve"]
T
chmod 644 "$dir/hosts.toml.new"
mv "$dir/hosts.toml.new" "$dir/hosts.toml"
