// Unit tests of static/floodgate-client.js in Node (`node --test`), run by
// tests/tests/it/js_client.rs: the pure parts, and the WaitingRoom's reconnect rules driven by a
// scripted WebSocket and a clock that runs only when told.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, webcrypto } from 'node:crypto';
import { fileURLToPath } from 'node:url';

import {
  Close, WaitingRoom, backoffDelay, drainDelay, fetchPuzzle, newDrawNonce, md5Prefixed, base64url, solvePuzzle, zeroBits,
} from '../../static/floodgate-client.js';
import { closeCodes, load } from './asyncapi.mjs';

const asyncapi = fileURLToPath(new URL('../../docs/asyncapi.yaml', import.meta.url));

test('the close codes are the ones docs/asyncapi.yaml lists', async () => {
  const documented = closeCodes(await load(asyncapi)).sort();
  assert.deepEqual(Object.values(Close).sort(), documented);
});

test('back-off doubles from 0.5 s to a 30 s cap, with jitter of half', () => {
  assert.equal(backoffDelay(0, () => 1), 500);
  assert.equal(backoffDelay(0, () => 0), 250);
  assert.equal(backoffDelay(3, () => 1), 4000);
  assert.equal(backoffDelay(20, () => 1), 30000);
  assert.equal(backoffDelay(20, () => 0), 15000);
  assert.ok(drainDelay(() => 0.999) < 2000);
});

test('a draw nonce is 32 lowercase hex characters, fresh each time', () => {
  const a = newDrawNonce(webcrypto);
  assert.match(a, /^[0-9a-f]{32}$/);
  assert.notEqual(a, newDrawNonce(webcrypto));
});

test("the solver's MD5 is Node's, at every length around the block edges", () => {
  const text = new TextEncoder();
  for (let length = 0; length < 140; length++) {
    const prefix = 'p'.repeat(length);
    const hash = md5Prefixed(text.encode(prefix));
    for (const tail of ['', '0', 'ff3a', '123456789abcdef']) {
      const expected = new Uint8Array(createHash('md5').update(prefix + tail).digest());
      assert.deepEqual(hash(tail), expected, `${length} + ${tail}`);
    }
  }
  // RFC 1321's own test suite (A.5), and in base64url as the edge reads a hash.
  const hex = (bytes) => Buffer.from(bytes).toString('hex');
  assert.equal(hex(md5Prefixed(new Uint8Array())('abc')), '900150983cd24fb0d6963f7d28e17f72');
  assert.equal(hex(md5Prefixed(text.encode('message '))('digest')), 'f96b697d7cb7938d525a2f31aaf161d0');
  assert.equal(base64url(md5Prefixed(text.encode('message '))('digest')), '-WtpfXy3k41SWi8xqvFh0A');
});

test('a puzzle is solved to its difficulty, with the proof the edge checks', async () => {
  assert.equal(zeroBits(new Uint8Array([0, 0x0f])), 12);
  const answer = await solvePuzzle({ kind: 'pow', puzzle: 'p', difficulty: 8 }, webcrypto);
  const [puzzle, nonce, proof] = answer.split('~');
  assert.equal(puzzle, 'p');
  const hash = createHash('md5').update(`p~${nonce}`).digest();
  assert.ok(zeroBits(hash) >= 8);
  assert.equal(proof, hash.toString('base64url'));
});

/** A WebSocket whose server side the test plays; every socket made is kept in `sockets`. */
function scripted() {
  const sockets = [];
  class FakeSocket {
    constructor(url, protocols) {
      this.url = url;
      this.protocols = protocols;
      this.sent = [];
      sockets.push(this);
    }
    send(text) { this.sent.push(JSON.parse(text)); }
    close() {}
    open() { this.onopen?.(); }
    message(body) { this.onmessage?.({ data: JSON.stringify(body) }); }
    closeWith(code, reason = '') { this.onclose?.({ code, reason }); }
  }
  return { sockets, FakeSocket };
}

/** A room on a scripted socket, with a clock the test advances by running the timers. */
function room(options = {}) {
  const { sockets, FakeSocket } = scripted();
  const events = [];
  const timers = [];
  const waiting = new WaitingRoom({
    url: 'ws://gateway', sale: 's1', nonce: 'ab'.repeat(8), crypto: webcrypto,
    WebSocket: FakeSocket, random: () => 0.5,
    setTimeout: (run, ms) => timers.push({ run, ms }),
    onEvent: (event) => events.push(event),
    ...options,
  });
  const runTimers = async () => {
    for (const timer of timers.splice(0)) await timer.run();
  };
  return { waiting, sockets, events, timers, runTimers };
}

const ticket = { type: 'ticket', protocol: 1, sale: 's1', ticket: 7, opens_at_ms: 0, resume_token: 'r2.7..mac.s1', resumed: false, commitment: '0'.repeat(64) };

