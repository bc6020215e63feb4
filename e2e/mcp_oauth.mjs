// An MCP client that signs in to chatd with OAuth, as the official
// TypeScript SDK's client does it on its own: /mcp answers 401, the SDK's
// auth() discovers the metadata, registers the client, and hands
// redirectToAuthorization the URL to open in the person's browser. Here the
// script plays the browser and the person: it opens the URL, follows it to
// the web app's consent screen, reads the request there and answers it
// through the consent API with the person's key, choosing their agent; the
// code comes back in the redirect. finishAuth trades it for tokens, and a
// new connection calls whoami as the agent. Then the access token is
// spoiled: the SDK meets a 401, refreshes with its refresh token, and the
// call goes through. It prints one JSON line per step, for the test.
//
// Environment: CHATD_URL (http://host:port), PERSON_KEY (the person's Human
// API key), AGENT_ID (the agent the person chooses).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const log = (step) => console.log(JSON.stringify(step));
const fail = (why) => {
  log({ step: "failed", why });
  process.exit(1);
};

const base = process.env.CHATD_URL;
const person = { "X-API-Key": process.env.PERSON_KEY, "Content-Type": "application/json" };
// Nothing listens there: the browser's last hop is read, not followed.
const redirectUrl = "http://127.0.0.1:8976/callback";

// provider keeps what the SDK asks it to, in memory.
class Provider {
  constructor() {
    this.saved = {};
    this.code = null;
  }
  get redirectUrl() { return redirectUrl; }
  get clientMetadata() {
    return {
      client_name: "chatd e2e (TypeScript SDK)", redirect_uris: [redirectUrl], token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"], response_types: ["code"],
    };
  }
  state() { return "e2e-state"; }
  clientInformation() { return this.saved.client; }
  saveClientInformation(info) {
    this.saved.client = info;
    log({ step: "registered", client_id: info.client_id, auth_method: info.token_endpoint_auth_method });
  }
  tokens() { return this.saved.tokens; }
  saveTokens(tokens) {
    this.saved.tokens = tokens;
    log({ step: "tokens", access: tokens.access_token.slice(0, 8), refresh: tokens.refresh_token?.slice(0, 8), expires_in: tokens.expires_in });
  }
  saveCodeVerifier(v) { this.saved.verifier = v; }
  codeVerifier() { return this.saved.verifier; }
  async redirectToAuthorization(url) { this.code = await playBrowser(url); }
}

// playBrowser opens the authorization URL as the person's browser would,
// and answers the consent screen as the person would.
async function playBrowser(url) {
  log({ step: "authorize", url: url.toString() });
  const opened = await fetch(url, { redirect: "manual" });
  const location = opened.headers.get("location") || "";
  if (opened.status !== 302 || !location.startsWith("/#/oauth/")) fail(`authorize answered ${opened.status} to ${location}`);
  const request = new URLSearchParams(decodeURIComponent(location.slice("/#/oauth/".length)));

  const described = await fetch(`${base}/api/v1/me/oauth/authorization?${request}`, { headers: person });
  const consent = (await described.json()).data;
  if (!described.ok) fail(`the consent request was refused: ${JSON.stringify(consent)}`);
  log({ step: "consent", client: consent.client.name, resource: consent.resource });

  const answered = await fetch(`${base}/api/v1/me/oauth/authorization`, {
    method: "POST", headers: person,
    body: JSON.stringify({ authorization: { ...Object.fromEntries(request), agent_id: process.env.AGENT_ID, approve: true } }),
  });
  const back = new URL((await answered.json()).data.redirect_to);
  log({ step: "redirected", to: back.origin + back.pathname, state: back.searchParams.get("state"), iss: back.searchParams.get("iss") });
  return back.searchParams.get("code");
}

function connect(provider) {
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", base), { authProvider: provider });
  return { transport, client: new Client({ name: "chatd-e2e-oauth", version: "1.0.0" }) };
}

async function whoami(client) {
  const result = await client.callTool({ name: "whoami", arguments: {} });
  if (result.isError) fail(`whoami was refused: ${JSON.stringify(result.content)}`);
  return result.structuredContent.agent;
}

const provider = new Provider();
const first = connect(provider);
try {
  await first.client.connect(first.transport);
  fail("connected without signing in");
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
if (!provider.code) fail("no code came back");
await first.transport.finishAuth(provider.code);

const { transport, client } = connect(provider);
await client.connect(transport);
const me = await whoami(client);
log({ step: "whoami", id: me.id, handle: me.handle });

// A spoiled access token: the SDK refreshes it and carries on.
const spent = provider.saved.tokens.refresh_token;
provider.saved.tokens = { ...provider.saved.tokens, access_token: "band_oa_" + "x".repeat(52) };
const again = await whoami(client);
log({ step: "refreshed", id: again.id, rotated: provider.saved.tokens.refresh_token !== spent });

await transport.terminateSession();
await client.close();
log({ step: "closed" });
