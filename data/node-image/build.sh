#!/bin/bash
# Builds the node image into ROOTFS (which must not exist yet):
#   1. debootstrap --variant=minbase $SUITE from $MIRROR;
#   2. apt-get install --no-install-recommends of packages.txt, in a chroot;
#   3. ami-layer.sh: what HyperPod's AMI gives a lifecycle script.
# usage: SUITE=bookworm MIRROR=http://deb.debian.org/debian bash build.sh ROOTFS
# Runs as root on a Debian host with debootstrap. Lines "@@step NAME" mark progress.
set -euo pipefail
# What this creates must not depend on the caller's umask or locale (a umask 077 made
# /opt/slurm-* unreadable to slurmctld): fixed here, and explicit modes below.
umask 022
R=${1:?usage: build.sh ROOTFS}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
HERE=$(cd "$(dirname "$0")" && pwd)
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
unset LANG LANGUAGE

# shellcheck source=SCRIPTDIR/lib.sh
. "$HERE/lib.sh"  # in_root

echo "@@step debootstrap"
debootstrap --variant=minbase "$SUITE" "$R" "$MIRROR"

echo "@@step packages"
# No daemon may start while packages are configured (this is a chroot on the host).
printf '#!/bin/sh\nexit 101\n' > "$R/usr/sbin/policy-rc.d"
chmod 755 "$R/usr/sbin/policy-rc.d"
cat > "$R/etc/apt/sources.list" <<S
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
S
printf 'APT::Keep-Downloaded-Packages "false";\n' > "$R/etc/apt/apt.conf.d/90hyperfleet-no-debs"
chmod 644 "$R/etc/apt/sources.list" "$R/etc/apt/apt.conf.d/90hyperfleet-no-debs"
mapfile -t packages < <(sed 's/#.*//' "$HERE/packages.txt" | tr -s ' \t' '\n' | sed '/^$/d')
in_root apt-get update -q
in_root apt-get install -y -q --no-install-recommends "${packages[@]}"

echo "@@step ami-layer"
bash "$HERE/ami-layer.sh" "$R"

echo "@@step cleanup"
in_root apt-get clean
rm -f "$R/usr/sbin/policy-rc.d"
echo "@@step done"