test('a drained gateway hands over the resume token; the room comes back with it within 2 s', async () => {
  const { waiting, sockets, events, timers, runTimers } = room();
  await waiting.start();
  assert.equal(sockets[0].url, `ws://gateway/ws?sale=s1&nonce=${'ab'.repeat(8)}`);
  sockets[0].open();
  sockets[0].message(ticket);
  assert.deepEqual(events.slice(0, 2), [{ kind: 'resume', token: 'r2.7..mac.s1' }, { kind: 'message', message: ticket }]);
  sockets[0].closeWith(Close.SERVICE_RESTART, 'r2.7..newmac.s1');
  assert.equal(timers.length, 1);
  assert.ok(timers[0].ms < 2000);
  await runTimers();
  // The token rides as a subprotocol, never in the URL (which proxies and CDNs log).
  assert.equal(sockets[1].url, 'ws://gateway/ws?sale=s1');
  assert.deepEqual(sockets[1].protocols, ['floodgate', 'floodgate-resume.r2.7..newmac.s1']);
});

test("a drain's resume token without the edge's seal never replaces the same token sealed", async () => {
  const { waiting, sockets, events, runTimers } = room();
  await waiting.start();
  sockets[0].open();
  const sealed = { ...ticket, resume_token: 'r2.7..mac.s1~AAAAAAAAAAAAAAAAAAAAAA' };
  sockets[0].message(sealed);
  sockets[0].closeWith(Close.SERVICE_RESTART, 'r2.7..mac.s1');
  await runTimers();
  assert.deepEqual(sockets[1].protocols, ['floodgate', `floodgate-resume.${sealed.resume_token}`]);
  assert.equal(events.filter((e) => e.kind === 'resume').length, 1);
  // Another token handed over (a new one) replaces it.
  sockets[1].open();
  sockets[1].closeWith(Close.SERVICE_RESTART, 'r2.7..other.s1');
  await runTimers();
  assert.deepEqual(sockets[2].protocols, ['floodgate', 'floodgate-resume.r2.7..other.s1']);
});

test('a lost connection backs off with jitter, and a message resets the back-off', async () => {
  const { waiting, sockets, timers, runTimers } = room({ resume: 'r2.7..mac.s1' });
  await waiting.start();
  sockets[0].open();
  sockets[0].closeWith(1006);
  assert.equal(timers[0].ms, backoffDelay(0, () => 0.5));
  await runTimers();
  sockets[1].closeWith(1006);
  assert.equal(timers[0].ms, backoffDelay(1, () => 0.5));
  await runTimers();
  sockets[2].open();
  sockets[2].message(ticket);
  sockets[2].closeWith(1006);
  assert.equal(timers[0].ms, backoffDelay(0, () => 0.5));
});

/** A `fetch` answering every request `status`, and the requests it was asked. */
function answering(status) {
  const asked = [];
  const fetch = async (url, init) => { asked.push({ url, headers: init.headers }); return { status }; };
  return { asked, fetch };
}

test('after repeated refusals with a resume token the room asks where its place stands, and joins afresh only if it is gone', async () => {
  const { asked, fetch } = answering(410);
  const { waiting, sockets, events, runTimers } = room({ resume: 'r2.7..dead.s1', fetch });
  await waiting.start();
  for (let i = 0; i < 6; i++) {
    sockets.at(-1).closeWith(1006);
    await runTimers();
  }
  assert.equal(asked[0].url, 'http://gateway/v1/sales/s1/place');
  assert.equal(asked[0].headers['Floodgate-Resume'], 'r2.7..dead.s1');
  assert.ok(events.some((e) => e.kind === 'resume' && e.token === null));
  assert.match(sockets.at(-1).url, /nonce=/);
  assert.deepEqual(sockets.at(-1).protocols, []);
});

test('refusals the place outlives (a busy edge 429, a 503, no answer) never lose the resume token', async () => {
  for (const status of [429, 503, 200]) {
    const { asked, fetch } = answering(status);
    const { waiting, sockets, events, runTimers } = room({ resume: 'r2.7..mac.s1', fetch });
    await waiting.start();
    for (let i = 0; i < 8; i++) {
      sockets.at(-1).closeWith(1006);
      await runTimers();
    }
    assert.ok(asked.length > 0, `${status}: the place was asked about`);
    assert.ok(!events.some((e) => e.kind === 'resume' && e.token === null), `${status}: kept`);
    assert.deepEqual(sockets.at(-1).protocols, ['floodgate', 'floodgate-resume.r2.7..mac.s1']);
  }
  const offline = async () => { throw new TypeError('network'); };
  const { waiting, sockets, runTimers } = room({ resume: 'r2.7..mac.s1', fetch: offline });
  await waiting.start();
  for (let i = 0; i < 8; i++) {
    sockets.at(-1).closeWith(1006);
    await runTimers();
  }
  assert.deepEqual(sockets.at(-1).protocols, ['floodgate', 'floodgate-resume.r2.7..mac.s1']);
});

