#!/usr/bin/env bash
# The one-command quickstart: build the tools, start a broker on a free
# port in a temporary directory, produce lines into a topic of 4
# partitions, read them back, stop the broker, then dump and verify its logs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
bin=$PWD/target/release
data=$(mktemp -d)
broker_pid=
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null || true
    rm -rf "$data"
}
trap cleanup EXIT

# Start the broker; it prints "% Listening on ADDR" when ready.
"$bin/klog-broker" --data-dir "$data/data" --listen 127.0.0.1:0 --partitions 4 2> "$data/broker.log" &
broker_pid=$!
for _ in $(seq 100); do
    addr=$(sed -n 's/^% Listening on //p' "$data/broker.log")
    [ -n "$addr" ] && break
    sleep 0.1
done
[ -n "$addr" ] || { cat "$data/broker.log"; exit 1; }
echo "% broker at $addr"

seq 1 100000 | "$bin/klog-produce" -b "$addr" -t quickstart
"$bin/klog-consume" -b "$addr" -t quickstart -e -q | sort -n | tail -n 3
"$bin/klog-consume" -b "$addr" -t quickstart -p 0 -o -2 -e -q -f 'partition %p offset %o: %s\n'

kill "$broker_pid"          # SIGTERM: a clean shutdown
wait "$broker_pid" || true
broker_pid=
"$bin/klog-dump" --verify "$data/data"
echo "% verified: the broker's logs in $data/data hold 100000 records"
