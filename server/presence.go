package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/server/phx"
	"github.com/chatd/chatd/store"
)

// Presence, chatd's extension: whether an agent or a person has the
// real-time socket open now, or when they were last seen, so that a person
// can tell a silent agent from a dead one.
//
// It lives in memory, as the socket registry does: a participant is
// connected while it holds at least one registered connection, here or,
// with several nodes on one PostgreSQL database, on another node
// (presence_nodes.go). When its
// first connection opens or its last one closes, every room it is in gets
// a presence push on room_participants:{room}: people always, agents only
// when their socket asked for chatd's extension events (?extensions=true),
// since the Band SDKs log a warning for an event they have no handler for.
// GET /api/v1/me/chats/{id}/presence answers the same for every participant
// of a room, for a page that just opened it. "Last seen" is the later of
// when the last connection closed (since this server started) and when the
// participant's API keys were last used (an agent that works over REST,
// long-poll, webhooks or MCP is seen that way).

// presenceQueue bounds the changes waiting to be pushed; past it they are
// dropped and counted, as the realtime queue does: presence is a courtesy
// that the listing corrects.
const presenceQueue = 4096

// presenceChange is a participant's first socket here opening or its last
// closing (local: for the other nodes to hear), or its presence as a whole
// changing (push: for the clients).
type presenceChange struct {
	id          string
	agent       bool
	connected   bool
	at          time.Time
	local, push bool
}

type presenceTracker struct {
	mu       sync.Mutex
	conns    map[string]map[*socketConn]struct{} // participant id -> its open connections
	lastSeen map[string]time.Time                // participant id -> when its last connection closed
	// nodes is what the other nodes on the database told of their
	// sockets, by node (presence_nodes.go).
	nodes   map[string]*nodeSockets
	changes chan presenceChange
	dropped atomic.Int64
	now     func() time.Time
	// stopped is set when the server stops (stopPresence): from then on
	// nothing is queued, there being no one left to push it.
	stopped bool
}

func newPresenceTracker() *presenceTracker {
	return &presenceTracker{conns: map[string]map[*socketConn]struct{}{}, lastSeen: map[string]time.Time{},
		nodes: map[string]*nodeSockets{}, changes: make(chan presenceChange, presenceQueue), now: time.Now}
}

// opened counts sc's connection, and queues a change when it is its
// participant's first.
func (t *presenceTracker) opened(sc *socketConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := sc.id()
	set := t.conns[id]
	if set == nil {
		set = map[*socketConn]struct{}{}
		t.conns[id] = set
	}
	first := len(set) == 0
	set[sc] = struct{}{}
	if first {
		t.queue(presenceChange{id: id, agent: sc.agent != nil, connected: true, at: t.now(),
			local: true, push: !t.elsewhere(id)})
	}
}

// closed forgets sc's connection (counted by opened, or not: a connection
// that closed before it was registered), and queues a change when it was
// its participant's last.
func (t *presenceTracker) closed(sc *socketConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := sc.id()
	set := t.conns[id]
	if _, ok := set[sc]; !ok {
		return
	}
	delete(set, sc)
	if len(set) > 0 {
		return
	}
	delete(t.conns, id)
	at := t.now()
	t.lastSeen[id] = at
	t.queue(presenceChange{id: id, agent: sc.agent != nil, connected: false, at: at,
		local: true, push: !t.elsewhere(id)})
}

func (t *presenceTracker) queue(c presenceChange) {
	if t.stopped {
		return
	}
	select {
	case t.changes <- c:
	default:
		t.dropped.Add(1)
	}
}

// state answers whether id is connected now, and when its last connection
// closed (zero when none did since the server started).
func (t *presenceTracker) state(id string) (connected bool, closedAt time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.connected(id), t.lastSeen[id]
}

// connected is whether id has a socket here or on another node; t.mu held.
func (t *presenceTracker) connected(id string) bool { return len(t.conns[id]) > 0 || t.elsewhere(id) }

// presenceView is a presence push, and an item of the presence listing.
type presenceView struct {
	ID         string          `json:"id"`
	Type       store.PartyType `json:"type"`
	Connected  bool            `json:"connected"`
	LastSeenAt *string         `json:"last_seen_at"`
}

