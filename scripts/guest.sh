#!/usr/bin/env bash
# The boot lab's default guest (`pmlab boot`): QEMU, a static busybox for the initramfs, and
# Debian's cloud kernel recent enough for cpuhp.parallel (6.12, from bookworm-backports),
# unpacked (not installed) under ${PMLAB_GUEST_DIR:-/var/cache/pmlab/guest}/x86_64.
# Idempotent; scripts/setup.sh runs it. PMLAB_GUEST_ARM64=1 adds an arm64 guest (Debian's
# arm64 cloud kernel and busybox-static:arm64) and qemu-system-arm.
set -euo pipefail
dir=${PMLAB_GUEST_DIR:-/var/cache/pmlab/guest}
export DEBIAN_FRONTEND=noninteractive
if ! command -v apt-get >/dev/null 2>&1; then
  echo "guest: no apt-get here; install QEMU and busybox yourself and give pmlab boot --kernel" >&2
  exit 0
fi
need=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
[ -x /bin/busybox ] || need+=(busybox-static)
if [ "${PMLAB_GUEST_ARM64:-}" = 1 ]; then
  command -v qemu-system-aarch64 >/dev/null 2>&1 || need+=(qemu-system-arm)
fi
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
backports=/etc/apt/sources.list.d/pmlab-backports.list
updated=
if [ "$codename" = bookworm ] && ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "deb http://deb.debian.org/debian bookworm-backports main" >"$backports"
  apt-get update -q >/dev/null
  updated=1
fi
if [ ${#need[@]} -gt 0 ]; then
  [ -n "$updated" ] || apt-get update -q >/dev/null
  updated=1
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
# One kernel package of `meta`: the newest version whose release starts with `want`, else the
# newest of all; its image unpacked into $1.
fetch_kernel() {
  local out=$1 meta=$2 want=$3 arch=${4:-}
  if ls "$out"/vmlinuz-* >/dev/null 2>&1; then return 0; fi
  [ -n "$updated" ] || { apt-get update -q >/dev/null; updated=1; }
  local ver dep tmp
  ver=$(apt-cache madison "$meta" | awk -v w="$want" '$3 ~ "^"w {print $3; exit}')
  [ -n "$ver" ] || ver=$(apt-cache madison "$meta" | awk 'NR == 1 {print $3}')
  dep=$(apt-cache show "$meta=$ver" | sed -n 's/^Depends: \(linux-image-[^ ,]*\).*/\1/p' | head -1)
  [ -n "$dep" ] || { echo "guest: no kernel package behind $meta" >&2; return 1; }
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -q "$dep${arch:+:$arch}" >/dev/null 2>&1 && dpkg-deb -x ./*.deb x)
  mkdir -p "$out"
  cp "$tmp"/x/boot/vmlinuz-* "$out"/
  rm -rf "$tmp"
  echo "guest: $(basename "$out"/vmlinuz-*) in $out" >&2
}
fetch_kernel "$dir/x86_64" linux-image-cloud-amd64 6.12
if [ "${PMLAB_GUEST_ARM64:-}" = 1 ]; then
  dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64; apt-get update -q >/dev/null; }
  fetch_kernel "$dir/arm64" linux-image-cloud-arm64 6.12 arm64
  if [ ! -x "$dir/busybox-arm64" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -q busybox-static:arm64 >/dev/null 2>&1 && dpkg-deb -x ./*.deb x)
    cp "$tmp"/x/bin/busybox "$dir/busybox-arm64"
    rm -rf "$tmp"
  fi
fi
