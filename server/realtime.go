package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/server/phx"
	"github.com/chatd/chatd/store"
)

// realtime turns committed changes into pushes. The store publishes each
// change after its commit from the writer goroutine; publish only queues it
// (never blocking the writer), and one goroutine routes the queue in commit
// order, so every connection sees changes in the order they happened.
//
// Topics and what they carry (payloads are the REST shapes):
//
//	chat_room:{room}          message_created (agents: text that mentions them;
//	                          people: every message), message_updated and
//	                          event_created (people)
//	room_participants:{room}  participant_added, participant_removed, room_deleted,
//	                          and presence (chatd's own: people, and agents
//	                          that asked with ?extensions=true; presence.go)
//	room_tasks:{room}         task_created, task_updated, board_updated
//	agent_rooms:{agent}       room_added, room_removed, room_updated
//	user_rooms:{user}         room_added, room_removed, room_updated, and
//	                          room_read (chatd's own: {id, unread_count} after
//	                          the person read further, for their other tabs)
//	agent_control:{agent}     supersede
//	agent_contacts:{agent}    contact_request_received, contact_request_updated,
//	user_contacts:{user}      contact_added, contact_removed (agents get the
//	                          flat payloads the SDKs model; people the REST
//	                          shapes)
type realtime struct {
	s       *Server
	hub     *phx.Hub
	log     *slog.Logger
	changes chan store.Change
	stop    chan struct{}
	done    chan struct{}
	dropped atomic.Int64
	sockets socketRegistry
	// presence knows who is connected, for chatd's presence extension
	// (presence.go). Its loop runs until presenceCtx ends, then closes
	// presenceDone; memberRooms is how it reads a participant's rooms.
	presence       *presenceTracker
	presenceCtx    context.Context
	presenceCancel context.CancelFunc
	presenceDone   chan struct{}
	memberRooms    func(ctx context.Context, id string) ([]string, error)
	// credentialsEnded counts the changes that may have ended credentials,
	// so that a connection authenticated while one was routed is rechecked
	// (register).
	credentialsEnded atomic.Int64
}

// changeQueue bounds the changes waiting to be routed. Pushes are a
// courtesy on top of REST (clients catch up with /next and listings), so if
// routing ever falls this far behind, changes are dropped and counted rather
// than allowed to stall the writer.
const changeQueue = 1 << 16

// newRealtime starts routing for s; memberRooms, when not nil, stands in
// for the store's MemberRoomIDs in the presence pushes (tests).
func newRealtime(s *Server, memberRooms func(context.Context, string) ([]string, error)) *realtime {
	rt := &realtime{
		s: s, log: s.log,
		changes: make(chan store.Change, changeQueue),
		stop:    make(chan struct{}), done: make(chan struct{}),
		sockets:  newSocketRegistry(),
		presence: newPresenceTracker(), presenceDone: make(chan struct{}),
		memberRooms: memberRooms,
	}
	if rt.memberRooms == nil {
		rt.memberRooms = s.db.MemberRoomIDs
	}
	rt.presenceCtx, rt.presenceCancel = context.WithCancel(context.Background())
	rt.hub = phx.NewHub(rt, phx.Options{})
	go rt.run()
	go rt.runPresence()
	return rt
}

func (rt *realtime) publish(c store.Change) {
	select {
	case rt.changes <- c:
	default:
		if rt.dropped.Add(1)%1000 == 1 {
			rt.log.Warn("realtime is falling behind: changes dropped", "dropped", rt.dropped.Load())
		}
	}
}

func (rt *realtime) run() {
	defer close(rt.done)
	for {
		select {
		case c := <-rt.changes:
			rt.route(c)
		case <-rt.stop:
			return
		}
	}
}

// close closes every connection (1012: clients reconnect to the restarted
// server) and stops routing. It returns once nothing of it reads the
// database any more, which the caller closes next.
func (rt *realtime) close() {
	// Presence first: the connections about to close would each set off
	// a change for it to push (see stopPresence for why none is).
	rt.stopPresence()
	rt.hub.Close(phx.CloseRestart, "server restarting")
	if rt.s.db.SharesChanges() {
		// The other nodes hear at once that this one's sockets are gone,
		// rather than when its silence outlasts presenceNodeSilence. After
		// the presence loop ended, so that no note of a socket opening
		// here can follow this one; the store writes it before it closes.
		rt.share(&store.PresenceNote{Snapshot: true})
	}
	select {
	case <-rt.stop:
	default:
		close(rt.stop)
	}
	<-rt.done
}

