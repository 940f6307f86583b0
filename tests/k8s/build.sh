#!/usr/bin/env bash
# Build the real Kubernetes components skoop's live-cluster tests run, and the
# skoop-testcluster launcher, into OUTDIR.
#
#   bash tests/k8s/build.sh [--all] [OUTDIR]
#
# OUTDIR defaults to ${SKOOP_K8S_BIN:-$HOME/.cache/skoop/k8s-bin}.
# Default targets: kube-apiserver, skoop-testcluster.
# --all adds kube-controller-manager and kube-proxy.
#
# Needs only `go` (the version in go.mod or newer) and the Go module proxy.
# Uses Go's normal module and build caches, so a rebuild on the same machine
# is fast; and each binary carries a stamp (sha256 of go.mod, go.sum, this
# script, the Go sources and `go version`), so an up-to-date binary is not
# rebuilt at all. go's own output goes to OUTDIR/build.log; its tail is shown
# on failure. Prints the path of OUTDIR on its last line.
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
			sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
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

	# Static binaries, no C toolchain needed; no VCS stamping (the checkout may
	# be a bare tree or owned by someone else).
	export CGO_ENABLED=0
	export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false -mod=readonly"

	mkdir -p "$outdir"
	outdir=$(cd "$outdir" && pwd)
	log=$outdir/build.log

	# name:package
	targets=(kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver skoop-testcluster:./cmd/skoop-testcluster)
	if [ "$all" = 1 ]; then
		targets+=(kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager kube-proxy:k8s.io/kubernetes/cmd/kube-proxy)
	fi

	sha256() {
		if command -v sha256sum >/dev/null; then sha256sum | cut -d' ' -f1; else shasum -a 256 | cut -d' ' -f1; fi
	}
	stamp=$(
		{
			go version
			echo "GOOS=$(go env GOOS) GOARCH=$(go env GOARCH) GOFLAGS=$GOFLAGS"
			for f in go.mod go.sum build.sh $(find . -name '*.go' -not -path './_*' | LC_ALL=C sort); do
				echo "== $f"
				cat "$f"
			done
		} | sha256
	)

	outdated() {
		todo=()
		for t in "${targets[@]}"; do
			name=${t%%:*}
			if [ -x "$outdir/$name" ] && [ "$(cat "$outdir/.stamp.$name" 2>/dev/null)" = "$stamp" ]; then
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
		echo "build.sh: up to date: $(for t in "${targets[@]}"; do printf '%s ' "${t%%:*}"; done)(stamp ${stamp:0:12})"
		echo "$outdir"
		exit 0
	fi

	k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
	# What Kubernetes' own build (hack/lib/version.sh) stamps in, so /version and
	# `kube-apiserver --version` tell the real release.
	minor=${k8s_version#v1.}
	minor=${minor%%.*}
	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
	done

	names=()
	pkgs=()
	for t in "${todo[@]}"; do
		names+=("${t%%:*}")
		pkgs+=("${t#*:}")
	done
	echo "build.sh: building ${names[*]} (Kubernetes $k8s_version, $(go env GOVERSION)) into $outdir; log: $log"
	start=$(date +%s)
	tmp=$(mktemp -d "$outdir/.tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	{
		echo "# $(date -u +%FT%TZ) go build ${names[*]}"
		go env GOMODCACHE GOCACHE
	} >"$log"
	# One `go build` for all targets: they share most packages, and go runs the
	# work in parallel. It downloads what it needs through the module proxy.
	if ! go build -v -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}" >>"$log" 2>&1; then
		echo "build.sh: go build failed after $(($(date +%s) - start))s; last lines of $log:" >&2
		tail -n 40 "$log" >&2
		exit 1
	fi
	# Rename into place: works even while an old binary is running.
	for n in "${names[@]}"; do
		mv -f "$tmp/$n" "$outdir/$n"
		echo "$stamp" >"$outdir/.stamp.$n"
	done
	secs=$(($(date +%s) - start))
	for n in "${names[@]}"; do
		printf 'build.sh: built %-24s %s\n' "$n" "$(du -h "$outdir/$n" | cut -f1)"
	done
	echo "build.sh: done in ${secs}s"
	echo "$outdir"
}

main "$@"
