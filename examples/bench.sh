#!/usr/bin/env bash
# A shell-scripted benchmark that uses only the binaries, as a user would:
# start a broker, time klog-produce and klog-consume over RECORDS lines of
# 200 bytes, then klog-bench against the same broker; then klog-bench's own
# clusters, replication factor 3 on 3 brokers beside 1 on 1 (acks=all, and
# end-to-end latency at 10 % of each one's throughput); print a table.
#   bash examples/bench.sh [RECORDS]      (default 2,000,000)
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-2000000}
cargo build --release --locked --quiet
bin=${CARGO_TARGET_DIR:-$PWD/target}/release
work=$(mktemp -d)
broker_pid=
cleanup() {
    # Stopped and waited for: it still writes while it shuts down.
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" || true
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
ms() { sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" <<< "$1" | awk '{ printf "%.1f ms", $1 }'; }

# Replication: klog-bench starts each cluster (klog-broker processes and a
# registry in a temporary directory) and sends to the partitions' leaders.
cluster() {
    local shape=("$@")
    local produced rate latency
    sync
    produced=$("$bin/klog-bench" produce "${shape[@]}" -n "$records" -s 200 --batch 50 --acks all -q --json)
    rate=$(( $(field "$produced" records_per_sec) / 10 ))
    latency=$("$bin/klog-bench" latency "${shape[@]}" -n $(( rate * 5 )) --rate "$rate" -q --json)
    echo "$(field "$produced" records_per_sec) $rate $(ms "$latency" latency_ms_p99)"
}
read -r rf3 rf3_rate rf3_p99 < <(cluster --brokers 3 --replication-factor 3)
read -r rf1 rf1_rate rf1_p99 < <(cluster --brokers 1 --replication-factor 1)

printf '%-46s %15s\n' "run ($records x 200 B)" "records/s"
printf '%-46s %15s\n' "klog-produce -b (stdin, batch 50, acks=all)" "$(rate "$t0" "$t1")"
printf '%-46s %15s\n' "klog-consume -b -e (to /dev/null)" "$(rate "$t1" "$t2")"
printf '%-46s %15s\n' "klog-bench produce (batch 50, acks=1)" "$(field "$bench_produce" records_per_sec)"
printf '%-46s %15s\n' "klog-bench consume" "$(field "$bench_consume" records_per_sec)"
printf '%-46s %15s\n' "klog-bench produce RF 3, 3 brokers (acks=all)" "$rf3"
printf '%-46s %15s\n' "klog-bench produce RF 1, 1 broker (acks=all)" "$rf1"
printf '%-46s %15s\n' "  p99 end to end, RF 3, at $rf3_rate/s" "$rf3_p99"
printf '%-46s %15s\n' "  p99 end to end, RF 1, at $rf1_rate/s" "$rf1_p99"
