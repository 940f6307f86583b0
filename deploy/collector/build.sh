#!/usr/bin/env bash
# Builds skoop's collector image, offline from any container registry: an OCI
# image archive assembled from Debian's own packages (fetched with
# `apt-get download`, unpacked with `dpkg-deb -x`) and, optionally, skoop's
# binary. See README.md beside this script.
#
#   bash deploy/collector/build.sh [--skoop PATH] [--name NAME] OUT.tar
#
# --skoop PATH   put this skoop binary in the image as /usr/local/bin/skoop
# --name NAME    the image's reference (default: skoop's own collector image,
#                skoop.io/collector:<version in Cargo.toml>)
#
# Needs a Debian (bookworm) machine with apt's package lists (`apt-get update`),
# dpkg-deb, tar, gzip, sha256sum and jq. The .deb files are kept in
# ${SKOOP_COLLECTOR_DEBS:-$HOME/.cache/skoop/collector-debs}. As root, the
# finished root file system is checked by running every tool in it (chroot).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/../../Cargo.toml" | head -n 1)
name=skoop.io/collector:$version
skoop=
out=
while [ $# -gt 0 ]; do
	case $1 in
	--skoop) skoop=${2:?--skoop needs a path}; shift 2 ;;
	--name) name=${2:?--name needs an image reference}; shift 2 ;;
	-h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "build.sh: unknown option $1" >&2; exit 2 ;;
	*)
		[ -z "$out" ] || { echo "build.sh: more than one OUT.tar given" >&2; exit 2; }
		out=$1; shift ;;
	esac
done
[ -n "$out" ] || { echo "usage: build.sh [--skoop PATH] [--name NAME] OUT.tar" >&2; exit 2; }
if [ -n "$skoop" ] && [ ! -x "$skoop" ]; then
	echo "build.sh: --skoop $skoop is not an executable file" >&2
	exit 2
fi
for tool in apt-get apt-cache dpkg-deb; do
	command -v "$tool" >/dev/null || { echo "build.sh: $tool is not installed (a Debian machine is needed)" >&2; exit 1; }
done

# What skoop's dump commands run (docs/live.md), what finding a pod's
# namespace runs (sh, stat, grep, tr, nsenter), and what `--confirm` sends
# its probes with (nc, ping) and traces drops with (unshare, mount); sleep
# keeps the pod alive.
tools="iproute2 iptables nftables ipset ipvsadm conntrack procps util-linux bpftool coreutils dash grep
  netcat-openbsd iputils-ping mount"
# Wanted only by maintainer scripts, which are not run here, or alternatives
# of a library the image already has (libelogind0 for libsystemd0).
skip=" cdebconf debconf dpkg install-info init-system-helpers lsb-base usrmerge usr-is-merged
  perl perl-base perl-modules-5.36 libperl5.36 libfile-find-rule-perl libnumber-compare-perl
  libtext-glob-perl libgdbm-compat4 libgdbm6 libdb5.3 libdebian-installer4 libnewt0.52 libslang2
  libtextwrap1 libelogind0 sysvinit-utils tar debianutils readline-common "
packages=()
for package in $(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
	--no-breaks --no-replaces --no-enhances $tools | grep '^[a-z0-9]' | sort -u); do
	case $skip in *" $package "* | *" $package"$'\n'*) continue ;; esac
	packages+=("$package")
done
if [ ${#packages[@]} -lt 12 ]; then
	echo "build.sh: apt-cache resolved only ${#packages[@]} packages; run apt-get update first" >&2
	exit 1
fi

debs=${SKOOP_COLLECTOR_DEBS:-$HOME/.cache/skoop/collector-debs}
mkdir -p "$debs"
# apt warns that it downloads as root into a directory its _apt user cannot
# read; that is expected here.
if ! (cd "$debs" && apt-get download -q "${packages[@]}" >"$debs/download.log" 2>&1); then
	grep -v 'unsandboxed as root' "$debs/download.log" >&2
	echo "build.sh: apt-get download failed for: ${packages[*]}" >&2
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
mkdir -p "$rootfs"
for package in "${packages[@]}"; do
	# The newest .deb of the package that apt downloaded.
	deb=$(ls -t "$debs/${package}_"*.deb | head -n 1)
	dpkg-deb -x "$deb" "$rootfs"
	dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" >>"$work/contents"
done

# What dpkg's maintainer scripts would have made: /bin/sh, iptables'
# alternatives (the nf_tables backend, Debian's default) and nc's (OpenBSD's),
# a root user.
ln -sf dash "$rootfs/bin/sh"
ln -sf nc.openbsd "$rootfs/bin/nc"
for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -sf xtables-nft-multi "$rootfs/usr/sbin/$t"
done
mkdir -p "$rootfs/etc" "$rootfs/tmp" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$rootfs/run" "$rootfs/var/run"
chmod 1777 "$rootfs/tmp"
echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
echo 'root:x:0:' >"$rootfs/etc/group"
# Documentation and translations: not needed to run.
rm -rf "$rootfs/usr/share/doc" "$rootfs/usr/share/man" "$rootfs/usr/share/info" \
	"$rootfs/usr/share/locale" "$rootfs/usr/share/lintian" "$rootfs/usr/share/bash-completion"
if [ -n "$skoop" ]; then
	install -D -m 0755 "$skoop" "$rootfs/usr/local/bin/skoop"
	echo "skoop $("$skoop" --version | cut -d' ' -f2)" >>"$work/contents"
fi
install -D -m 0644 "$work/contents" "$rootfs/usr/share/skoop/image-contents.txt"

# Every tool skoop runs must start in the image (as root, where chroot can).
if [ "$(id -u)" = 0 ]; then
	for probe in "ip -V" "bridge -V" "iptables-save -V" "iptables-legacy-save -V" "ip6tables-save -V" \
		"nft -v" "ipset version" "ss -V" "sysctl --version" "conntrack -V" "nsenter --version" \
		"stat --version" "grep -V" "tr --version" "sleep --version" \
		"nstat -V" "bpftool version" "nc -h" "ping -V" "unshare -V" "mount -V" "mktemp --version" \
		"ipvsadm -h; [ \$? -ne 127 ]"; do
		# (ipvsadm cannot say its version on a kernel without IPVS; 127 is a
		# missing program or library.)
		chroot "$rootfs" /bin/sh -c "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; $probe" >/dev/null 2>&1 || {
			echo "build.sh: '$probe' does not run in the image:" >&2
			chroot "$rootfs" /bin/sh -c "PATH=/usr/sbin:/usr/bin:/sbin:/bin; $probe" >&2 || true
			exit 1
		}
	done
fi

SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-0} bash "$here/oci-archive.sh" "$rootfs" "$name" "$out" sleep infinity
echo "build.sh: $name: ${#packages[@]} Debian packages$([ -n "$skoop" ] && echo " and skoop"), $(du -sh --apparent-size "$rootfs" | cut -f1) unpacked -> $out" >&2
