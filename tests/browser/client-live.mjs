// The JavaScript client against a live gateway (run with `node --experimental-websocket` by
// tests/tests/it/js_client.rs): it joins a sale with the WaitingRoom, pings once, checks every
// message it receives against docs/asyncapi.yaml's schemas, and once admitted books a seat
// through the gateway with Booking and reads the reservation back. Prints what happened as JSON.
//
// Usage: node --experimental-websocket client-live.mjs <gateway http origin> <sale> <pool> <asyncapi.yaml>
import { randomUUID } from 'node:crypto';
import Ajv from 'ajv';

import { Booking, WaitingRoom } from '../../static/floodgate-client.js';
import { load, payloadsByType } from './asyncapi.mjs';

const [origin, sale, pool, asyncapi] = process.argv.slice(2);
const schemas = payloadsByType(await load(asyncapi));
const ajv = new Ajv({ strict: false, allErrors: true });
const validators = new Map([...schemas].map(([type, schema]) => [type, ajv.compile(schema)]));
// The schemas do refuse what breaks the contract (a ticket without its fields, a negative place).
const strict = !validators.get('ticket')({ type: 'ticket' })
  && !validators.get('position')({ type: 'position', position: -1, eta_secs: null });

const seen = [];
const invalid = [];
const outcome = await new Promise((resolve) => {
  const timeout = setTimeout(() => resolve({ error: 'no admission within 30 s' }), 30000);
  const room = new WaitingRoom({
    url: origin.replace(/^http/, 'ws'),
    sale,
    onEvent: async (event) => {
      if (event.kind === 'over') { clearTimeout(timeout); resolve({ error: `over: ${event.reason}` }); }
      if (event.kind !== 'message') return;
      const message = event.message;
      seen.push(message.type);
      const validate = validators.get(message.type);
      if (!validate) invalid.push({ message, errors: 'no such message in the document' });
      else if (!validate(message)) invalid.push({ message, errors: validate.errors });
      if (message.type === 'ticket') room.ping();
      if (message.type === 'admitted') {
        clearTimeout(timeout);
        const booking = new Booking({ origin });
        const reserved = await booking.reserve({ sale, pool, seats: 1, token: message.token, idempotencyKey: randomUUID() });
        const read = reserved.status === 201
          ? await booking.reservation(sale, reserved.body.reservation_id, reserved.body.secret)
          : null;
        resolve({ reserve: reserved.status, read: read?.status, status: read?.body.status });
      }
    },
  });
  room.start();
});
console.log(JSON.stringify({ strict, seen, invalid, ...outcome }));
process.exit(0);
