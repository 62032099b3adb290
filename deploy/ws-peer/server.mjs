// The comparisons' peer (deploy/bench.sh peer): the most used WebSocket server, Node's `ws`,
// doing the least a waiting room must. It accepts, sends each client its ticket and its place
// (as the protocol's ticket and position messages, so the client crate that opens the sessions
// reads them as it reads a gateway's), and holds the connection.
//
// For the fan-out comparison it plays the ops API's resume as the load generator sends it
// (`POST /admin/v1/sales/<sale>/resume`): every client is sent its own new place, one
// JSON.stringify and one send per client, as Floodgate's gateway sends each client a message of
// its own. `GET /stats` answers how many position messages it has sent.
//
//   node server.mjs <port>
import { createServer } from "node:http";
import { WebSocketServer } from "ws";

const port = Number(process.argv[2] || 18090);
let sent = 0;
const http = createServer((request, response) => {
  if (request.method === "POST" && /^\/admin\/v1\/sales\/[^/]+\/resume$/.test(request.url)) {
    const started = process.hrtime.bigint();
    let count = 0;
    for (const socket of wss.clients) {
      socket.place = Math.max(1, socket.place - 1);
      socket.send(JSON.stringify({ type: "position", position: socket.place, eta_secs: socket.place }));
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
