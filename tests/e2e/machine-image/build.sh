#!/bin/bash
# Builds a layer of the ssh test machines' image (a test fixture, not a product path; see
# tests/e2e/ssh_machines.py, which keys, locks and caches what this builds):
#   build.sh bare ROOTFS
#       debootstrap --variant=minbase with systemd, openssh-server, sudo, sshfs (FUSE) and
#       iproute2; no ssh host keys, an empty machine-id and resolv.conf (each machine gets its
#       own at boot); root logs in with a key only.
#   build.sh site UPPER BARE_ROOTFS PACKAGE...
#       the packages a HyperPod node needs, installed over BARE_ROOTFS into the overlay upper
#       directory UPPER (a machine mounts lowerdir=UPPER:BARE_ROOTFS); their daemons disabled,
#       as on a server where nothing has been set up yet.
# SUITE and MIRROR as in data/node-image/build.sh. Runs as root. "@@step NAME" marks progress.
set -euo pipefail
umask 022
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
unset LANG LANGUAGE
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
HERE=$(cd "$(dirname "$0")" && pwd)
layer=${1:?usage: build.sh bare ROOTFS | build.sh site UPPER BARE_ROOTFS PACKAGE...}
shift

# Runs a command chrooted into the root $R, with /proc, /dev and the host's resolver, in a
# private mount namespace so that no mount outlives it. With $LOWER set, $R is first mounted
# as an overlay of $UPPER over $LOWER (the site layer).
in_root() {
  unshare --mount --propagation private -- /bin/sh -c '
    set -e
    R=$1; shift
    if [ -n "$LOWER" ]; then
      mount -t overlay overlay -o "lowerdir=$LOWER,upperdir=$UPPER,workdir=$WORK" "$R"
    fi
    mount -t proc proc "$R/proc"
    mount --rbind /dev "$R/dev"
    mount --bind /etc/resolv.conf "$R/etc/resolv.conf"
    exec chroot "$R" "$@"' in_root "$R" "$@"
}

case "$layer" in
bare)
  R=${1:?build.sh bare ROOTFS}
  export LOWER=""
  echo "@@step debootstrap"
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,openssh-server,iproute2,sudo,fuse3,sshfs,ca-certificates \
    "$SUITE" "$R" "$MIRROR"
  echo "@@step configure"
  cat > "$R/etc/apt/sources.list" <<S
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
S
  printf 'APT::Keep-Downloaded-Packages "false";\n' > "$R/etc/apt/apt.conf.d/90hyperfleet-no-debs"
  install -m 644 "$HERE/sshd_config" "$R/etc/ssh/sshd_config.d/50-hyperfleet-test.conf"
  # The shared image has no identity: host keys and machine-id are written per machine.
  rm -f "$R"/etc/ssh/ssh_host_*
  : > "$R/etc/machine-id"
  rm -f "$R/etc/resolv.conf"
  : > "$R/etc/resolv.conf"
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$R/etc/hosts"
  install -d -m 700 "$R/root/.ssh"
  in_root apt-get clean
  chmod 644 "$R/etc/apt/sources.list" "$R/etc/apt/apt.conf.d/90hyperfleet-no-debs" \
    "$R/etc/resolv.conf" "$R/etc/hosts" "$R/etc/machine-id"
  ;;
site)
  R=$(mktemp -d /tmp/hf-site-root.XXXXXX)
  export UPPER=${1:?build.sh site UPPER BARE_ROOTFS PACKAGE...}
  export LOWER=${2:?build.sh site UPPER BARE_ROOTFS PACKAGE...}
  shift 2
  WORK=$(mktemp -d "$(dirname "$UPPER")/work.XXXXXX")
  export WORK
  trap 'rmdir "$R"; rm -rf "$WORK"' EXIT
  mkdir -p "$UPPER"
  echo "@@step packages"
  # No daemon may start while packages are configured (a chroot on the host).
  in_root /bin/sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d'
  in_root apt-get update -q
  in_root apt-get install -y -q --no-install-recommends "$@"
  echo "@@step configure"
  # Installed, not set up: provisioning (the AMI layer) enables what a node runs.
  in_root /bin/sh -c 'for u in munge slurmd slurmctld slurmdbd mariadb; do
      if [ -e "/lib/systemd/system/$u.service" ]; then systemctl disable "$u.service"; fi
    done'
  in_root apt-get clean
  in_root rm -f /usr/sbin/policy-rc.d
  ;;
*)
  echo "build.sh: unknown layer $layer" >&2
  exit 2
  ;;
esac
echo "@@step done"
