// The memory comparison's peer (deploy/bench.sh peer): the most used WebSocket server, Node's
// `ws`, doing the least a waiting room must: accept, send each client one small JSON message
// (its ticket, as the protocol's ticket message, so the client crate that opens the sessions
// reads it as it reads a gateway's), and hold the connection, answering pings.
//
//   node server.mjs <port>
import { WebSocketServer } from "ws";

const port = Number(process.argv[2] || 18090);
// No compression: Floodgate's gateway does not compress either, and it would cost memory.
const server = new WebSocketServer({ host: "127.0.0.1", port, perMessageDeflate: false });
let tickets = 0;
server.on("connection", (socket, request) => {
  tickets += 1;
  const sale = new URL(request.url, "http://peer").searchParams.get("sale") ?? "";
  socket.send(
    JSON.stringify({
      type: "ticket",
      protocol: 1,
      sale,
      ticket: tickets,
      opens_at_ms: Date.now() + 3600000,
      resume_token: `peer.${tickets}`,
      resumed: false,
      commitment: "0".repeat(64),
    }),
  );
  socket.on("error", () => {});
});
server.on("listening", () => console.log(`listening on 127.0.0.1:${port}`));
