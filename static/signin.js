// Signing a buyer in with the operator's OpenID provider: the authorization code flow with PKCE,
// `state` and `nonce` (docs/protocol.md 1.12, "Signing in"), by oauth4webapi (a maintained
// library from npm, certified for these flows; deploy/stack.sh installs it beside this file).
//
// The page is a public client: its id is the services' identity audience, its redirect URI is
// its own root (`<origin>/`), and the credential it keeps is the ID token, whose audience is that
// client id. Nothing is ever taken from the page's address but an answer to a sign-in this tab
// started itself: the state, the verifier and the nonce live in this tab's sessionStorage, so a
// link carrying someone else's code, state or token signs nobody in.
import * as oauth from "./oauth4webapi.js";

// The sign-in under way in this tab: {state, nonce, verifier, returnTo, at}.
const FLOW_KEY = "floodgate:signin-flow";
// A sign-in not back within this long is abandoned.
const FLOW_LIFETIME_MS = 15 * 60 * 1000;

// Plain http only to a provider on this machine's loopback (a local test provider), as the
// gateway allows it; anything else is https, as the library insists.
function loopbackHttp(url) {
  const host = url.hostname;
  return url.protocol === "http:"
    && (host === "localhost" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host));
}

export class SignIn {
  // `issuer` (the provider's issuer URL) and `clientId` (the page's client id) come from the
  // gateway's page metadata; either empty means the page offers no sign-in.
  constructor({ issuer, clientId }) {
    this.issuer = issuer ? new URL(issuer) : null;
    this.client = { client_id: clientId };
    this.options = this.issuer && loopbackHttp(this.issuer) ? { [oauth.allowInsecureRequests]: true } : {};
    this.server = null;
  }

  get available() { return Boolean(this.issuer && this.client.client_id); }

  get redirectUri() { return `${location.origin}/`; }

  // The provider's metadata, read once from its discovery document (checked to be its own).
  async provider() {
    if (!this.server) {
      const response = await oauth.discoveryRequest(this.issuer, this.options);
      this.server = await oauth.processDiscoveryResponse(this.issuer, response);
    }
    return this.server;
  }

  // Sends the browser to the provider's sign-in; once back, the page goes to `returnTo` (a path
  // on this origin: the sale the buyer was looking at).
  async start(returnTo) {
    const server = await this.provider();
    const verifier = oauth.generateRandomCodeVerifier();
    const flow = {
      state: oauth.generateRandomState(),
      nonce: oauth.generateRandomNonce(),
      verifier,
      returnTo: returnTo.startsWith("/") && !returnTo.startsWith("//") ? returnTo : "/",
      at: Date.now(),
    };
    sessionStorage.setItem(FLOW_KEY, JSON.stringify(flow));
    const url = new URL(server.authorization_endpoint);
    url.searchParams.set("client_id", this.client.client_id);
    url.searchParams.set("redirect_uri", this.redirectUri);
    url.searchParams.set("response_type", "code");
    url.searchParams.set("scope", "openid");
    url.searchParams.set("state", flow.state);
    url.searchParams.set("nonce", flow.nonce);
    url.searchParams.set("code_challenge", await oauth.calculatePKCECodeChallenge(verifier));
    url.searchParams.set("code_challenge_method", "S256");
    location.assign(url.href);
  }

  // If this address is the provider's answer (`?code=` or `?error=`), finishes the sign-in:
  // {token, returnTo} on success, {error} when it is refused or is not this tab's own. Null when
  // the address is no answer. Either way the answer leaves the address bar.
  async finish() {
    const here = new URL(location.href);
    if (!here.searchParams.has("code") && !here.searchParams.has("error")) return null;
    history.replaceState(null, "", "/");
    const saved = sessionStorage.getItem(FLOW_KEY);
    sessionStorage.removeItem(FLOW_KEY);
    let flow = null;
    try { flow = JSON.parse(saved); } catch { flow = null; }
    if (!flow || !this.available || Date.now() - flow.at > FLOW_LIFETIME_MS) {
      return { error: "This page did not start that sign-in, so it was not used." };
    }
    try {
      const server = await this.provider();
      const params = oauth.validateAuthResponse(server, this.client, here, flow.state);
      const response = await oauth.authorizationCodeGrantRequest(
        server, this.client, oauth.None(), params, this.redirectUri, flow.verifier, this.options);
      const result = await oauth.processAuthorizationCodeResponse(
        server, this.client, response, { expectedNonce: flow.nonce, requireIdToken: true });
      return { token: result.id_token, returnTo: flow.returnTo };
    } catch (e) {
      return { error: e instanceof oauth.AuthorizationResponseError
        ? `The sign-in was not completed (${e.error}).`
        : "The sign-in could not be completed." };
    }
  }
}
