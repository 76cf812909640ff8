#!/usr/bin/env bash
# A mirror that loses nothing, as pipes: two clusters on this host (each a
# broker and a registry directory), 1,000,000 records produced into the
# first, mirrored into the second by a consumer group that commits only
# what the second cluster acknowledged. The mirror's producer is killed
# (SIGKILL) mid-way with records in its buffer; the mirror started again
# picks up at the group's committed offsets, and every record arrives.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
bin=$PWD/target/release
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# One broker per cluster, each with its own registry directory.
for c in a b; do
    "$bin/klog-broker" --registry "$work/$c-reg" --data-dir "$work/$c-data" \
        --listen 127.0.0.1:0 --partitions 4 2> "$work/$c.log" &
    pids+=($!)
done
for c in a b; do
    for _ in $(seq 100); do grep -q '^% Listening on' "$work/$c.log" && break; sleep 0.1; done
done

seq 1 1000000 | "$bin/klog-produce" --registry "$work/a-reg" -t events -q
mkfifo "$work/acks"
mirror() {
    "$bin/klog-consume" --registry "$work/a-reg" -G mirror -t events -J -q "$@" \
        --commit-from "$work/acks" \
        | "$bin/klog-produce" --registry "$work/b-reg" -t events -J -q --report "$work/acks"
}

# Killed mid-way: what its producer held is not committed.
mirror 2> "$work/mirror.log" &
sleep 0.5
pkill -KILL -f "klog-produce --registry $work/b-reg" || true
wait $! 2> /dev/null || true
echo "% killed the mirror after $("$bin/klog-consume" --registry "$work/b-reg" -t events -e -q | wc -l) records"

# Started again with -e: it ends once the group committed the source's end.
mirror -e
echo "% mirrored: $("$bin/klog-consume" --registry "$work/b-reg" -t events -e -q | sort -un | wc -l) distinct of 1000000"
