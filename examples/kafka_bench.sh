#!/usr/bin/env bash
# The Kafka path beside klog's own, with the binaries only, as a user would
# (issue 14): start a broker with a Kafka listener, then time
#   kcat -P of RECORDS lines of 200 bytes    and  kcat -C -e of them back,
#   klog-produce of the same lines           and  klog-consume -e of them back,
# in the same run, each into its own topic, and print records/s for each.
#   bash examples/kafka_bench.sh [RECORDS]     (default 1,000,000)
# It uses the klog binaries on the PATH (cargo install --path . --locked),
# or those of $KLOG_BIN (a directory), and Debian's kcat (apt-get install
# kcat), or $KLOG_KCAT.
set -euo pipefail
records=${1:-1000000}
bin=${KLOG_BIN:+$KLOG_BIN/}
kcat=${KLOG_KCAT:-kcat}
for tool in "${bin}klog-broker" "${bin}klog-produce" "${bin}klog-consume" "$kcat"; do
    command -v "$tool" >/dev/null || { echo "error: $tool not found" >&2; exit 1; }
done
work=$(mktemp -d)
broker_pid=
cleanup() {
    # Stopped and waited for: it still writes while it shuts down.
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" || true
    rm -rf "$work"
}
trap cleanup EXIT

"${bin}klog-broker" --data-dir "$work/data" --listen 127.0.0.1:0 \
    --kafka-listen 127.0.0.1:0 2> "$work/broker.log" &
broker_pid=$!
addr=
for _ in $(seq 100); do
    addr=$(sed -n 's/^% Listening on //p' "$work/broker.log")
    [ -n "$addr" ] && break
    sleep 0.1
done
kafka=$(sed -n 's/^% Listening for Kafka clients on //p' "$work/broker.log")
[ -n "$addr" ] && [ -n "$kafka" ] || { cat "$work/broker.log" >&2; exit 1; }

# RECORDS lines of 200 bytes (199 and a newline), each numbered.
awk -v n="$records" 'BEGIN { s = sprintf("%190s", ""); gsub(/ /, "x", s);
    for (i = 0; i < n; i++) printf "%08d-%s\n", i, s }' > "$work/input"

now() { date +%s.%N; }
rate() { awk -v n="$records" -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", n / (b - a) }'; }
# Each consumer's output is compared with the input as it streams (one
# partition keeps the order): a lost, repeated or changed line fails the run.
same() {
    cmp -s - "$work/input" || { echo "error: $1 did not read back the $records lines" >&2; exit 1; }
}

t0=$(now)
"$kcat" -b "$kafka" -P -t kcat -X message.timeout.ms=60000 < "$work/input"
t1=$(now)
"$kcat" -b "$kafka" -C -t kcat -e -q | same "kcat -C"
t2=$(now)
"${bin}klog-produce" -b "$addr" -t klog -q < "$work/input"
t3=$(now)
"${bin}klog-consume" -b "$addr" -t klog -e -q | same "klog-consume"
t4=$(now)

printf '%-44s %15s\n' "run ($records x 200 B, one partition)" "records/s"
printf '%-44s %15s\n' "kcat -P (Kafka listener, librdkafka defaults)" "$(rate "$t0" "$t1")"
printf '%-44s %15s\n' "kcat -C -e (Kafka listener, | cmp)" "$(rate "$t1" "$t2")"
printf '%-44s %15s\n' "klog-produce -b (defaults: acks=all)" "$(rate "$t2" "$t3")"
printf '%-44s %15s\n' "klog-consume -b -e (| cmp)" "$(rate "$t3" "$t4")"
