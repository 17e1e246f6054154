#!/usr/bin/env bash
# Runs a command in a clone of relaxc inside a fresh Debian bookworm chroot, to check that
# scripts/deps.sh alone sets up everything the build and the tests need.
#
#   scripts/fresh-chroot.sh [COMMIT [COMMAND...]]
#     COMMIT   what to clone from this checkout (default HEAD; committed work only)
#     COMMAND  run with bash -c in the clone's root (default: bash scripts/deps.sh && make build
#              && bash scripts/deps.sh --check build)
#   FRESH_DIR       the chroot (default /tmp/fresh); created with debootstrap when missing
#   FRESH_VARIANT   debootstrap variant (default minbase: no gcc, python3, git, ... at all)
#   FRESH_MIRROR    Debian mirror (default http://deb.debian.org/debian)
#
# Example, the whole CI in a fresh system:  scripts/fresh-chroot.sh HEAD bash .ci/run
# Each call clones anew into FRESH_DIR/root/relaxc (FRESH_KEEP=1: checks COMMIT out in the
# clone that is there, keeping its build directories); the packages deps.sh installed stay, so
# remove FRESH_DIR (after the call, when nothing is mounted) to start from nothing again.
# One call at a time per FRESH_DIR: each unmounts /proc, /dev, /sys there when it ends.
# Needs root; installs Debian's debootstrap when missing (a verification tool of this script's
# own, which the build and CI do not use, so deps.sh does not name it).
# /proc, /dev, /sys are bound in, and /usr/local/cuda read-only: the machine image's CUDA
# toolkit is not a Debian package, so deps.sh cannot install it.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${FRESH_DIR:-/tmp/fresh}"
VARIANT="${FRESH_VARIANT:-minbase}"
MIRROR="${FRESH_MIRROR:-http://deb.debian.org/debian}"
COMMIT="${1:-HEAD}"
[ $# -gt 0 ] && shift
if [ $# -gt 0 ]; then
  CMD="$*"
else
  CMD="bash scripts/deps.sh && make build && bash scripts/deps.sh --check build"
fi

die() { echo "fresh-chroot.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, mount, chroot)"
case "$DIR" in
  "$REPO" | "$REPO"/*) die "FRESH_DIR $DIR is inside the repository; use a directory outside it" ;;
esac
SHA="$(git -C "$REPO" rev-parse --verify "$COMMIT^{commit}")" || die "no commit '$COMMIT' in $REPO"

if [ ! -x "$DIR/usr/bin/apt-get" ]; then
  if ! command -v debootstrap >/dev/null; then # this script's own tool, not the build's
    echo "fresh-chroot.sh: installing debootstrap"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }; then
      die "could not install debootstrap"
    fi
  fi
  echo "fresh-chroot.sh: debootstrap --variant=$VARIANT bookworm $DIR"
  debootstrap --variant="$VARIANT" bookworm "$DIR" "$MIRROR" >"$DIR.debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $DIR.debootstrap.log"
  cat >"$DIR/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  # no daemons start inside the chroot
  printf '#!/bin/sh\nexit 101\n' >"$DIR/usr/sbin/policy-rc.d"
  chmod +x "$DIR/usr/sbin/policy-rc.d"
fi
cp -L /etc/resolv.conf "$DIR/etc/resolv.conf" 2>/dev/null || true

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" || true; done
}
trap cleanup EXIT
bind() { # bind SRC [ro]
  local dst="$DIR$1"
  mkdir -p "$dst"
  mountpoint -q "$dst" && return 0
  mount --rbind "$1" "$dst"
  mount --make-rslave "$dst"
  mounted+=("$dst")
  if [ "${2:-}" = ro ]; then mount -o remount,bind,ro "$dst"; fi
}
bind /proc
bind /dev
bind /sys
if [ -d /usr/local/cuda ]; then
  bind "$(realpath /usr/local/cuda)" ro
  [ -e "$DIR/usr/local/cuda" ] || ln -s "$(realpath /usr/local/cuda)" "$DIR/usr/local/cuda"
  # the image's loader configuration for it too (NVRTC loads libnvrtc-builtins through it)
  for f in /etc/ld.so.conf.d/*; do
    grep -q '^/usr/local/cuda' "$f" 2>/dev/null && cp "$f" "$DIR/etc/ld.so.conf.d/"
  done
  chroot "$DIR" /sbin/ldconfig
fi

# the clone is made here (git on this machine), so git is not needed inside unless the build uses it
if [ -n "${FRESH_KEEP:-}" ] && [ -d "$DIR/root/relaxc/.git" ]; then
  # FRESH_KEEP=1: move the existing clone to COMMIT and keep its build directories
  git -C "$DIR/root/relaxc" fetch -q "$REPO" "$SHA"
else
  rm -rf "$DIR/root/relaxc"
  git clone -q --no-hardlinks "$REPO" "$DIR/root/relaxc"
fi
git -C "$DIR/root/relaxc" -c advice.detachedHead=false checkout -q "$SHA"
echo "fresh-chroot.sh: $SHA in $DIR/root/relaxc: $CMD"
chroot "$DIR" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
  PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /bin/bash -c "cd /root/relaxc && $CMD"
