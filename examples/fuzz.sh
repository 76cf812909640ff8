#!/usr/bin/env bash
# Coverage-guided fuzzing of every decoder a peer can reach (klog::fuzz,
# fuzz/fuzz_targets/): cargo fuzz (libFuzzer) on the nightly toolchain,
# each target for SECONDS (default 60), starting from its seed corpus in
# fuzz/corpus/TARGET. New inputs go to fuzz/target/corpus/TARGET (not the
# repository); a crash is saved in fuzz/artifacts/TARGET and stops the run.
#
#   bash examples/fuzz.sh [SECONDS] [TARGET...]
#
# Needs the nightly toolchain (rustup toolchain install nightly) and
# cargo-fuzz (installed here if missing). The tests replay the seed corpus
# and a few seconds of its mutations on stable (tests/fuzz_corpus.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(klog_request kafka_request record_batch sasl registry tls_handshake)
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: needs the nightly toolchain: rustup toolchain install nightly" >&2
    exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
status=0
for t in "${targets[@]}"; do
    mkdir -p "fuzz/target/corpus/$t"
    log="fuzz/target/$t.log"
    echo "== $t: ${seconds}s"
    if (cd fuzz && cargo +nightly fuzz run "$t" "target/corpus/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1) >"$log" 2>&1; then
        grep -E "DONE|stat::number_of_executed_units|stat::peak_rss_mb" "$log" | tail -3 || true
    else
        status=1
        grep -E "ERROR|panicked|SUMMARY|Test unit written" "$log" | head -20 || tail -30 "$log"
    fi
done
exit $status
