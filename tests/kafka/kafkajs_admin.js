// kafkajs's admin client listing, describing and deleting consumer groups:
// tests/kafka_admin_groups.rs.
//
//   node kafkajs_admin.js BROKER list
//   node kafkajs_admin.js BROKER describe GROUP
//   node kafkajs_admin.js BROKER delete GROUP
//   node kafkajs_admin.js BROKER create TOPIC PARTITIONS REPLICAS [validate] [NAME=VALUE...]
//   node kafkajs_admin.js BROKER configs TOPIC
//   node kafkajs_admin.js BROKER alter TOPIC [NAME=VALUE...]
//   node kafkajs_admin.js BROKER delete-topic TOPIC [TIMEOUT_MS]
//   node kafkajs_admin.js BROKER delete-records TOPIC PARTITION OFFSET
//   node kafkajs_admin.js BROKER add-partitions TOPIC COUNT [validate]
//   node kafkajs_admin.js BROKER cluster
//
// Prints what admin_clients.py prints: each group's id,
// sorted; "STATE MEMBERS" then "CLIENT_ID TOPIC:P,P..." per member; "ok"
// or "error NAME"; "NAME=VALUE" per config, sorted; "HOST:PORT" per broker.
'use strict';
const { Kafka, logLevel, AssignerProtocol, ConfigResourceTypes } = require('kafkajs');

function assigned(assignment) {
  return Object.keys(assignment)
    .sort()
    .map((t) => `${t}:${[...assignment[t]].sort((a, b) => a - b).join(',')}`)
    .join(' ');
}

// The NAME=VALUE arguments, as kafkajs's config entries.
function entries(args) {
  return args.filter((a) => a.includes('=')).map((a) => {
    const at = a.indexOf('=');
    return { name: a.slice(0, at), value: a.slice(at + 1) };
  });
}

async function run(admin, command, args) {
  if (command === 'list') {
    const { groups } = await admin.listGroups();
    return groups.map((g) => g.groupId).sort();
  }
  if (command === 'describe') {
    const { groups } = await admin.describeGroups([args[0]]);
    const [group] = groups;
    const lines = [`${group.state} ${group.members.length}`];
    for (const m of group.members) {
      const decoded = AssignerProtocol.MemberAssignment.decode(m.memberAssignment);
      lines.push(`${m.clientId} ${assigned((decoded && decoded.assignment) || {})}`);
    }
    return lines;
  }
  if (command === 'delete') {
    try {
      await admin.deleteGroups([args[0]]);
      return ['ok'];
    } catch (e) {
      const failed = (e.groups || []).find((g) => g.error);
      return [`error ${failed ? failed.error.type : e.type || e.message}`];
    }
  }
  if (command === 'create') {
    try {
      const created = await admin.createTopics({
        validateOnly: args[3] === 'validate',
        // kafkajs looks for a validated topic's leaders too, and fails.
        waitForLeaders: args[3] !== 'validate',
        topics: [{
          topic: args[0],
          numPartitions: Number(args[1]),
          replicationFactor: Number(args[2]),
          configEntries: entries(args.slice(3)),
        }],
      });
      // kafkajs answers false, not an error, for a topic that exists.
      return [created || args[3] === 'validate' ? 'ok' : 'error TOPIC_ALREADY_EXISTS'];
    } catch (e) {
      const failed = (e.errors || []).find((x) => x.type);
      return [`error ${failed ? failed.type : e.type || e.message}`];
    }
  }
  if (command === 'configs') {
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: args[0] }],
    });
    return resources[0].configEntries.map((c) => `${c.configName}=${c.configValue}`).sort();
  }
  if (command === 'delete-records') {
    try {
      // Loads the topic's metadata, which deleteTopicRecords needs.
      await admin.fetchTopicOffsets(args[0]);
      await admin.deleteTopicRecords({
        topic: args[0],
        partitions: [{ partition: Number(args[1]), offset: args[2] }],
      });
      // kafkajs answers nothing: the start, as it lists it.
      const offsets = await admin.fetchTopicOffsets(args[0]);
      const p = offsets.find((o) => o.partition === Number(args[1]));
      return [`ok ${p.low}`];
    } catch (e) {
      // Each partition's error, in kafkajs's DeleteTopicRecords error
      // (wrapped by its retrier).
      const inner = e.partitions ? e : e.cause || e;
      const failed = (inner.partitions || []).map((p) => p.error).find((x) => x && x.type);
      return [`error ${failed ? failed.type : e.type || (e.cause && e.cause.type) || e.message}`];
    }
  }
  if (command === 'delete-topic') {
    try {
      await admin.deleteTopics({ topics: [args[0]], timeout: Number(args[1] || 30000) });
      return ['ok'];
    } catch (e) {
      // kafkajs wraps the broker's error after its retries.
      const failed = (e.errors || []).find((x) => x.type);
      return [`error ${failed ? failed.type : e.type || (e.cause && e.cause.type) || e.message}`];
    }
  }
  if (command === 'alter') {
    try {
      const { resources } = await admin.alterConfigs({
        resources: [{ type: ConfigResourceTypes.TOPIC, name: args[0], configEntries: entries(args.slice(1)) }],
      });
      const failed = resources.find((r) => r.errorCode !== 0);
      return [failed ? `error ${failed.errorCode}` : 'ok'];
    } catch (e) {
      const failed = (e.errors || []).find((x) => x.type);
      return [`error ${failed ? failed.type : e.type || e.message}`];
    }
  }
  if (command === 'add-partitions') {
    try {
      await admin.createPartitions({
        topicPartitions: [{ topic: args[0], count: Number(args[1]) }],
        validateOnly: args.includes('validate'),
      });
      return ['ok'];
    } catch (e) {
      const failed = (e.errors || []).find((x) => x.type);
      return [`error ${failed ? failed.type : e.type || (e.cause && e.cause.type) || e.message}`];
    }
  }
  if (command === 'cluster') {
    const { brokers } = await admin.describeCluster();
    return brokers.map((b) => `${b.host}:${b.port}`).sort();
  }
  throw new Error(`no command ${command}`);
}

async function main() {
  const [broker, command, ...args] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: 'klog-kafkajs-admin', brokers: [broker], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  try {
    for (const line of await run(admin, command, args)) {
      process.stdout.write(`${line}\n`);
    }
  } finally {
    await admin.disconnect();
  }
}

main().catch((e) => {
  process.stderr.write(`kafkajs_admin: ${e.stack || e}\n`);
  process.exit(1);
});
