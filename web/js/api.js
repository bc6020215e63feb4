// The Human API client of the web app. It holds the session token, sends
// JSON, and turns every refusal into an ApiError whose message a person can
// read: the server's own message, the field-level details when there are
// any, and plain words for what has no body (the network, a busy server).

const TOKEN_KEY = "chatd.session";

export class ApiError extends Error {
  constructor(message, { status = 0, code = "network_error", details = null } = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

let unauthorizedHandler = () => {};

export const session = {
  get token() {
    return localStorage.getItem(TOKEN_KEY);
  },
  set(token) {
    localStorage.setItem(TOKEN_KEY, token);
  },
  clear() {
    localStorage.removeItem(TOKEN_KEY);
  },
  // onUnauthorized is called when a request is refused with 401: the
  // session ended (signed out elsewhere, expired, or revoked).
  onUnauthorized(fn) {
    unauthorizedHandler = fn;
  },
};

// describe turns an error envelope into one readable sentence.
function describe(status, body, headers) {
  const e = body && body.error;
  let message = e && e.message ? e.message : `The server answered ${status}.`;
  if (e && e.details && typeof e.details === "object" && !Array.isArray(e.details)) {
    const parts = [];
    for (const [where, what] of Object.entries(e.details)) {
      const field = where.split("/").filter(Boolean).pop() || where;
      const text = Array.isArray(what) ? what.join(", ") : typeof what === "string" ? what : "";
      if (text) parts.push(`${field.replace(/_/g, " ").replace(/\burl\b/, "URL")} ${text}`);
    }
    // The details name each field without the JSON pointer the message
    // starts with, which reads better for people.
    if (parts.length) message = parts.join("; ");
  }
  if (status === 429) {
    const wait = headers.get("Retry-After");
    message = `Too many requests. ${wait ? `Try again in ${wait} seconds.` : "Try again shortly."}`;
  } else if (status === 503 && !(e && e.message)) {
    message = "The server is busy. Try again in a moment.";
  }
  message = message.charAt(0).toUpperCase() + message.slice(1);
  return new ApiError(message, { status, code: (e && e.code) || `http_${status}`, details: e && e.details });
}

// request sends one call. body may be an object (sent as JSON), a Blob or
// ArrayBuffer (sent as is, with the headers given), or undefined.
export async function request(method, path, body, extraHeaders = {}) {
  const headers = { Accept: "application/json", ...extraHeaders };
  const token = session.token;
  if (token) headers.Authorization = `Bearer ${token}`;
  let payload;
  if (body instanceof Blob || body instanceof ArrayBuffer) {
    payload = body;
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload, cache: "no-store" });
  } catch {
    throw new ApiError("The server cannot be reached. Check that chatd is running and your connection works.");
  }
  if (res.status === 204) return null;
  let parsed = null;
  const text = await res.text();
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
  }
  if (!res.ok) {
    const err = describe(res.status, parsed, res.headers);
    if (res.status === 401 && token) unauthorizedHandler(err);
    throw err;
  }
  return parsed;
}

// The verbs answer the envelope's data (or the whole body when it has no
// data member); page answers {items, next} for listings.
const unwrap = (body) => (body && "data" in body ? body.data : body);

// nextPosition is where the page after this one starts, in the family the
// request used, or null when this page is the last. Numbered listings say
// how many pages there are rather than whether more follow.
function nextPosition(at, meta) {
  if (at.page !== undefined) {
    const page = meta.page || at.page;
    return page < (meta.total_pages || 0) ? { page: page + 1 } : null;
  }
  return meta.has_more && meta.next_cursor ? { cursor: meta.next_cursor } : null;
}

export const api = {
  get: async (path) => unwrap(await request("GET", path)),
  post: async (path, body = {}) => unwrap(await request("POST", path, body)),
  put: async (path, body) => unwrap(await request("PUT", path, body)),
  patch: async (path, body) => unwrap(await request("PATCH", path, body)),
  del: async (path) => unwrap(await request("DELETE", path)),
  // upload sends a Blob as the raw body, described by headers.
  upload: async (path, blob, headers) => unwrap(await request("POST", path, blob, headers)),
  // page fetches one page of a listing. Some listings page by cursor and
  // some by page number only (see the README's Paging), so at names the
  // page in the listing's own family: {cursor} (nothing for the first page)
  // or {page} (from 1). params are the filters and the page size under the
  // family's name (limit, or page_size). next, in the answer, is the same
  // kind of position for the following page, or null at the end: callers
  // hand it back without looking inside.
  async page(path, params = {}, at = null) {
    const where = at || {};
    const q = new URLSearchParams();
    const all = { ...params, ...(where.page !== undefined ? { page: where.page } : { cursor: where.cursor }) };
    for (const [k, v] of Object.entries(all)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
    const qs = q.toString();
    const body = await request("GET", qs ? `${path}?${qs}` : path);
    const meta = body.metadata || body.meta || {};
    return { items: body.data || [], next: nextPosition(where, meta) };
  },
  // raw downloads a file with the session's credentials (a plain link
  // could not send them) and answers the Blob.
  async blob(path) {
    const headers = {};
    if (session.token) headers.Authorization = `Bearer ${session.token}`;
    let res;
    try {
      res = await fetch(path, { headers, cache: "no-store" });
    } catch {
      throw new ApiError("The server cannot be reached.");
    }
    if (!res.ok) {
      let parsed = null;
      try {
        parsed = await res.json();
      } catch {
        parsed = null;
      }
      throw describe(res.status, parsed, res.headers);
    }
    return res.blob();
  },
};

// esc percent-encodes one path segment.
export const esc = encodeURIComponent;
