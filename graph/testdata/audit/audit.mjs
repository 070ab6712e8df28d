// Runs graphql-http's server audits (GraphQL over HTTP conformance) against the URL given as the
// first argument and prints one JSON object per audit: id, name, status, and for an audit that
// did not pass, the reason and the response's status and body.
import { serverAudits } from 'graphql-http';

const url = process.argv[2];
if (!url) {
  console.error('usage: node audit.mjs URL');
  process.exit(2);
}
const results = [];
for (const audit of serverAudits({ url })) {
  const r = await audit.fn();
  const out = { id: r.id, name: r.name, status: r.status };
  if (r.status !== 'ok') {
    out.reason = r.reason;
    out.httpStatus = r.response.status;
    out.body = await r.response.text().catch((e) => String(e));
  }
  results.push(out);
}
console.log(JSON.stringify(results));
