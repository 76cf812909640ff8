#!/usr/bin/env bash
# A failover soak, with the binaries only: ROUNDS times (default 50), three
# brokers on a directory registry (--replication-factor 3
# --min-insync-replicas 2), a producer with --acks all --report fed numbers
# continuously, the leader of partition 0 killed with SIGKILL and started
# again KILLS times (default 5); then every acknowledged record (the
# report) must be read back by a consumer at its acknowledged offset, and
# every replica must pass klog-dump --verify. tests/replication.rs runs the
# same loop once per scenario, with more checks (byte-identical replicas).
#
#   bash examples/failover_soak.sh            # 50 rounds
#   ROUNDS=3 KILLS=2 bash examples/failover_soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-50}
kills=${KILLS:-5}
cargo build --locked --quiet
bin=${KLOG_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/debug}
command -v jq > /dev/null || { echo "error: jq is needed" >&2; exit 1; }

work=
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    # An if, not `&&`: the trap's last status is the script's.
    if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# start_broker N: starts broker N on its data directory, waits until it listens.
start_broker() {
    local n=$1
    : > "$work/broker$n.log"
    "$bin/klog-broker" --data-dir "$work/data$n" --listen 127.0.0.1:0 --registry "$work/reg" \
        --replication-factor 3 --min-insync-replicas 2 --session-timeout 2s \
        --replica-lag-time 3s 2>> "$work/broker$n.log" &
    pids[n]=$!
    for _ in $(seq 300); do
        grep -q '^% Listening on' "$work/broker$n.log" && return 0
        sleep 0.1
    done
    cat "$work/broker$n.log" >&2
    return 1
}

# state: "LEADER EPOCH ISR-SIZE" of t-0.
state() {
    "$bin/klog-dump" --registry "$work/reg" --json |
        jq -r 'select(.type == "partition" and .topic == "t" and .partition == 0)
               | "\(.leader) \(.leader_epoch) \(.isr | length)"'
}

# wait_for WHAT COMMAND...: runs COMMAND every 0.1 s until it succeeds (30 s at most).
wait_for() {
    local what=$1
    shift
    for _ in $(seq 300); do
        "$@" && return 0
        sleep 0.1
    done
    echo "error: round $round: $what did not happen" >&2
    return 1
}

full_isr() { read -r _ _ size <<< "$(state)"; [ "${size:-0}" = 3 ]; }
new_leader() { read -r leader epoch _ <<< "$(state)"; [ "$leader" != null ] && [ "$leader" != "$1" ] && [ "${epoch:-0}" -gt "$2" ]; }
unregistered() { ! "$bin/klog-dump" --registry "$work/reg" --json | jq -e --arg id "$1" 'select(.type == "broker" and .id == $id)' > /dev/null; }

for round in $(seq "$rounds"); do
    work=$(mktemp -d)
    pids=()
    for n in 0 1 2; do start_broker "$n"; done
    mkfifo "$work/input"
    "$bin/klog-produce" --registry "$work/reg" -t t --acks all --linger 10ms \
        --message-timeout 60s --report "$work/acks.jsonl" < "$work/input" 2> "$work/producer.log" &
    producer=$!
    (i=0; while :; do seq $((i + 1)) $((i + 20)); i=$((i + 20)); sleep 0.02; done) > "$work/input" &
    feeder=$!
    pids+=("$producer" "$feeder")
    wait_for "a full ISR" full_isr
    for _ in $(seq "$kills"); do
        read -r leader epoch _ <<< "$(state)"
        for n in 0 1 2; do [ "$(cat "$work/data$n/broker-id")" = "$leader" ] && victim=$n; done
        kill -9 "${pids[victim]}"
        wait "${pids[victim]}" 2>/dev/null || true
        wait_for "a new leader after $leader" new_leader "$leader" "$epoch"
        wait_for "$leader unregistered" unregistered "$leader"
        start_broker "$victim"
        wait_for "a full ISR" full_isr
    done
    kill "$feeder"
    wait "$producer" || { cat "$work/producer.log" >&2; exit 1; }
    "$bin/klog-consume" --registry "$work/reg" -t t -e -q -f '%p %o %s\n' | sort > "$work/read"
    jq -r '"\(.partition) \(.offset) \(.value)"' "$work/acks.jsonl" | sort > "$work/acked"
    missing=$(comm -23 "$work/acked" "$work/read" | wc -l)
    if [ "$missing" != 0 ]; then
        echo "error: round $round: $missing acknowledged records not read back at their offsets:" >&2
        comm -23 "$work/acked" "$work/read" | head >&2
        exit 1
    fi
    for n in 0 1 2; do kill "${pids[n]}"; wait "${pids[n]}" || true; done
    for n in 0 1 2; do
        "$bin/klog-dump" --verify "$work/data$n" > "$work/verify" 2>&1 || { cat "$work/verify" >&2; exit 1; }
    done
    echo "% round $round: $(wc -l < "$work/acked") acknowledged records, all read back at their offsets after $kills kills"
    rm -rf "$work"
    work=
done
