#!/bin/bash
# The "AMI layer": turns a Debian rootfs with packages.txt installed into what a HyperPod
# lifecycle script may rely on (docs/hyperpod-contract.md "The machine"). Idempotent.
# usage: bash ami-layer.sh ROOTFS   (root; needs no network)
# ROOTFS / is the machine mode (the ssh provider, on a registered machine): the same layer
# applied to the running system, which keeps its apt sources, identity (machine-id, hostname,
# hosts, resolv.conf) and units; the provider enables the agent with the node's identity.
set -euo pipefail
# Modes must not follow the caller's umask (daemons read these as their own users): 022 here,
# and explicit modes for everything created below.
umask 022
R=${1:?usage: ami-layer.sh ROOTFS}
HERE=$(cd "$(dirname "$0")" && pwd)
export LC_ALL=C
unset LANG LANGUAGE
MACHINE=0
[ "$R" = / ] && MACHINE=1
in_root() {
  if [ "$MACHINE" = 1 ]; then "$@"; return; fi
  unshare --mount --propagation private -- /bin/sh -c '
    R=$1; shift
    mount -t proc proc "$R/proc" && mount --rbind /dev "$R/dev" && exec chroot "$R" "$@"' \
    in_root "$R" "$@"
}

# What a node's apt sees (the build mirror may be a host-local one).
if [ "$MACHINE" = 0 ]; then
cat > "$R/etc/apt/sources.list" <<S
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
S
chmod 644 "$R/etc/apt/sources.list"
fi

# User ubuntu (uid/gid 1000) with passwordless sudo, as on HyperPod's AMI.
if ! in_root id -u ubuntu >/dev/null 2>&1; then
  in_root groupadd -g 1000 ubuntu
  in_root useradd -m -u 1000 -g 1000 -s /bin/bash ubuntu
fi
printf 'ubuntu ALL=(ALL) NOPASSWD:ALL\n' > "$R/etc/sudoers.d/90-ubuntu"
chmod 440 "$R/etc/sudoers.d/90-ubuntu"

# /opt/slurm -> /opt/slurm-<version>: bin/ and sbin/ link Debian's binaries; etc/ is real and
# /etc/slurm points at it, so Debian's binaries and HyperPod's paths read the same files.
version=$(in_root dpkg-query -W -f='${Version}' slurmd)
version=${version#*:}; version=${version%%-*}
V=/opt/slurm-$version
install -d -m 755 "$R$V" "$R$V/bin" "$R$V/sbin" "$R$V/etc" "$R$V/etc/plugstack.conf.d"
ln -sfn "slurm-$version" "$R/opt/slurm"
in_root dpkg -L slurm-client slurmd slurmctld slurmdbd | grep -E '^/usr/s?bin/[^/]+$' | sort -u |
  while read -r f; do
    dir=bin; case $f in /usr/sbin/*) dir=sbin ;; esac
    # Debian ships slurmd as slurmd-wlm behind an alternative named slurmd: link the
    # alternative, under the upstream name.
    name=$(basename "$f" -wlm)
    target=$(dirname "$f")/$name
    [ -e "$R$target" ] || [ -L "$R$target" ] || target=$f
    ln -sfn "$target" "$R$V/$dir/$name"
  done
if [ -d "$R/etc/slurm" ] && [ ! -L "$R/etc/slurm" ]; then
  cp -a "$R/etc/slurm/." "$R$V/etc/"
  rm -rf "$R/etc/slurm"
fi
ln -sfn /opt/slurm/etc "$R/etc/slurm"
[ -f "$R$V/etc/plugstack.conf" ] ||
  printf 'include /opt/slurm/etc/plugstack.conf.d/*.conf\n' > "$R$V/etc/plugstack.conf"
: > "$R$V/etc/accounting.conf"
: > "$R$V/etc/gres.conf"
chmod 644 "$R$V/etc/plugstack.conf" "$R$V/etc/accounting.conf" "$R$V/etc/gres.conf"
install -m 644 "$HERE/slurm/cgroup.conf" "$HERE/slurm/slurmdbd.conf.template" "$R$V/etc/"
printf 'export PATH=/opt/slurm/bin:/opt/slurm/sbin:$PATH\n' > "$R/etc/profile.d/slurm.sh"
chmod 644 "$R/etc/profile.d/slurm.sh"
in_root id -u slurm >/dev/null 2>&1 ||
  in_root useradd --system --user-group --home-dir /nonexistent --shell /usr/sbin/nologin slurm
install -d -m 755 "$R/var/spool/slurmd" "$R/var/spool/slurmctld" "$R/var/log/slurm"
in_root chown slurm:slurm /var/spool/slurmd /var/spool/slurmctld /var/log/slurm

# HyperPod-style units (ours in /etc win over Debian's in /lib) and the node agent.
install -m 644 "$HERE"/units/*.service "$R/etc/systemd/system/"
install -d -m 755 "$R/opt/hyperfleet" "$R/opt/hyperfleet/bin" "$R/etc/hyperfleet" \
  "$R/opt/sagemaker_cluster" "$R/opt/ml" "$R/opt/ml/config"
# Mount point for the read-only bind of the host's binary.
[ -e "$R/opt/hyperfleet/bin/hyperfleet" ] || install -m 755 /dev/null "$R/opt/hyperfleet/bin/hyperfleet"

# The DLAMI's dlami-nvme.service (/opt/dlami/nvme: the instance store), which scripts wait for.
install -m 644 "$HERE/ami/dlami-nvme.service" "$R/lib/systemd/system/"

# At boot only munge, dlami-nvme (and the agent) run; lifecycle scripts enable Slurm and MariaDB.
in_root systemctl disable slurmd.service slurmctld.service slurmdbd.service mariadb.service
if [ "$MACHINE" = 1 ]; then
  in_root systemctl daemon-reload
  in_root systemctl enable munge.service dlami-nvme.service
  echo "ami-layer: slurm $version (machine)"
  exit 0
fi
in_root systemctl enable munge.service dlami-nvme.service hyperfleet-agent.service
# Units a node does not need that cost memory or can hang in a container.
for unit in console-getty.service systemd-networkd-wait-online.service \
  e2scrub_all.timer e2scrub_all.service e2scrub_reap.service \
  apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer \
  systemd-timesyncd.service; do
  ln -sfn /dev/null "$R/etc/systemd/system/$unit"
done

# Identity is per node (the provider writes it into each node's upper layer).
: > "$R/etc/machine-id"
chmod 444 "$R/etc/machine-id"
rm -f "$R/var/lib/dbus/machine-id"
printf 'localhost\n' > "$R/etc/hostname"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' > "$R/etc/hosts"
: > "$R/etc/resolv.conf"
chmod 644 "$R/etc/hostname" "$R/etc/hosts" "$R/etc/resolv.conf"
# munge keeps the key its package generated, so it can start; the provider replaces it per cluster.
test -s "$R/etc/munge/munge.key"
echo "ami-layer: slurm $version"
