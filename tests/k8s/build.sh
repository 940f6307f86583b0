#!/usr/bin/env bash
# Build the real Kubernetes components skoop's live-cluster tests and the
# real-components lab run, and the skoop-testcluster launcher, into OUTDIR.
#
#   bash tests/k8s/build.sh [--all] [OUTDIR]
#
# OUTDIR defaults to ${SKOOP_K8S_BIN:-$HOME/.cache/skoop/k8s-bin}.
# Default targets: kube-apiserver, skoop-testcluster.
# --all adds the node components of the real-components lab:
# kube-controller-manager, kube-proxy, kubelet, containerd (with its runc shim
# and ctr) and runc, flanneld, Calico's calico-node (felix), the CNI plugins
# bridge, host-local, loopback, ptp (kindnet's), flannel, calico and
# calico-ipam (in OUTDIR/cni), Calico's CRDs (OUTDIR/calico-crds),
# cilium-agent and cilium-dbg with Cilium's datapath sources
# (OUTDIR/cilium-lib/bpf), its CRDs (OUTDIR/cilium-crds) and its CNI plugin
# (OUTDIR/cni/cilium-cni), kube-router, and the images the kubelets run, as
# OCI archives:
# pause and skoop's collector (OUTDIR/images/pause.tar, collector.tar).
#
# Needs `go` (the version in go.mod or newer), a C compiler for flanneld (its
# udp backend needs cgo, as in flannel's own release build), runc (cgo, with
# libseccomp-dev) and pause (static), and the Go module proxy; for the
# collector image Debian's apt (deploy/collector/build.sh). Uses Go's normal module and build caches, so a rebuild on the same
# machine is fast; and each binary carries a stamp (sha256 of its Go module's
# go.mod, go.sum and Go sources, this script and `go version`), so an
# up-to-date binary is not rebuilt at all. go's own output goes to
# OUTDIR/build.log; its tail is shown on failure. Prints the path of OUTDIR on
# its last line.
set -euo pipefail

