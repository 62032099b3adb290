// The memory comparison's peer (deploy/bench.sh peer): the most used WebSocket server, Node's
// `ws`, doing the least a waiting room must: accept, send each client one small JSON message
// (its ticket), and hold the connection, answering pings.
//
//   node server.mjs <port>
import { WebSocketServer } from "ws";

const port = Number(process.argv[2] || 18090);
// No compression: Floodgate's gateway does not compress either, and it would cost memory.
const server = new WebSocketServer({ host: "127.0.0.1", port, perMessageDeflate: false });
let tickets = 0;
server.on("connection", (socket) => {
  tickets += 1;
  socket.send(JSON.stringify({ type: "ticket", ticket: tickets }));
  socket.on("error", () => {});
});
server.on("listening", () => console.log(`listening on 127.0.0.1:${port}`));
