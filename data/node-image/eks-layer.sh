#!/bin/bash
# Builds the EKS node image into ROOTFS (which must not exist yet): a copy of the base node
# image (build.sh's debootstrap, packages.txt and AMI layer, built first), plus
#   1. eks/packages.txt (containerd, runc, the CNI plugins, iptables, conntrack);
#   2. the kubelet and kube-proxy from KUBERNETES_BIN (scripts/kubernetes's build);
#   3. the pod sandbox image registry.k8s.io/pause:3.6: eks/pause.c built with this host's
#      gcc -static and packed as an OCI image with umoci, shipped in /opt/hyperfleet/images;
#   4. containerd's config, the CNI template and the units (eks/units/): containerd, the
#      kubelet and kube-proxy installed but not enabled (the agent starts them after the
#      lifecycle scripts, as HyperPod does), the prep unit enabled.
# usage: BASE_ROOTFS=DIR KUBERNETES_BIN=DIR MIRROR=URL bash eks-layer.sh ROOTFS
# Runs as root on a Debian host with gcc, libc6-dev and umoci. Lines "@@step NAME" mark
# progress.
set -euo pipefail
# Modes must not follow the caller's umask or locale: fixed here, and explicit modes below.
umask 022
R=${1:?usage: eks-layer.sh ROOTFS}
BASE_ROOTFS=${BASE_ROOTFS:?BASE_ROOTFS is the base node image}
KUBERNETES_BIN=${KUBERNETES_BIN:?KUBERNETES_BIN holds kubelet and kube-proxy}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SUITE=${SUITE:-bookworm}
HERE=$(cd "$(dirname "$0")" && pwd)
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
unset LANG LANGUAGE
# shellcheck source=SCRIPTDIR/lib.sh
. "$HERE/lib.sh"  # in_root
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

echo "@@step base-copy"
mkdir -m 755 "$R"
cp -a "$BASE_ROOTFS/." "$R/"

echo "@@step eks-packages"
printf '#!/bin/sh\nexit 101\n' > "$R/usr/sbin/policy-rc.d"
chmod 755 "$R/usr/sbin/policy-rc.d"
# The build mirror and this host's resolver for this step only; nodes keep the AMI layer's
# sources and their per-node resolv.conf.
cp -a "$R/etc/apt/sources.list" "$W/sources.list"
cp -a "$R/etc/resolv.conf" "$W/resolv.conf"
cp /etc/resolv.conf "$R/etc/resolv.conf"
printf 'deb %s %s main\ndeb %s %s-updates main\n' "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" \
  > "$R/etc/apt/sources.list"
mapfile -t packages < <(sed 's/#.*//' "$HERE/eks/packages.txt" | tr -s ' \t' '\n' | sed '/^$/d')
in_root apt-get update -q
in_root apt-get install -y -q --no-install-recommends "${packages[@]}"
cp -a "$W/sources.list" "$R/etc/apt/sources.list"
cp -a "$W/resolv.conf" "$R/etc/resolv.conf"
in_root apt-get clean
rm -f "$R/usr/sbin/policy-rc.d"

echo "@@step kubernetes"
for b in kubelet kube-proxy; do
  install -m 755 "$KUBERNETES_BIN/$b" "$R/usr/local/bin/$b"
done
"$R/usr/local/bin/kubelet" --version

echo "@@step pause-image"
gcc -static -O2 -s -o "$W/pause" "$HERE/eks/pause.c"
# The tag is the full name containerd's sandbox_image asks for (ctr import keeps it).
image="$W/oci:registry.k8s.io/pause:3.6"
umoci init --layout "$W/oci"
umoci new --image "$image"
umoci unpack --image "$image" "$W/bundle"
install -m 755 "$W/pause" "$W/bundle/rootfs/pause"
umoci repack --image "$image" "$W/bundle"
umoci config --image "$image" --config.entrypoint /pause --config.user 65535:65535
umoci gc --layout "$W/oci"
install -d -m 755 "$R/opt/hyperfleet/images"
# An OCI layout archive, imported into containerd by import-images.sh.
tar -C "$W/oci" --sort=name --owner=0 --group=0 --numeric-owner \
  -cf "$R/opt/hyperfleet/images/pause.tar" .
chmod 644 "$R/opt/hyperfleet/images/pause.tar"

echo "@@step eks-units"
install -d -m 755 "$R/etc/containerd" "$R/etc/cni/net.d" "$R/etc/kubernetes" \
  "$R/var/lib/kubelet" "$R/usr/lib/hyperfleet/eks" "$R/usr/lib/hyperfleet/eks/sysctl" \
  "$R/etc/systemd/system/containerd.service.d"
install -m 644 "$HERE/eks/config.toml" "$R/etc/containerd/config.toml"
install -m 644 "$HERE/eks/cni.template" "$R/etc/containerd/cni.template"
install -m 755 "$HERE/eks/node/eks-prep.sh" "$HERE/eks/node/import-images.sh" \
  "$HERE/eks/node/kubelet-start.sh" "$HERE/eks/node/registry-hosts.sh" \
  "$R/usr/lib/hyperfleet/eks/"
# The values the kubelet wants for the global sysctls it would otherwise set (eks-prep.sh).
while read -r name value; do
  printf '%s\n' "$value" > "$R/usr/lib/hyperfleet/eks/sysctl/$name"
  chmod 444 "$R/usr/lib/hyperfleet/eks/sysctl/$name"
done <<S
vm.overcommit_memory 1
vm.panic_on_oom 0
kernel.panic 10
kernel.panic_on_oops 1
kernel.keys.root_maxkeys 1000000
kernel.keys.root_maxbytes 25000000
S
install -m 644 "$HERE/eks/units/hyperfleet-eks-prep.service" "$HERE/eks/units/kubelet.service" \
  "$HERE/eks/units/kube-proxy.service" "$R/etc/systemd/system/"
install -m 644 "$HERE/eks/units/containerd-hyperfleet.conf" \
  "$R/etc/systemd/system/containerd.service.d/10-hyperfleet.conf"
in_root systemctl disable containerd.service
in_root systemctl enable hyperfleet-eks-prep.service
echo "eks-layer: $("$R/usr/local/bin/kubelet" --version)"
