#!/usr/bin/env bash
# Mutation testing of the batch module (storage::record: the Kafka and legacy
# formats, compression, the cursor): `cargo mutants` on a scratch crate of that
# module alone (under target/), whose unit tests are the module's own. A mutant
# of the whole crate rebuilds the broker too, about 70 s each on two cores;
# here about 5 s. Needs cargo-mutants (`cargo install cargo-mutants`).
#
#   bash examples/mutants.sh                 # every file of the module, about 2 h
#   bash examples/mutants.sh -f src/storage/record/kafka.rs   # one file
#   bash examples/mutants.sh --list          # the mutants, none run
#
# Arguments go to cargo mutants; JOBS (2) and TIMEOUT (30 s) set its -j and
# --timeout. The outcomes land in target/mutants-crate/mutants.out/. A few
# mutants survive that no test can kill (`|` to `^` on disjoint bits, a fast
# path whose slow path gives the same answer); some killed only by the
# integration tests survive here (the CRC scan's next-header check).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null || {
    echo "mutants.sh: cargo-mutants is not installed (cargo install cargo-mutants)" >&2
    exit 2
}
crate=target/mutants-crate
rm -rf "$crate/src"
mkdir -p "$crate/src/storage"
cp -a src/storage/record src/storage/record.rs "$crate/src/storage/"
cp src/error.rs src/human.rs src/limits.rs src/random.rs "$crate/src/"
cp Cargo.lock "$crate/"
# The module's dependencies, at the versions of Cargo.toml.
deps=$(grep -E '^(crc32c|crc32fast|flate2|lz4_flex|snap|thiserror|zstd|jiff|serde_json) =' Cargo.toml)
cat >"$crate/Cargo.toml" <<EOF
[package]
name = "klog"
version = "0.0.0"
edition = "2021"

[workspace]

[dependencies]
$deps
nix = { version = "0.29", features = ["fs"] }
EOF
cat >"$crate/src/lib.rs" <<'EOF'
//! Scratch crate: klog's storage::record alone, for cargo mutants.
#![allow(dead_code, unreachable_pub, missing_docs)]
pub mod error;
pub mod human;
pub mod limits;
pub mod random;
pub mod storage {
    pub mod record;
}
EOF
cd "$crate"
files=(-f 'src/storage/record.rs' -f 'src/storage/record/*.rs' -f 'src/storage/record/*/*.rs')
for arg in "$@"; do
    # A file named by the caller replaces the whole module.
    if [[ $arg == -f || $arg == --file ]]; then files=(); fi
done
cargo mutants -j "${JOBS:-2}" --timeout "${TIMEOUT:-30}" "${files[@]}" "$@" -- --lib
