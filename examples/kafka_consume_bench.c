/*
 * A Kafka consumer that counts records and prints none, in C on
 * librdkafka (Debian's librdkafka-dev), against a running broker's Kafka
 * listener:
 *
 *     cc -O2 -o target/kafka_consume_bench examples/kafka_consume_bench.c -lrdkafka
 *     target/kafka_consume_bench BOOTSTRAP TOPIC RECORDS
 *
 * Reads partition 0 of TOPIC from its start (assigned, no group) until
 * RECORDS records have come, in batches of up to 10,000
 * (rd_kafka_consume_batch_queue), checking each for an error and nothing
 * else, and prints records/s from the first record to the last on one
 * line. Set beside `klog-consume -e -q TOPIC > /dev/null` of the same
 * records, it is what the Kafka listener gives a consumer that does not
 * print (kcat's printing, and Python's objects in confluent-kafka, cost
 * more than the broker). Exit 1 on an error or 30 s without records.
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "kafka_consume_bench: %s: %s\n", key, err);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: kafka_consume_bench BOOTSTRAP TOPIC RECORDS\n");
        return 2;
    }
    long long records = atoll(argv[3]);
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", argv[1]);
    set(conf, "group.id", "kafka-consume-bench");
    set(conf, "enable.auto.commit", "false");
    set(conf, "fetch.max.bytes", "67108864");
    set(conf, "max.partition.fetch.bytes", "8388608");
    set(conf, "queued.max.messages.kbytes", "262144");
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "kafka_consume_bench: %s\n", err);
        return 1;
    }
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, argv[2], 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    if (e) {
        fprintf(stderr, "kafka_consume_bench: assign: %s\n", rd_kafka_err2str(e));
        return 1;
    }
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(rk);
    static rd_kafka_message_t *batch[10000];
    long long seen = 0;
    double start = 0, idle_since = now();
    while (seen < records) {
        ssize_t n = rd_kafka_consume_batch_queue(queue, 1000, batch, 10000);
        if (n < 0) {
            fprintf(stderr, "kafka_consume_bench: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
            return 1;
        }
        if (n == 0) {
            if (now() - idle_since > 30) {
                fprintf(stderr, "kafka_consume_bench: only %lld of %lld records in 30 s\n", seen, records);
                return 1;
            }
            continue;
        }
        if (start == 0)
            start = now();
        idle_since = now();
        for (ssize_t i = 0; i < n; i++) {
            if (batch[i]->err && batch[i]->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                fprintf(stderr, "kafka_consume_bench: %s\n", rd_kafka_message_errstr(batch[i]));
                return 1;
            }
            if (!batch[i]->err)
                seen++;
            rd_kafka_message_destroy(batch[i]);
        }
    }
    double took = now() - start;
    printf("%lld records consumed, %.1f records/sec\n", seen, seen / took);
    rd_kafka_queue_destroy(queue);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}
