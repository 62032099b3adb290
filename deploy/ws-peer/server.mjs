// The comparisons' peer (deploy/bench.sh peer): the most used WebSocket server, Node's `ws`,
// doing the least a waiting room must. It accepts, sends each client its ticket and its place
// (as the protocol's ticket and position messages, so the client crate that opens the sessions
// reads them as it reads a gateway's), and holds the connection.
//
// For the fan-out comparison it plays the ops API's resume as the load generator sends it
// (`POST /admin/v1/sales/<sale>/resume`): every client is sent its new place by the same
// freshness contract as Floodgate's gateway (docs/protocol.md: exact in the front 1,000, rounded
// up to the 1 % grid beyond), each distinct message serialised once and its bytes shared, as the
// gateway shares them. `GET /stats` answers how many position messages it has sent.
//
//   node server.mjs <port>
import { createServer } from "node:http";
import { WebSocketServer } from "ws";

const port = Number(process.argv[2] || 18090);

// The freshness grid (floodgate_protocol::freshness::shown): exact up to 1,000, then rounded up
// to a hundredth of the segment (cut at 1, 2 and 5 times a power of ten).
function shown(position) {
  if (position <= 1000) return position;
  let low = 1000;
  for (;;) {
    const next = String(low)[0] === "2" ? (low / 2) * 5 : low * 2;
    if (position <= next) break;
    low = next;
  }
  const step = low / 100;
  return Math.ceil(position / step) * step;
}
let sent = 0;
const http = createServer((request, response) => {
  if (request.method === "POST" && /^\/admin\/v1\/sales\/[^/]+\/resume$/.test(request.url)) {
    const started = process.hrtime.bigint();
    let count = 0;
    const frames = new Map();
    for (const socket of wss.clients) {
      socket.place = Math.max(1, socket.place - 1);
      const position = shown(socket.place);
      let frame = frames.get(position);
      if (frame === undefined) {
        frame = Buffer.from(JSON.stringify({ type: "position", position, eta_secs: position }));
        frames.set(position, frame);
      }
      socket.send(frame, { binary: false });
      count += 1;
    }
    sent += count;
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    console.log(`broadcast: ${count} position messages queued in ${ms.toFixed(1)} ms`);
    response.writeHead(204).end();
  } else if (request.method === "GET" && request.url === "/stats") {
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ position_messages_sent: sent, clients: wss.clients.size }));
  } else {
    response.writeHead(404).end();
  }
});
// No compression: Floodgate's gateway does not compress either, and it would cost memory.
const wss = new WebSocketServer({ server: http, perMessageDeflate: false });
let tickets = 0;
wss.on("connection", (socket, request) => {
  tickets += 1;
  socket.place = tickets;
  const sale = new URL(request.url, "http://peer").searchParams.get("sale") ?? "";
  socket.send(
    JSON.stringify({
      type: "ticket",
      protocol: 1,
      sale,
      ticket: tickets,
      opens_at_ms: Date.now(),
      resume_token: `peer.${tickets}`,
      resumed: false,
      commitment: "0".repeat(64),
    }),
  );
  socket.send(JSON.stringify({ type: "position", position: socket.place, eta_secs: null }));
  socket.on("error", () => {});
});
http.listen(port, "127.0.0.1", () => console.log(`listening on 127.0.0.1:${port}`));