// wantsExtensions is who hears an extension event on a topic agents join:
// people, and the agents that asked.
func wantsExtensions(c *phx.Conn) bool {
	sc := c.Value.(*socketConn)
	return sc.agent == nil || sc.extensions
}

// runPresence pushes the changes of presence in the order they happened,
// each to the rooms of its participant, and tells the other nodes of the
// changes of this one's sockets, until stopPresence.
func (rt *realtime) runPresence() {
	defer close(rt.presenceDone)
	var snapshots <-chan time.Time
	if rt.s.db.SharesChanges() {
		tick := time.NewTicker(presenceSnapshotEvery)
		defer tick.Stop()
		snapshots = tick.C
	}
	for {
		select {
		case c := <-rt.presence.changes:
			// A select picks at random among what is ready: stopping must
			// win over a backlog of changes.
			if rt.presenceCtx.Err() != nil {
				return
			}
			if c.local {
				rt.sharePresence(c)
			}
			if c.push {
				rt.pushPresence(c)
			}
		case <-snapshots:
			rt.shareSnapshot()
			rt.presence.forgetSilentNodes()
		case <-rt.presenceCtx.Done():
			return
		}
	}
}

// stopPresence ends the presence loop, cutting short a read it is making,
// and returns once it has ended: the database closes right after the
// server, and the loop must be done with it by then.
//
// A stopping server pushes no presence. The sockets it would push to are
// the ones it is closing, telling their clients to reconnect; those read
// presence afresh when they do (here after the restart, or on another
// node), so pushing every participant offline on the way out would only
// make people's pages flicker, at the cost of a read per participant
// while the database is closing. The other nodes, whose clients stay
// connected, still hear that this one's sockets are gone: realtime.close
// tells them once, after this.
func (rt *realtime) stopPresence() {
	rt.presence.mu.Lock()
	rt.presence.stopped = true
	rt.presence.mu.Unlock()
	rt.presenceCancel()
	<-rt.presenceDone
}

func (rt *realtime) pushPresence(c presenceChange) {
	ctx, cancel := context.WithTimeout(rt.presenceCtx, 5*time.Second)
	defer cancel()
	rooms, err := rt.memberRooms(ctx, c.id)
	if err != nil {
		if rt.presenceCtx.Err() == nil { // stopping cut the read short: nothing went wrong
			rt.log.Warn("presence: the rooms of a participant could not be read", "id", c.id, "error", err)
		}
		return
	}
	typ := store.PartyUser
	if c.agent {
		typ = store.PartyAgent
	}
	at := timestamp(c.at)
	payload := payloadJSON(presenceView{ID: c.id, Type: typ, Connected: c.connected, LastSeenAt: &at})
	for _, room := range rooms {
		rt.hub.Broadcast("room_participants:"+room, "presence", payload, wantsExtensions)
	}
}

// listPresence is GET /api/v1/me/chats/{id}/presence: every participant
// of the room, connected now or when last seen.
func (s *Server) listPresence(w http.ResponseWriter, r *http.Request) error {
	list, err := s.db.RoomPresence(r.Context(), principal(r).Actor(), r.PathValue("chat_id"))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, s.presenceViews(list))
}

// listAgentsPresence is GET /api/v1/me/presence: the caller's own
// agents, connected now or when last seen (the web app's agents page).
func (s *Server) listAgentsPresence(w http.ResponseWriter, r *http.Request) error {
	list, err := s.db.OwnedAgentsPresence(r.Context(), callerUser(r).ID)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, s.presenceViews(list))
}

// presenceViews puts what the socket layer knows beside what the database
// does: connected now, or the later of the last close and the keys' use.
func (s *Server) presenceViews(list []store.Presence) []presenceView {
	now := time.Now()
	views := make([]presenceView, 0, len(list))
	for _, p := range list {
		connected, closedAt := s.rt.presence.state(p.ID)
		seen := p.LastUsed
		if closedAt.After(seen) {
			seen = closedAt
		}
		if connected {
			seen = now
		}
		var last *time.Time
		if !seen.IsZero() {
			last = &seen
		}
		views = append(views, presenceView{ID: p.ID, Type: p.Type, Connected: connected, LastSeenAt: optionalTimestamp(last)})
	}
	return views
}
