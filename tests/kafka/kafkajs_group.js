// kafkajs consumers in one group, with kafkajs's defaults (its own
// assignor, RoundRobinAssigner, whose leader assigns): tests/kafka_groups.rs.
//
//   node kafkajs_group.js BROKER[,BROKER...] TOPIC GROUP COUNT MEMBERS
//
// Starts MEMBERS consumers of GROUP subscribed to TOPIC from the beginning,
// each committing as kafkajs does by default, and waits until they have
// read COUNT distinct records between them, and every member has joined.
// Then prints one JSON line: each member's last assignment and the
// protocol it joined with, and every record read ([partition, offset,
// value]), and disconnects them all (committing).
'use strict';
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [broker, topic, group, countText, membersText] = process.argv.slice(2);
  const count = Number(countText);
  // BROKER may list several, comma-separated: member i bootstraps from
  // the i-th (round robin).
  const brokers = broker.split(',');
  const seen = new Map();
  const records = [];
  const members = [];
  for (let i = 0; i < Number(membersText); i++) {
    const kafka = new Kafka({
      clientId: 'klog-kafkajs',
      brokers: [brokers[i % brokers.length]],
      logLevel: logLevel.ERROR,
      retry: { retries: 20 },
    });
    const consumer = kafka.consumer({ groupId: group });
    const member = { consumer, assignment: null, protocol: null, joins: 0 };
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      member.assignment = e.payload.memberAssignment;
      member.protocol = e.payload.groupProtocol;
      member.joins += 1;
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        const key = `${partition}:${message.offset}`;
        records.push([partition, Number(message.offset), message.value.toString()]);
        seen.set(key, true);
      },
    });
    members.push(member);
  }
  const deadline = Date.now() + 60000;
  const settled = () => {
    if (seen.size < count || members.some((m) => m.assignment === null)) {
      return false;
    }
    // Every partition assigned to exactly one member.
    const owners = new Map();
    for (const m of members) {
      for (const p of m.assignment[topic] || []) {
        owners.set(p, (owners.get(p) || 0) + 1);
      }
    }
    return [...owners.values()].every((n) => n === 1);
  };
  while (!settled()) {
    if (Date.now() > deadline) {
      throw new Error(`read ${seen.size} of ${count} records by the deadline`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const summary = {
    members: members.map((m) => ({
      protocol: m.protocol,
      assignment: m.assignment[topic] || [],
      joins: m.joins,
    })),
    records,
  };
  for (const m of members) {
    await m.consumer.disconnect();
  }
  process.stdout.write(JSON.stringify(summary) + '\n');
}

main().catch((e) => {
  process.stderr.write(`kafkajs_group: ${e.stack || e}\n`);
  process.exit(1);
});
