// kafkajs's admin client listing, describing and deleting consumer groups:
// tests/kafka_admin_groups.rs.
//
//   node kafkajs_admin.js BROKER list
//   node kafkajs_admin.js BROKER describe GROUP
//   node kafkajs_admin.js BROKER delete GROUP
//
// Prints what admin_groups.py prints: each group's id, sorted; "STATE
// MEMBERS" then "CLIENT_ID TOPIC:P,P..." per member; "ok" or "error NAME".
'use strict';
const { Kafka, logLevel, AssignerProtocol } = require('kafkajs');

function assigned(assignment) {
  return Object.keys(assignment)
    .sort()
    .map((t) => `${t}:${[...assignment[t]].sort((a, b) => a - b).join(',')}`)
    .join(' ');
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
