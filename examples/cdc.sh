#!/usr/bin/env bash
# Change data capture on a compacted topic: 1,000,000 updates of 10,000
# rows (each row updated 100 times), compacted to each row's latest
# version, then read back as a table. Prints the disk the partition took
# before and after, and the cleaner's lines (throughput).
#
#   bash examples/cdc.sh            # builds the release tools first
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
bin=$PWD/target/release
work=$(mktemp -d)
broker_pid=
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Segments of 4 MiB, rolled 2 s after their first record: the active
# segment is never cleaned, so the last one must close too.
"$bin/klog-broker" --data-dir "$work/data" --listen 127.0.0.1:0 \
    --log-cleanup-policy compact --segment-bytes 4MiB --segment-age 2s \
    --log-cleaner-backoff 1s 2> "$work/broker.log" &
broker_pid=$!
for _ in $(seq 100); do
    addr=$(sed -n 's/^% Listening on //p' "$work/broker.log")
    [ -n "$addr" ] && break
    sleep 0.1
done
[ -n "$addr" ] || { cat "$work/broker.log"; exit 1; }

rows=10000
updates=1000000
awk -v rows=$rows -v n=$updates 'BEGIN {
    for (i = 0; i < n; i++)
        printf "row%05d:{\"id\":%d,\"version\":%d,\"balance\":%d}\n", i % rows, i % rows, int(i / rows), (i * 7919) % 100000
}' | "$bin/klog-produce" -b "$addr" -t cdc -K : -q
before=$(du -sk "$work/data/cdc-0" | cut -f1)
echo "% produced $updates updates of $rows rows: ${before} KiB on disk"

# One more record, after the segment age: it rolls the last segment of
# updates, which the cleaner may then clean.
sleep 3
echo '_checkpoint:done' | "$bin/klog-produce" -b "$addr" -t cdc -K : -q
records=0
for _ in $(seq 120); do
    records=$("$bin/klog-consume" -b "$addr" -t cdc -e -q | wc -l)
    [ "$records" -le $((rows + 1)) ] && break
    sleep 1
done
after=$(du -sk "$work/data/cdc-0" | cut -f1)
grep '^% Cleaned' "$work/broker.log" || true
echo "% compacted to $records records (the $rows rows and the checkpoint): ${after} KiB on disk"

# The table: each row once, at its latest version (99).
"$bin/klog-consume" -b "$addr" -t cdc -e -q -f '%k %s\n' | awk '
    $1 != "_checkpoint" { rows++; if ($2 !~ /"version":99,/) stale++ }
    END { printf "%% table: %d rows, %d not at their latest version\n", rows, stale; exit (rows != '$rows' || stale) }'

echo "% broker resident memory: $(ps -o rss= -p "$broker_pid") KiB (its key map: --log-cleaner-memory, 128MiB, touched as keys fill it)"
kill "$broker_pid"
wait "$broker_pid" || true
broker_pid=
"$bin/klog-dump" --verify "$work/data"
