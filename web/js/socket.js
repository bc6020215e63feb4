// A Phoenix Channels client (serializer 2.0.0: JSON arrays of
// [join_ref, ref, topic, event, payload]) for the web app's live updates.
//
// It keeps one WebSocket, heartbeats it, and when the connection drops it
// reconnects on its own with a growing delay (at once when the browser
// comes back online), rejoining every channel. Pushes sent while it was
// away are lost: listeners of "reconnect" reload what they show.

const HEARTBEAT_MS = 25000;
const BACKOFF_MS = [500, 1000, 2000, 5000, 10000];

export class Socket {
  constructor(url, tokenFn) {
    this.url = url;
    this.tokenFn = tokenFn;
    this.ws = null;
    this.ref = 0;
    this.channels = new Map(); // topic -> Channel
    this.pending = new Map(); // ref -> {resolve, reject}
    this.status = "connecting";
    this.statusListeners = new Set();
    this.reconnectListeners = new Set();
    this.failures = 0;
    this.everOpened = false;
    this.stopped = false;
    this.timer = null;
    this.heartbeat = null;
    this.onFailure = null; // called after a failed attempt (the app checks the session)
    this.online = () => this.retryNow();
    // The browser knows before the socket does that the network went away:
    // say so at once instead of after the next missed heartbeat.
    this.offline = () => {
      if (this.ws) this.drop(this.ws);
    };
    window.addEventListener("online", this.online);
    window.addEventListener("offline", this.offline);
  }

  nextRef() {
    this.ref += 1;
    return String(this.ref);
  }

  setStatus(status) {
    if (this.status === status) return;
    this.status = status;
    for (const fn of this.statusListeners) fn(status);
  }

  onStatus(fn) {
    this.statusListeners.add(fn);
    fn(this.status);
    return () => this.statusListeners.delete(fn);
  }

  // onReconnect runs fn after every reconnection (not the first connect).
  onReconnect(fn) {
    this.reconnectListeners.add(fn);
    return () => this.reconnectListeners.delete(fn);
  }

  connect() {
    this.stopped = false;
    const token = this.tokenFn();
    if (!token) return;
    const sep = this.url.includes("?") ? "&" : "?";
    const ws = new WebSocket(`${this.url}${sep}vsn=2.0.0&token=${encodeURIComponent(token)}`);
    this.ws = ws;
    this.setStatus(this.everOpened ? "reconnecting" : "connecting");
    ws.onopen = () => {
      const again = this.everOpened;
      this.everOpened = true;
      this.failures = 0;
      this.setStatus("online");
      // A heartbeat left unanswered means a dead connection that has not
      // closed (a laptop waking up, a proxy that dropped it): drop it and
      // reconnect.
      this.heartbeat = setInterval(() => {
        this.send(null, "phoenix", "heartbeat", {}).catch(() => {
          if (this.ws === ws) this.drop(ws);
        });
      }, HEARTBEAT_MS);
      for (const ch of this.channels.values()) ch.rejoin();
      if (again) for (const fn of this.reconnectListeners) fn();
    };
    ws.onmessage = (ev) => this.receive(ev.data);
    ws.onclose = () => this.drop(ws);
  }

  // drop forgets a connection that closed or stopped answering, and plans
  // the next attempt.
  drop(ws) {
    if (this.ws !== ws) return;
    if (ws.readyState <= WebSocket.OPEN) ws.close();
    clearInterval(this.heartbeat);
    this.ws = null;
    for (const p of this.pending.values()) p.reject(new Error("disconnected"));
    this.pending.clear();
    for (const ch of this.channels.values()) ch.joined = false;
    if (this.stopped) return;
    this.setStatus("offline");
    this.failures += 1;
    if (this.onFailure) this.onFailure(this.failures);
    // While the browser says it is offline an attempt can only fail (and
    // logs an error): the "online" event retries at once instead.
    if (!navigator.onLine) return;
    const delay = BACKOFF_MS[Math.min(this.failures - 1, BACKOFF_MS.length - 1)];
    this.timer = setTimeout(() => this.connect(), delay);
  }

  retryNow() {
    if (this.stopped || (this.ws && this.ws.readyState <= WebSocket.OPEN)) return;
    clearTimeout(this.timer);
    this.connect();
  }

  disconnect() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.heartbeat);
    window.removeEventListener("online", this.online);
    window.removeEventListener("offline", this.offline);
    if (this.ws) this.ws.close(1000);
    this.ws = null;
    this.channels.clear();
    // Stopped on purpose (signing out): not an outage to report.
    this.setStatus("stopped");
  }

  send(joinRef, topic, event, payload) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error("offline"));
    const ref = this.nextRef();
    this.ws.send(JSON.stringify([joinRef, ref, topic, event, payload]));
    return new Promise((resolve, reject) => {
      this.pending.set(ref, { resolve, reject });
      setTimeout(() => {
        if (this.pending.delete(ref)) reject(new Error("timeout"));
      }, 10000);
    });
  }

  receive(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (!Array.isArray(msg) || msg.length !== 5) return;
    const [joinRef, ref, topic, event, payload] = msg;
    if (event === "phx_reply" && ref && this.pending.has(ref)) {
      const p = this.pending.get(ref);
      this.pending.delete(ref);
      if (payload && payload.status === "ok") p.resolve(payload.response);
      else p.reject(Object.assign(new Error("refused"), { response: payload && payload.response }));
      return;
    }
    const ch = this.channels.get(topic);
    if (!ch || (joinRef && ch.joinRef && joinRef !== ch.joinRef)) return;
    if (event === "phx_close" || event === "phx_error") {
      ch.joined = false;
      if (event === "phx_close") this.channels.delete(topic);
    }
    ch.dispatch(event, payload);
  }

  // channel joins topic (now, and again after every reconnection) and
  // answers the Channel to listen on. Several parts of the page may hold
  // the same topic: each takes its own handle, removes its own listeners,
  // and the topic is left when the last one leaves.
  channel(topic) {
    let ch = this.channels.get(topic);
    if (!ch) {
      ch = new Channel(this, topic);
      this.channels.set(topic, ch);
      ch.rejoin();
    }
    ch.holders += 1;
    return ch;
  }
}

class Channel {
  constructor(socket, topic) {
    this.socket = socket;
    this.topic = topic;
    this.joinRef = null;
    this.joined = false;
    this.listeners = new Map(); // event -> Set(fn)
    this.holders = 0;
  }

  rejoin() {
    if (this.socket.status !== "online") return;
    this.joinRef = this.socket.nextRef();
    const joinRef = this.joinRef;
    this.socket.ws.send(JSON.stringify([joinRef, joinRef, this.topic, "phx_join", {}]));
    this.socket.pending.set(joinRef, {
      resolve: () => {
        this.joined = true;
        this.dispatch("joined", {});
      },
      reject: (err) => this.dispatch("join_refused", err.response || {}),
    });
  }

  on(event, fn) {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event).add(fn);
    return () => this.listeners.get(event).delete(fn);
  }

  dispatch(event, payload) {
    const set = this.listeners.get(event);
    if (set) for (const fn of [...set]) fn(payload);
  }

  leave() {
    this.holders -= 1;
    if (this.holders > 0) return;
    this.socket.channels.delete(this.topic);
    this.listeners.clear();
    if (this.joined) this.socket.send(this.joinRef, this.topic, "phx_leave", {}).catch(() => {});
    this.joined = false;
  }
}
