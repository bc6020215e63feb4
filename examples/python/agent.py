#!/usr/bin/env python3
"""A sample chatd agent in plain Python 3: the standard library and nothing else.

It works through its messages as README.md's "Messages and delivery" says:
in every room it is in, it drains GET .../messages/next until the server
answers 204 (nothing to do); each message it marks /processing, answers in
the room mentioning the person who wrote it, and marks /processed (or
/failed, with the reason, which /next serves again later). Then it polls
again every POLL_SECONDS (default 1). SIGTERM or SIGINT (Ctrl-C) stops it
once the message at hand is done.

It needs two of the variables `chatd dev` prints for an agent:

    BAND_REST_URL   where chatd is, e.g. http://127.0.0.1:8080
    BAND_API_KEY    the agent's key, band_a_...

    python3 examples/python/agent.py
"""

import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.request

BASE = os.environ.get("BAND_REST_URL", "").rstrip("/")
KEY = os.environ.get("BAND_API_KEY", "")
POLL_SECONDS = float(os.environ.get("POLL_SECONDS", "1"))

stopping = threading.Event()


def log(text):
    print(text, flush=True)


def api(method, path, body=None):
    """Make one request; return the status and the decoded body (None if empty)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"X-API-Key": KEY, "Accept": "application/json", "Content-Type": "application/json"}
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            status, raw = res.status, res.read()
    except urllib.error.HTTPError as err:  # 4xx and 5xx answers still carry a body
        status, raw = err.code, err.read()
    return status, json.loads(raw) if raw else None


def call(method, path, body=None):
    """Make one request that must succeed; return its body."""
    status, doc = api(method, path, body)
    if status >= 300:
        raise RuntimeError(f"{method} {path} answered {status}: {doc}")
    return doc


def rooms():
    """Yield every room the agent is in; this listing pages by page and page_size."""
    page = 1
    while True:
        doc = call("GET", f"/api/v1/agent/chats?page={page}&page_size=100")
        yield from doc["data"]
        if page >= doc["metadata"]["total_pages"]:
            return
        page += 1


def work(room, message):
    """Do one message: processing, the answer, processed; failed if anything goes wrong."""
    path = f"/api/v1/agent/chats/{room}/messages/{message['id']}"
    call("POST", path + "/processing", {})
    try:
        # Only people get an answer: two sample agents answering each
        # other's mentions would never stop.
        if message["sender_type"] == "User":
            answer = {"content": f"Got it: {message['content']}", "mentions": [{"id": message["sender_id"]}]}
            call("POST", f"/api/v1/agent/chats/{room}/messages", {"message": answer})
        call("POST", path + "/processed", {})
        log(f"processed {message['id']} in {room}")
    except (OSError, RuntimeError, ValueError) as err:
        api("POST", path + "/failed", {"error": str(err)[:500]})
        log(f"failed {message['id']} in {room}: {err}")


def drain(room):
    """Work through a room's messages until /next has nothing more."""
    tried = set()
    while not stopping.is_set():
        status, doc = api("GET", f"/api/v1/agent/chats/{room}/messages/next")
        if status == 204:
            return
        if status != 200:
            raise RuntimeError(f"/next in {room} answered {status}: {doc}")
        message = doc["data"]
        if message["id"] in tried:  # it failed just now: leave it for the next poll
            return
        tried.add(message["id"])
        work(room, message)


def main():
    if not BASE or not KEY:
        sys.exit("agent.py: set BAND_REST_URL and BAND_API_KEY (chatd dev prints them)")
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    me = call("GET", "/api/v1/agent/me")["data"]
    log(f"@{me['handle']} is working; it looks for messages every {POLL_SECONDS:g} s")
    while not stopping.is_set():
        try:
            for room in rooms():
                if stopping.is_set():
                    break
                drain(room["id"])
        except (OSError, RuntimeError, ValueError) as err:
            # The server is restarting, or busy (429, 503): the next poll
            # tries again, and /next still holds whatever was not done.
            log(f"will try again: {err}")
        stopping.wait(POLL_SECONDS)
    log("stopped")


if __name__ == "__main__":
    main()
