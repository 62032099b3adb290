// A real, certified OpenID Provider for the browser tests: panva's `oidc-provider` (a library)
// in a small Node server, as an operator would run their own sign-in. It issues RS256 ID tokens
// from a key made at start, requires PKCE, lets the page's origin call its token endpoint
// (CORS), and registers clients by Dynamic Client Registration (RFC 7591) with an initial access
// token, so the test can register the page once the gateway's address is known.
//
// Its sign-in page asks for a name (any name, no password: a test server) and skips the
// consent screen, as a provider does for the operator's own first-party client.
//
//   node oidc-provider.mjs <client id> <registration token>
//
// Prints {"issuer": "http://127.0.0.1:<port>"} once listening; stops when stdin closes.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import Provider from "oidc-provider";

const [clientId, registrationToken] = process.argv.slice(2);
if (!clientId || !registrationToken) {
  console.error("usage: node oidc-provider.mjs <client id> <registration token>");
  process.exit(2);
}

const server = createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: "jwk" }), kid: "oidc-test-1", alg: "RS256", use: "sig" };

const provider = new Provider(issuer, {
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString("base64url")] },
  // Anyone who signs in is an account named by what they typed.
  async findAccount(_ctx, sub) {
    return { accountId: sub, async claims() { return { sub }; } };
  },
  // The operator's own page needs no consent screen: a grant for `openid` is made at sign-in.
  async loadExistingGrant(ctx) {
    const { Grant } = ctx.oidc.provider;
    const existing = ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (existing) return Grant.find(existing);
    const grant = new Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope("openid");
    await grant.save();
    return grant;
  },
  // The page is a public client in the buyer's browser: its origin may call the token endpoint.
  clientBasedCORS(_ctx, origin, client) {
    return client.redirectUris.some((uri) => new URL(uri).origin === origin);
  },
  pkce: { required: () => true },
  responseTypes: ["code"],
  scopes: ["openid"],
  claims: { openid: ["sub"] },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true, initialAccessToken: registrationToken, idFactory: () => clientId },
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
});

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

// The provider's own sign-in page: a name, then back into the provider's flow.
async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  if (req.method === "POST") {
    let body = "";
    for await (const chunk of req) {
      body += chunk;
      if (body.length > 4096) { res.writeHead(413).end(); return; }
    }
    const name = new URLSearchParams(body).get("name")?.trim();
    if (!name) { res.writeHead(400).end("a name, please"); return; }
    await provider.interactionFinished(req, res, { login: { accountId: name } }, { mergeWithLastSubmission: false });
    return;
  }
  res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
  res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in</title></head>
<body><h1>Sign in to the test provider</h1>
<form method="post" action="/interaction/${escape(details.uid)}">
<label for="name">Your name</label> <input id="name" name="name" required autocomplete="username">
<button type="submit">Sign in</button></form></body></html>`);
}

const callback = provider.callback();
server.on("request", (req, res) => {
  if (req.url.startsWith("/interaction/")) {
    interaction(req, res).catch((e) => { res.writeHead(400).end(String(e.message)); });
  } else {
    callback(req, res);
  }
});

console.log(JSON.stringify({ issuer }));
process.stdin.resume();
process.stdin.on("end", () => { server.close(); process.exit(0); });
