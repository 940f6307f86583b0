#!/usr/bin/env bash
# Pin tests/k8s to one Kubernetes release: k8s.io/kubernetes@vX.Y.Z plus a
# `replace` line for every staging module (k8s.io/api, apimachinery, ...).
#
#   bash tests/k8s/update-k8s.sh v1.37.2
#
# The staging list is generated from k8s.io/kubernetes's own go.mod: every
# module that it both requires at v0.0.0 and replaces with ./staging/src/...
# is pointed at the matching published v0.Y.Z. (Staging modules that kubernetes
# replaces but does not require, such as sample-controller, are left out: they
# are not in the build graph and some are not published for every release.)
# Then `go mod tidy` refreshes go.sum. Needs only `go` and the module proxy.
set -euo pipefail

version=${1:?usage: update-k8s.sh vX.Y.Z (a k8s.io/kubernetes release)}
case $version in
v1.*.*) ;;
*) echo "update-k8s.sh: expected a release like v1.37.2, got $version" >&2; exit 2 ;;
esac
staging=v0.${version#v1.}

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
export CGO_ENABLED=0

k8smod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
[ -f "$k8smod" ] || { echo "update-k8s.sh: could not download k8s.io/kubernetes@$version's go.mod" >&2; exit 1; }

# Modules that kubernetes requires at v0.0.0 ...
required=$(awk '/^require[[:space:]]*\(/{inreq=1; next} inreq && /^\)/{inreq=0} inreq && $2 == "v0.0.0" {print $1}' "$k8smod" | sort -u)
# ... and replaces with a staging directory.
replaced=$(awk '/^replace[[:space:]]*\(/{inrep=1; next} inrep && /^\)/{inrep=0} inrep && $2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$k8smod" | sort -u)
mods=$(comm -12 <(echo "$required") <(echo "$replaced"))
[ -n "$mods" ] || { echo "update-k8s.sh: found no staging modules in $k8smod" >&2; exit 1; }

# Drop the old generated block (between the markers) and write a new one.
tmp=$(mktemp)
awk '/^\/\/ BEGIN generated staging replaces/{skip=1} !skip{print} /^\/\/ END generated staging replaces/{skip=0}' go.mod >"$tmp"
{
	cat "$tmp"
	echo "// BEGIN generated staging replaces: update-k8s.sh $version (do not edit by hand)"
	echo "replace ("
	for m in $mods; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
	echo ")"
	echo "// END generated staging replaces"
} >go.mod
rm -f "$tmp"

go mod edit -require="k8s.io/kubernetes@$version"
go mod tidy
echo "tests/k8s pinned to k8s.io/kubernetes $version ($(echo "$mods" | wc -l) staging modules at $staging)"