// Joined is phx.Handler.
func (rt *realtime) Joined(*phx.Conn, string) {}

// Authorize is phx.Handler: who may join what.
func (rt *realtime) Authorize(c *phx.Conn, topic string) string {
	sc := c.Value.(*socketConn)
	kind, id, _ := strings.Cut(topic, ":")
	if store.NormalizeID(id) != id {
		// Pushes carry the topic as joined and clients match them to their
		// channel by it exactly, so a join is refused rather than made
		// under a spelling the pushes, addressed in lower case, would miss.
		return "the id in a topic must be in lower case, as chatd sends ids"
	}
	switch kind {
	case "agent_control", "agent_rooms", "agent_contacts":
		if sc.agent != nil && id == sc.agent.ID {
			return ""
		}
	case "user_rooms", "user_contacts":
		if sc.agent == nil && id == sc.user.ID {
			return ""
		}
	case "chat_room", "room_participants", "room_tasks":
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := rt.s.db.Room(ctx, sc.actor(), id); err == nil {
			return ""
		}
	}
	return "unauthorized"
}

func isPerson(c *phx.Conn) bool { return c.Value.(*socketConn).agent == nil }

// roomsTopic is a member's own topic for its rooms.
func roomsTopic(p *store.Participant) string {
	if p.Type == store.PartyAgent {
		return "agent_rooms:" + p.ID
	}
	return "user_rooms:" + p.ID
}

var roomTopics = []string{"chat_room:", "room_participants:", "room_tasks:"}

func (rt *realtime) route(c store.Change) {
	rt.s.waiters.route(c)
	room := c.Room
	switch c.Kind {
	case store.MessageCreated:
		rt.messageCreated(c)
	case store.MessageUpdated:
		rt.messageUpdated(c, nil)
	case store.MessageChanged, store.ReactionsChanged:
		rt.messageUpdated(c, c.Seers)
	case store.RoomAdded:
		rt.hub.Broadcast(roomsTopic(c.Member), "room_added", payloadJSON(roomEvent(room, c.Member, nil)), nil)
	case store.RoomUpdated:
		for _, m := range c.Members {
			rt.hub.Broadcast(roomsTopic(m), "room_updated", payloadJSON(roomEvent(room, m, nil)), nil)
		}
	case store.RoomRead:
		rt.hub.Broadcast(roomsTopic(c.Member), "room_read", payloadJSON(map[string]any{"id": room.ID, "unread_count": room.Unread}), nil)
	case store.RoomRemoved:
		at := c.At
		rt.hub.Broadcast(roomsTopic(c.Member), "room_removed", payloadJSON(roomEvent(room, c.Member, &at)), nil)
		rt.recheckAccess(room, c.Member)
	case store.RoomDeleted:
		rt.hub.Broadcast("room_participants:"+room.ID, "room_deleted", payloadJSON(map[string]string{"id": room.ID}), nil)
		for _, prefix := range roomTopics {
			topic := prefix + room.ID
			rt.hub.Each(topic, func(sub *phx.Conn, _ string) { rt.hub.Leave(sub, topic) })
		}
	case store.ParticipantAdded:
		rt.hub.Broadcast("room_participants:"+room.ID, "participant_added", payloadJSON(participantEvent(c.Member)), nil)
	case store.ParticipantRemoved:
		rt.hub.Broadcast("room_participants:"+room.ID, "participant_removed", payloadJSON(participantRemovedEvent(c.Member)), nil)
	case store.BoardUpdated:
		rt.hub.Broadcast("room_tasks:"+room.ID, "board_updated", payloadJSON(newBoardView(c.Board, false)), nil)
	case store.TaskCreated, store.TaskUpdated:
		rt.hub.Broadcast("room_tasks:"+room.ID, string(c.Kind), payloadJSON(newTaskView(c.Task, false)), nil)
	case store.ContactRequestReceived, store.ContactRequestUpdated, store.ContactAdded, store.ContactRemoved:
		rt.contactChange(c)
	case store.AgentDeleted:
		for _, conn := range rt.sockets.agentConns(c.Agent.ID) {
			conn.Close(phx.ClosePolicy, "the agent was deleted")
		}
		rt.s.mcp.closeAgent(c.Agent.ID)
		rt.s.endPollsOfAgent(c.Agent.ID)
	case store.NodePresence:
		rt.presence.heard(c.Origin, c.Presence, c.At)
	case store.CredentialsEnded, store.OtherProcessWrote:
		// A chatd command (another process) may have ended credentials too.
		rt.credentialsEnded.Add(1)
		rt.closeEndedCredentials(rt.sockets.all())
		rt.s.mcp.closeEndedCredentials()
		rt.s.endPollsOfEndedCredentials()
	}
}

