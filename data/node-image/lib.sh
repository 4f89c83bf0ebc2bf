# Sourced by build.sh and eks-layer.sh (not run by itself); R is the rootfs being built.

# Runs a command in the rootfs with /proc and /dev, inside a private mount namespace, so no
# mount outlives the command (a leaked bind of /dev would make deleting a failed tree unsafe).
# ami-layer.sh keeps its own: the SSH provider ships it alone to run on a machine's /.
in_root() {
  unshare --mount --propagation private -- /bin/sh -c '
    R=$1; shift
    mount -t proc proc "$R/proc" && mount --rbind /dev "$R/dev" && exec chroot "$R" "$@"' \
    in_root "${R:?}" "$@"
}
