#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) each on a seed corpus made
# from the repository's fixtures; exits non-zero when a target crashes (a
# panic, an abort, a hang past the per-input timeout, running out of memory),
# leaving the input under fuzz/artifacts/<target>/.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`); the stable toolchain
# is used with RUSTC_BOOTSTRAP=1 for the sanitizer-coverage flags.
#   fuzz/run.sh 60            every target, a minute each
#   fuzz/run.sh 30 packs      one target
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(netns_dumps cluster_objects packs cluster_cache live_response kubeconfig)
root=..
export RUSTC_BOOTSTRAP=1

# Seed corpora, rebuilt each run from what the repository holds, and from
# fuzz/seeds/<target>/.
seed() {
    local target=$1 dir=corpus/$1
    mkdir -p "$dir"
    # Inputs that once crashed a target stay in its corpus.
    if [ -d "seeds/$target" ]; then
        cp seeds/"$target"/* "$dir/"
    fi
    case $target in
    netns_dumps)
        find "$root/tests/fixtures/dumps" "$root/tests/fixtures/nft" \
            "$root/examples/flannel-vxlan/nodes/node-1" \
            -type f -size -256k -exec cp {} "$dir/" \; ;;
    cluster_objects)
        find "$root/tests/fixtures/cluster" "$root"/examples/*/cluster \
            -type f \( -name '*.yaml' -o -name '*.json' \) -size -256k |
            while read -r file; do
                cp "$file" "$dir/$(echo "${file#"$root"/}" | tr '/' '_')"
            done ;;
    live_response)
        # The collector's own Lists, each behind the byte that picks its
        # kind (the order of rbac::contract_kinds).
        local kinds=(nodes namespaces pods services endpointslices daemonsets networkpolicies) i
        for i in "${!kinds[@]}"; do
            find "$root"/examples/*/cluster -type f -name "${kinds[$i]}.*json" -size -256k |
                while read -r file; do
                    { printf "\\$(printf %o "$i")"; cat "$file"; } \
                        >"$dir/$(echo "${file#"$root"/}" | tr '/' '_')"
                done
        done ;;
    kubeconfig)
        # Its seeds are fuzz/seeds/kubeconfig/: a kubeconfig of each kind
        # of credential, and a list of two (split at a NUL byte).
        : ;;
    cluster_cache)
        # Edits of a cache the target writes itself (its doc comment): a
        # cut at its end and no XOR, and a few bytes changed past the magic.
        printf '\377\377\377\377\0\0\0\0' >"$dir/whole"
        printf '\377\377\377\377\010\0\0\0\001\002\003' >"$dir/header" ;;
    packs)
        # pack.yaml NUL first script NUL a lib module, as the target splits them.
        for pack in "$root"/rules/*/ "$root"/plugins/*/ "$root"/tests/fixtures/packs/*/; do
            [ -f "$pack/pack.yaml" ] || continue
            local name script lib
            name=$(basename "$pack")
            script=$(find "$pack" -maxdepth 1 -name '*.rhai' | sort | sed -n 1p)
            lib=
            if [ -d "$pack/lib" ]; then
                lib=$(find "$pack/lib" -maxdepth 1 -name '*.rhai' | sort | sed -n 1p)
            fi
            {
                cat "$pack/pack.yaml"
                printf '\0'
                [ -z "$script" ] || cat "$script"
                printf '\0'
                [ -z "$lib" ] || cat "$lib"
            } >"$dir/$name"
        done ;;
    esac
}

# One build of every target, then each binary run on its own.
cargo fuzz build --sanitizer none
bin=target/$(rustc -vV | sed -n 's/^host: //p')/release

status=0
for target in "${targets[@]}"; do
    seed "$target"
    echo "fuzz: $target for ${seconds}s on $(find "corpus/$target" -type f | wc -l) seeds"
    mkdir -p "artifacts/$target"
    # No sanitizer: skoop is safe Rust but for its counting allocator, and
    # the oracle is a panic, an abort, a timeout or the RSS limit, which
    # libFuzzer catches on its own.
    if ! "$bin/$target" -artifact_prefix="artifacts/$target/" -max_total_time="$seconds" \
        -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 "corpus/$target" 2>"artifacts/$target.log"; then
        tail -n 40 "artifacts/$target.log" >&2
        echo "fuzz: $target FAILED (input in fuzz/artifacts/$target/)" >&2
        status=1
    else
        grep -E '^(Done|stat::(number_of_executed_units|peak_rss_mb))' "artifacts/$target.log" || true
    fi
done
exit $status