// messageCreated pushes a new message: to people reading the room, every
// message (and, for events, event_created too); to agents, only a text
// message that mentions them, with their own delivery state.
func (rt *realtime) messageCreated(c store.Change) {
	if store.IsInternalType(c.Message.Type) {
		return // agents hear of no events, people of no internal ones
	}
	topic := "chat_room:" + c.Room.ID
	forPeople := payloadJSON(newMessageView(c.Message, personReader("")))
	rt.hub.Broadcast(topic, "message_created", forPeople, isPerson)
	if c.Message.Type != "text" {
		rt.hub.Broadcast(topic, "event_created", forPeople, isPerson)
		return
	}
	mentioned := map[string][]byte{}
	for _, d := range c.Message.Deliveries {
		mentioned[d.AgentID] = nil
	}
	if len(mentioned) == 0 {
		return
	}
	rt.hub.Each(topic, func(sub *phx.Conn, joinRef string) {
		agent := sub.Value.(*socketConn).agent
		if agent == nil {
			return
		}
		payload, ok := mentioned[agent.ID]
		if !ok {
			return
		}
		if payload == nil {
			payload = payloadJSON(newMessageView(forAgentPush(c.Message, agent.ID), agentReader(agent.ID)))
			mentioned[agent.ID] = payload
		}
		sub.Push(joinRef, topic, "message_created", payload)
	})
}

// messageUpdated pushes message_updated with a message as it is now: to
// people reading the room, as each sees it (a reaction they gave is marked
// for them alone); and to the agents among seers (those that may see it)
// whose connection asked for chatd's extension events (?extensions=true),
// as each sees it. The Band SDKs never ask, and hear nothing of edits,
// deletions and reactions. A delivery-state change (seers nil) goes to
// people alone, as it always has.
func (rt *realtime) messageUpdated(c store.Change, seers []string) {
	topic := "chat_room:" + c.Room.ID
	rendered := map[reader][]byte{}
	rt.hub.Each(topic, func(sub *phx.Conn, joinRef string) {
		sc := sub.Value.(*socketConn)
		m, rd := c.Message, personReader("")
		switch {
		case sc.agent != nil && sc.extensions && slices.Contains(seers, sc.agent.ID):
			m, rd = forAgentPush(c.Message, sc.agent.ID), agentReader(sc.agent.ID)
		case sc.agent != nil, store.IsInternalType(m.Type):
			return
		case reactedBy(m, sc.user.ID):
			rd = personReader(sc.user.ID)
		}
		payload, ok := rendered[rd]
		if !ok {
			payload = payloadJSON(newMessageView(m, rd))
			rendered[rd] = payload
		}
		sub.Push(joinRef, topic, "message_updated", payload)
	})
}

// reactedBy reports whether id gave any of m's reactions.
func reactedBy(m *store.Message, id string) bool {
	for _, r := range m.Reactions {
		if slices.Contains(r.ActorIDs, id) {
			return true
		}
	}
	return false
}

// forAgentPush is m as pushed to an agent: the quote of the message it
// replies to is kept only when that message is the agent's own. A push is
// rendered from the message as people see it, and whether another parent
// mentioned the agent is not known here; the agent reads the quote over
// REST, where it is.
func forAgentPush(m *store.Message, agentID string) *store.Message {
	if m.ReplyTo == nil || m.ReplyTo.SenderID == agentID {
		return m
	}
	c := *m
	c.ReplyTo = &store.Quote{ID: m.ReplyTo.ID}
	return &c
}

// recheckAccess ends the room subscriptions of connections that lost read
// access when member left the room: the member's own, and, for an agent, its
// owner's (who may have read the room only through it).
func (rt *realtime) recheckAccess(room *store.Room, member *store.Participant) {
	ctx := context.Background()
	for _, prefix := range roomTopics {
		topic := prefix + room.ID
		rt.hub.Each(topic, func(sub *phx.Conn, _ string) {
			sc := sub.Value.(*socketConn)
			affected := sc.id() == member.ID || (member.Type == store.PartyAgent && sc.agent == nil && sc.user.ID == member.OwnerID)
			if !affected {
				return
			}
			if _, err := rt.s.db.Room(ctx, sc.actor(), room.ID); err != nil {
				rt.hub.Leave(sub, topic)
			}
		})
	}
}

func payloadJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("realtime payload: " + err.Error())
	}
	return b
}
