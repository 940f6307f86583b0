#!/usr/bin/env bash
# Packs a root file system into a one-layer OCI image archive (an OCI image
# layout in a tar file, as `ctr images import`, `skopeo copy oci-archive:…`
# and `podman load` read it), with nothing but tar, gzip, sha256sum and jq.
#
#   bash oci-archive.sh ROOTFS NAME OUT.tar [CMD...]
#
# NAME is the image's full reference (registry/repository:tag); it is written
# as the manifest's `io.containerd.image.name` and, its tag,
# `org.opencontainers.image.ref.name` annotations. CMD is the image's default
# command. The archive is reproducible: file owners, modes as they are, and
# times are set to SOURCE_DATE_EPOCH (default 0), entries sorted by name.
set -euo pipefail

if [ $# -lt 3 ]; then
	echo "usage: oci-archive.sh ROOTFS NAME OUT.tar [CMD...]" >&2
	exit 2
fi
rootfs=$1 name=$2 out=$3
shift 3
[ -d "$rootfs" ] || { echo "oci-archive.sh: $rootfs is not a directory" >&2; exit 2; }
case $name in
*/*:*) ;;
*) echo "oci-archive.sh: image name $name has no registry/repository:tag form" >&2; exit 2 ;;
esac
for tool in tar gzip sha256sum jq; do
	command -v "$tool" >/dev/null || { echo "oci-archive.sh: $tool is not installed" >&2; exit 1; }
done
epoch=${SOURCE_DATE_EPOCH:-0}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
layout=$work/layout
mkdir -p "$layout/blobs/sha256"

# blob FILE: moves FILE into the layout under its digest; prints the digest.
blob() {
	local digest
	digest=$(sha256sum "$1" | cut -d' ' -f1)
	mv "$1" "$layout/blobs/sha256/$digest"
	echo "$digest"
}
size() { stat -c %s "$layout/blobs/sha256/$1"; }

tar --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$epoch" \
	--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
	-C "$rootfs" -cf "$work/layer.tar" .
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -6 "$work/layer.tar"
layer=$(blob "$work/layer.tar.gz")

cmd=$(jq -cn '$ARGS.positional' --args "$@")
created=$(date -u -d "@$epoch" +%FT%TZ)
jq -cn --arg diff "sha256:$diff_id" --argjson cmd "$cmd" --arg created "$created" '{
	created: $created, architecture: "amd64", os: "linux",
	config: ({Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
		+ (if ($cmd | length) > 0 then {Cmd: $cmd} else {} end)),
	rootfs: {type: "layers", diff_ids: [$diff]},
	history: [{created: $created, created_by: "skoop deploy/collector/oci-archive.sh"}]
}' >"$work/config.json"
config=$(blob "$work/config.json")

jq -cn --arg config "sha256:$config" --argjson config_size "$(size "$config")" \
	--arg layer "sha256:$layer" --argjson layer_size "$(size "$layer")" '{
	schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
	config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $config, size: $config_size},
	layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $layer, size: $layer_size}]
}' >"$work/manifest.json"
manifest=$(blob "$work/manifest.json")

jq -cn --arg manifest "sha256:$manifest" --argjson manifest_size "$(size "$manifest")" \
	--arg name "$name" --arg tag "${name##*:}" '{
	schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
	manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $manifest,
		size: $manifest_size, platform: {architecture: "amd64", os: "linux"},
		annotations: {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": $tag}}]
}' >"$layout/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"

tar --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$epoch" -C "$layout" -cf "$out.tmp" .
mv -f "$out.tmp" "$out"
echo "oci-archive.sh: $name: layer $(size "$layer") bytes compressed, archive $(stat -c %s "$out") bytes -> $out" >&2