test('sold out and an expired admission end the session; admission completes it', async () => {
  for (const [code, reason, expected] of [
    [Close.SALE_OVER, 'sold out', { kind: 'over', reason: 'sold_out' }],
    [Close.SALE_OVER, 'admission expired unused', { kind: 'over', reason: 'expired' }],
    [Close.SALE_OVER, 'place taken by its signed-in buyer', { kind: 'over', reason: 'taken' }],
    [Close.UNKNOWN_SALE, '', { kind: 'over', reason: 'unknown_sale' }],
    [Close.TAKEN_OVER, 'this place was taken up by a newer session', { kind: 'over', reason: 'elsewhere' }],
    [Close.NORMAL, '', { kind: 'done' }],
  ]) {
    const { waiting, sockets, events, timers } = room();
    await waiting.start();
    sockets[0].open();
    sockets[0].closeWith(code, reason);
    assert.deepEqual(events.at(-1), expected);
    assert.equal(timers.length, 0, 'no reconnect');
  }
});

test('a signed-in buyer joins with the identity as a subprotocol, and may ping', async () => {
  const { waiting, sockets } = room({ identity: () => 'id-token' });
  await waiting.start();
  assert.deepEqual(sockets[0].protocols, ['floodgate', 'floodgate-identity.id-token']);
  const back = room({ identity: () => 'id-token', resume: 'r2.7.mark.mac.s1' });
  await back.waiting.start();
  assert.deepEqual(back.sockets[0].protocols,
    ['floodgate', 'floodgate-identity.id-token', 'floodgate-resume.r2.7.mark.mac.s1']);
  assert.equal(back.sockets[0].url, 'ws://gateway/ws?sale=s1');
  waiting.ping();
  assert.deepEqual(sockets[0].sent, [{ type: 'ping' }]);
});

test('a new place answers the bot check; a place taken back does not', async () => {
  let asked = 0;
  const challenge = async () => { asked += 1; return 'p~1f'; };
  const fresh = room({ challenge });
  await fresh.waiting.start();
  assert.match(fresh.sockets[0].url, /&challenge=p~1f$/);
  const back = room({ challenge, resume: 'r2.7..mac.s1' });
  await back.waiting.start();
  assert.equal(asked, 1);
  assert.doesNotMatch(back.sockets[0].url, /challenge=/);
});

/** A `fetch` answering `/challenge` with each of `answers` in turn ({status, retryAfter, body}). */
function puzzles(answers) {
  const asked = [];
  const fetch = async (url) => {
    asked.push(url);
    const { status, retryAfter = null, body } = answers.shift();
    return {
      status, ok: status === 200,
      headers: { get: (name) => (name === 'Retry-After' ? retryAfter : null) },
      json: async () => body,
    };
  };
  return { asked, fetch };
}

const puzzle = { kind: 'pow', puzzle: 'p1', difficulty: 4 };
const busy = { error: 'too_many_requests', message: 'slow down' };

test("a busy edge's refusal of the puzzle is waited out, never taken for no puzzle", async () => {
  const slept = [];
  const sleep = async (ms) => { slept.push(ms); };
  const { asked, fetch } = puzzles([
    { status: 429, retryAfter: '1', body: busy },
    { status: 503, body: { error: 'unavailable' } },
    { status: 200, body: puzzle },
  ]);
  assert.deepEqual(await fetchPuzzle({ sale: 's 1', fetch, sleep, random: () => 0.5 }), puzzle);
  assert.deepEqual(asked, Array(3).fill('/v1/sales/s%201/challenge'));
  // Retry-After when given, else the back-off.
  assert.deepEqual(slept, [1000, backoffDelay(1, () => 0.5)]);
  // A sale that asks for no puzzle says so with a 200.
  const none = puzzles([{ status: 200, body: { kind: 'none' } }]);
  assert.equal(await fetchPuzzle({ sale: 's1', fetch: none.fetch, sleep }), null);
  // Refused past every try, or for good: no answer to join with, and no join without one.
  const refused = puzzles(Array(5).fill({ status: 429, retryAfter: '1', body: busy }));
  await assert.rejects(fetchPuzzle({ sale: 's1', fetch: refused.fetch, sleep }), /HTTP 429/);
  assert.equal(refused.asked.length, 5);
  const gone = puzzles([{ status: 404, body: { error: 'unknown_sale' } }]);
  await assert.rejects(fetchPuzzle({ sale: 's1', fetch: gone.fetch, sleep }), /HTTP 404/);
});

test('a bot check that cannot be passed now is tried again after the back-off, not skipped', async () => {
  let asked = 0;
  const challenge = async () => {
    asked += 1;
    if (asked === 1) throw new Error('HTTP 429');
    return 'p~1f';
  };
  const { waiting, sockets, timers, runTimers } = room({ challenge });
  await waiting.start();
  assert.equal(sockets.length, 0, 'no join without the answer');
  assert.equal(timers[0].ms, backoffDelay(0, () => 0.5));
  await runTimers();
  assert.match(sockets[0].url, /&challenge=p~1f$/);
});
