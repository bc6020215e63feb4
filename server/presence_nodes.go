package server

import (
	"time"

	"github.com/chatd/chatd/store"
)

// Presence across nodes: with several chatd nodes on one PostgreSQL
// database, a participant is connected when it has a socket on any of
// them. Each node tells the others, through the changes they share
// (store/cluster.go), when a participant's first socket there opens or its
// last one closes, and every presenceSnapshotEvery who has a socket there
// at all: the snapshot brings a node that just started up to date, and
// says that its sender is alive. A node not heard for presenceNodeSilence
// (it died, or lost the database) counts as having no sockets, and its
// participants go offline on the others unless they are connected
// elsewhere. On SQLite there is one server and nothing to tell.

const (
	presenceSnapshotEvery = 15 * time.Second
	presenceNodeSilence   = 3 * presenceSnapshotEvery
)

// nodeSockets is what another node last told of its sockets.
type nodeSockets struct {
	parties map[string]bool // participant id -> whether it is an agent
	heard   time.Time
}

// elsewhere is whether id has a socket on another node; t.mu held.
func (t *presenceTracker) elsewhere(id string) bool {
	for _, n := range t.nodes {
		if _, ok := n.parties[id]; ok {
			return true
		}
	}
	return false
}

// heard takes in what node origin told, and queues a push for every
// participant whose presence that changed.
func (t *presenceTracker) heard(origin string, note *store.PresenceNote, at time.Time) {
	if note == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[origin]
	if n == nil {
		n = &nodeSockets{parties: map[string]bool{}}
		t.nodes[origin] = n
	}
	n.heard = t.now()
	if note.Party != nil {
		t.setElsewhere(n, *note.Party, note.Connected, at)
	}
	if !note.Snapshot {
		return
	}
	now := make(map[string]bool, len(note.Everyone))
	for _, p := range note.Everyone {
		now[p.ID] = true
		if _, ok := n.parties[p.ID]; !ok {
			t.setElsewhere(n, p, true, at)
		}
	}
	for id, agent := range n.parties {
		if !now[id] {
			t.setElsewhere(n, store.PresenceParty{ID: id, Agent: agent}, false, at)
		}
	}
}

// setElsewhere records whether p has a socket on node n; t.mu held.
func (t *presenceTracker) setElsewhere(n *nodeSockets, p store.PresenceParty, connected bool, at time.Time) {
	before := t.connected(p.ID)
	if connected {
		n.parties[p.ID] = p.Agent
	} else {
		delete(n.parties, p.ID)
	}
	after := t.connected(p.ID)
	if before == after {
		return
	}
	if !after {
		t.lastSeen[p.ID] = at
	}
	t.queue(presenceChange{id: p.ID, agent: p.Agent, connected: after, at: at, push: true})
}

// forgetSilentNodes takes the nodes not heard for presenceNodeSilence for
// nodes without sockets.
func (t *presenceTracker) forgetSilentNodes() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for origin, n := range t.nodes {
		if now.Sub(n.heard) < presenceNodeSilence {
			continue
		}
		for id, agent := range n.parties {
			t.setElsewhere(n, store.PresenceParty{ID: id, Agent: agent}, false, now)
		}
		delete(t.nodes, origin)
	}
}

// local lists the participants with a socket on this node.
func (t *presenceTracker) local() []store.PresenceParty {
	t.mu.Lock()
	defer t.mu.Unlock()
	parties := make([]store.PresenceParty, 0, len(t.conns))
	for id, set := range t.conns {
		for sc := range set {
			parties = append(parties, store.PresenceParty{ID: id, Agent: sc.agent != nil})
			break
		}
	}
	return parties
}

// sharePresence tells the other nodes that c's participant's first socket
// here opened, or its last one closed.
func (rt *realtime) sharePresence(c presenceChange) {
	rt.share(&store.PresenceNote{Party: &store.PresenceParty{ID: c.id, Agent: c.agent}, Connected: c.connected})
}

// shareSnapshot tells the other nodes who has a socket here.
func (rt *realtime) shareSnapshot() {
	rt.share(&store.PresenceNote{Everyone: rt.presence.local(), Snapshot: true})
}

func (rt *realtime) share(note *store.PresenceNote) {
	if err := rt.s.db.ShareWithOtherNodes(store.Change{Kind: store.NodePresence, Presence: note}); err != nil {
		// The next snapshot tells the others again.
		rt.log.Debug("presence: not told to the other nodes", "err", err)
	}
}