# All in one function that runs only once bash has read the whole file, so
# editing this script while a long build runs cannot derail that build.
main() {
	all=0
	outdir=
	for arg in "$@"; do
		case $arg in
		--all) all=1 ;;
		-h | --help)
			sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'
			exit 0
			;;
		-*) echo "build.sh: unknown option $arg" >&2; exit 2 ;;
		*)
			[ -z "$outdir" ] || { echo "build.sh: more than one OUTDIR given" >&2; exit 2; }
			outdir=$arg
			;;
		esac
	done
	outdir=${outdir:-${SKOOP_K8S_BIN:-$HOME/.cache/skoop/k8s-bin}}

	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	cd "$here"

	command -v go >/dev/null || { echo "build.sh: 'go' is not on PATH; install Go $(sed -n 's/^go //p' go.mod) or newer" >&2; exit 1; }

	# No VCS stamping (the checkout may be a bare tree or owned by someone
	# else); static binaries where the component allows it (cgo per target).
	export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false -mod=readonly"

	mkdir -p "$outdir/cni" "$outdir/images"
	outdir=$(cd "$outdir" && pwd)
	log=$outdir/build.log

	# module directory|name in OUTDIR|package|cgo|build tags. Each module
	# directory has its own go.mod: flannel, the old flannel CNI plugin and
	# containerd pin other versions of modules Kubernetes also uses.
	targets=(
		".|kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|0"
		".|skoop-testcluster|./cmd/skoop-testcluster|0"
	)
	if [ "$all" = 1 ]; then
		targets+=(
			".|kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|0"
			".|kube-proxy|k8s.io/kubernetes/cmd/kube-proxy|0"
			".|kubelet|k8s.io/kubernetes/cmd/kubelet|0"
			"containerd|containerd|github.com/containerd/containerd/v2/cmd/containerd|0"
			"containerd|containerd-shim-runc-v2|github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2|0"
			"containerd|ctr|github.com/containerd/containerd/v2/cmd/ctr|0"
			"containerd|runc|github.com/opencontainers/runc|1|seccomp"
			"flannel|flanneld|github.com/flannel-io/flannel|1"
			"flannel|cni/bridge|github.com/containernetworking/plugins/plugins/main/bridge|0"
			"flannel|cni/host-local|github.com/containernetworking/plugins/plugins/ipam/host-local|0"
			"flannel|cni/loopback|github.com/containernetworking/plugins/plugins/main/loopback|0"
			"flannel|cni/ptp|github.com/containernetworking/plugins/plugins/main/ptp|0"
			"flannel-cni|cni/flannel|github.com/containernetworking/plugins/plugins/meta/flannel|0"
			"calico|calico-node|github.com/projectcalico/calico/node/cmd/calico-node|0"
			"calico|cni/calico|github.com/projectcalico/calico/cni-plugin/cmd/calico|0"
			"cilium|cilium-agent|github.com/cilium/cilium/daemon|0"
			"cilium|cilium-dbg|github.com/cilium/cilium/cilium-dbg|0"
			"cilium|cni/cilium-cni|github.com/cilium/cilium/plugins/cilium-cni|0"
			"kube-router|kube-router|github.com/cloudnativelabs/kube-router/v2/cmd/kube-router|0"
			"images|images/pause.tar|pause"
			"images|images/collector.tar|collector"
		)
	fi
	modules=(. flannel flannel-cni calico containerd cilium kube-router)

	sha256() {
		if command -v sha256sum >/dev/null; then sha256sum | cut -d' ' -f1; else shasum -a 256 | cut -d' ' -f1; fi
	}
	# A stamp per module directory: everything its binaries are built from.
	declare -A stamps
	for module in "${modules[@]}"; do
		prune=()
		for other in "${modules[@]}"; do
			if [ "$other" != . ] && [ "$other" != "$module" ]; then
				prune+=(-path "./$other" -prune -o)
			fi
		done
		stamps[$module]=$(
			{
				go version
				echo "GOOS=$(go env GOOS) GOARCH=$(go env GOARCH) GOFLAGS=$GOFLAGS"
				for f in build.sh "$module/go.mod" "$module/go.sum" $(find "./$module" "${prune[@]}" -name '*.go' -not -path '*/_*' -print | LC_ALL=C sort); do
					echo "== $f"
					cat "$f"
				done
			} | sha256
		)
	done

	# The images: pause from the source in Kubernetes' module, the collector
	# from Debian's packages by deploy/collector/build.sh, named after the
	# version in Cargo.toml.
	stamps[images]=$(
		{
			echo "${stamps[.]}"
			gcc --version 2>/dev/null | head -n 1
			grep -m 1 '^version = ' ../../Cargo.toml
			cat ../../deploy/collector/build.sh ../../deploy/collector/oci-archive.sh
		} | sha256
	)

	outdated() {
		todo=()
		for t in "${targets[@]}"; do
			IFS='|' read -r module name _ _ <<<"$t"
			if [ -f "$outdir/$name" ] && [ "$(cat "$outdir/.stamp.${name//\//_}" 2>/dev/null)" = "${stamps[$module]}" ]; then
				continue
			fi
			todo+=("$t")
		done
	}
	outdated
	# One build at a time per OUTDIR; only when something is to be built, so an
	# up-to-date check never waits for someone else's long build. Look again once
	# the lock is ours: the build we waited for may have done our work.
	if [ ${#todo[@]} -ne 0 ] && command -v flock >/dev/null; then
		exec 9>"$outdir/.build.lock"
		if ! flock -n 9; then
			echo "build.sh: waiting for another build.sh in $outdir" >&2
			flock 9
		fi
		outdated
	fi
	if [ ${#todo[@]} -eq 0 ]; then
		echo "build.sh: up to date: $(for t in "${targets[@]}"; do IFS='|' read -r _ name _ _ <<<"$t"; printf '%s ' "$name"; done)(stamp ${stamps[.]:0:12})"
		echo "$outdir"
		exit 0
	fi

	# What each project's own release build stamps in, so `--version` and
	# kube-apiserver's GET /version tell the real release.
	ldflags_of() {
		local module=$1 version minor flags="-s -w"
		case $module in
		.)
			version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
			# As Kubernetes' hack/lib/version.sh does.
			minor=${version#v1.}
			minor=${minor%%.*}
			for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
				flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
			done
			;;
		calico)
			# The release the served commit is on (go.mod says which).
			for pkg in github.com/projectcalico/calico/felix/buildinfo.GitVersion github.com/projectcalico/calico/node/buildinfo.GitVersion github.com/projectcalico/calico/node/pkg/lifecycle/startup.VERSION; do
				flags+=" -X $pkg=v3.28.4-11-ga0db560f0520"
			done
			;;
		cilium)
			# As Cilium's Makefile.defs does: `cilium-dbg version` and the
			# agent's status then name the release.
			flags+=" -X github.com/cilium/cilium/pkg/version.ciliumVersion=$(go list -m -f '{{.Version}}' github.com/cilium/cilium | sed 's/^v//')"
			;;
		kube-router)
			# As kube-router's Makefile does: `kube-router --version` names the release.
			flags+=" -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$(go list -m -f '{{.Version}}' github.com/cloudnativelabs/kube-router/v2)"
			;;
		flannel-cni)
			flags+=" -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$(go list -m -f '{{.Version}}' github.com/containernetworking/plugins)"
			;;
		containerd)
			flags+=" -X github.com/containerd/containerd/v2/version.Version=$(go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)"
			flags+=" -X main.version=$(go list -m -f '{{.Version}}' github.com/opencontainers/runc | sed 's/^v//')"
			;;
		flannel)
			flags+=" -X github.com/flannel-io/flannel/pkg/version.Version=$(go list -m -f '{{.Version}}' github.com/flannel-io/flannel)"
			flags+=" -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$(go list -m -f '{{.Version}}' github.com/containernetworking/plugins)"
			;;
		esac
		echo "$flags"
	}

	# build_image pause|collector OUT.tar
	build_image() {
		local kind=$1 out=$2 src tag
		echo "## image $kind"
		case $kind in
		pause)
			# Kubernetes' own pause, built as build/pause/Makefile builds it.
			src=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause
			tag=$(sed -n 's/^TAG ?= //p' "$src/Makefile")
			mkdir -p "$tmp/pause-root"
			gcc -Os -Wall -Werror -static -DVERSION="v$tag-skoop" -o "$tmp/pause-root/pause" "$src/linux/pause.c"
			bash ../../deploy/collector/oci-archive.sh "$tmp/pause-root" "registry.k8s.io/pause:$tag" "$out" /pause
			;;
		collector)
			bash ../../deploy/collector/build.sh "$out"
			;;
		esac
	}

	names=()
	for t in "${todo[@]}"; do
		IFS='|' read -r _ name _ _ <<<"$t"
		names+=("$name")
	done
	echo "build.sh: building ${names[*]} ($(go env GOVERSION)) into $outdir; log: $log"
	start=$(date +%s)
	tmp=$(mktemp -d "$outdir/.tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	{
		echo "# $(date -u +%FT%TZ) go build ${names[*]}"
		go env GOMODCACHE GOCACHE
	} >"$log"
	# One `go build` per binary, in its module: they share most packages
	# through Go's build cache. go downloads what it needs through the proxy.
	for t in "${todo[@]}"; do
		IFS='|' read -r module name pkg cgo tags <<<"$t"
		if [ "$module" = images ]; then
			mkdir -p "$tmp/images"
			if ! build_image "$pkg" "$tmp/$name" >>"$log" 2>&1; then
				echo "build.sh: the $pkg image failed after $(($(date +%s) - start))s; last lines of $log:" >&2
				tail -n 40 "$log" >&2
				exit 1
			fi
			continue
		fi
		echo "## $name: go build $pkg (in $module, CGO_ENABLED=$cgo, tags '$tags')" >>"$log"
		if ! (cd "$module" && CGO_ENABLED=$cgo go build -v -tags "$tags" -ldflags "$(ldflags_of "$module")" -o "$tmp/$name" "$pkg") >>"$log" 2>&1; then
			echo "build.sh: go build of $name failed after $(($(date +%s) - start))s; last lines of $log:" >&2
			tail -n 40 "$log" >&2
			exit 1
		fi
	done
	# Rename into place: works even while an old binary is running.
	for t in "${todo[@]}"; do
		IFS='|' read -r module name _ _ <<<"$t"
		mv -f "$tmp/$name" "$outdir/$name"
		echo "${stamps[$module]}" >"$outdir/.stamp.${name//\//_}"
		printf 'build.sh: built %-24s %s\n' "$name" "$(du -h "$outdir/$name" | cut -f1)"
		if [ "$name" = cni/calico ]; then
			# One binary: it is calico-ipam when invoked by that name. And
			# the CRDs its version defines, as Calico's manifests apply them.
			ln -f "$outdir/cni/calico" "$outdir/cni/calico-ipam"
			rm -rf "$outdir/calico-crds"
			cp -r "$(cd calico && go list -m -f '{{.Dir}}' github.com/projectcalico/calico)/libcalico-go/config/crd" "$outdir/calico-crds"
			chmod -R u+w "$outdir/calico-crds"
		fi
		if [ "$name" = cilium-agent ]; then
			# The agent compiles its datapath at run time from these C
			# sources (its --lib-dir), and registers the CRDs the lab applies.
			src=$(cd cilium && go list -m -f '{{.Dir}}' github.com/cilium/cilium)
			rm -rf "$outdir/cilium-lib" "$outdir/cilium-crds"
			mkdir -p "$outdir/cilium-lib"
			cp -r "$src/bpf" "$outdir/cilium-lib/bpf"
			cp -r "$src/pkg/k8s/apis/cilium.io/client/crds" "$outdir/cilium-crds"
			chmod -R u+w "$outdir/cilium-lib" "$outdir/cilium-crds"
		fi
	done
	echo "build.sh: done in $(($(date +%s) - start))s"
	echo "$outdir"
}

main "$@"
