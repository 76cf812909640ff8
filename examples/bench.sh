#!/usr/bin/env bash
# A shell-scripted benchmark that uses only the binaries, as a user would:
# start a broker, time klog-produce and klog-consume over RECORDS lines of
# 200 bytes, then klog-bench against the same broker, and print a table.
#   bash examples/bench.sh [RECORDS]      (default 2,000,000)
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-2000000}
cargo build --release --locked --quiet
bin=$PWD/target/release
work=$(mktemp -d)
broker_pid=
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$bin/klog-broker" --data-dir "$work/data" --listen 127.0.0.1:0 2> "$work/broker.log" &
broker_pid=$!
for _ in $(seq 100); do
    addr=$(sed -n 's/^% Listening on //p' "$work/broker.log")
    [ -n "$addr" ] && break
    sleep 0.1
done
[ -n "$addr" ] || { cat "$work/broker.log"; exit 1; }

# RECORDS lines of 200 bytes (199 and a newline).
awk -v n="$records" 'BEGIN { s = sprintf("%199s", ""); gsub(/ /, "x", s); for (i = 0; i < n; i++) print s }' > "$work/input"

now() { date +%s.%N; }
rate() { awk -v n="$records" -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", n / (b - a) }'; }

t0=$(now)
"$bin/klog-produce" -b "$addr" -t lines -q --batch 50 < "$work/input"
t1=$(now)
"$bin/klog-consume" -b "$addr" -t lines -e -q > /dev/null
t2=$(now)
bench_produce=$("$bin/klog-bench" produce -b "$addr" -n "$records" -q --json)
bench_consume=$("$bin/klog-bench" consume -b "$addr" -t lines -n "$records" -q --json)
field() { sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" <<< "$1" | cut -d. -f1; }

printf '%-42s %15s\n' "run ($records x 200 B)" "records/s"
printf '%-42s %15s\n' "klog-produce -b (stdin, batch 50, acks=all)" "$(rate "$t0" "$t1")"
printf '%-42s %15s\n' "klog-consume -b -e (to /dev/null)" "$(rate "$t1" "$t2")"
printf '%-42s %15s\n' "klog-bench produce (batch 50, acks=1)" "$(field "$bench_produce" records_per_sec)"
printf '%-42s %15s\n' "klog-bench consume" "$(field "$bench_consume" records_per_sec)"
