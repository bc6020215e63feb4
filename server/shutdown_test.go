package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestShutdownEndsPresenceBeforeTheDatabase stops a server with sockets
// open as chatd serve does (Serve until its context ends, then the
// database closes): by the time Serve returns, presence is done with the
// database. A read it was making is cut short rather than left to meet the
// closed database (which logged "presence: the rooms of a participant
// could not be read ... sql: database is closed" at the end of a bench run
// with 1,000 sockets), and the sockets closing set off no more reads. The
// presence loop's read is held, as a busy read pool holds it, until the
// database has closed.
func TestShutdownEndsPresenceBeforeTheDatabase(t *testing.T) {
	const agents = 50
	var logs syncBuffer
	var (
		held     = make(chan struct{}) // the presence loop is in the read held
		release  = make(chan struct{})
		heldRead = make(chan error, 1) // how the held read ended
		holding  atomic.Bool
		stopping atomic.Bool  // the server was told to stop
		late     atomic.Int32 // presence reads begun since
	)
	ts := newTestServerWith(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.DisableRateLimit = true
		db := c.DB
		c.memberRooms = func(ctx context.Context, id string) ([]string, error) {
			if stopping.Load() {
				late.Add(1)
			}
			if !holding.CompareAndSwap(false, true) {
				return db.MemberRoomIDs(ctx, id)
			}
			close(held)
			select {
			case <-release:
			case <-ctx.Done():
			}
			rooms, err := db.MemberRoomIDs(ctx, id)
			heldRead <- err
			return rooms, err
		}
	})
	releaseRead := sync.OnceFunc(func() { close(release) })
	defer releaseRead()
	alice, aliceKey := ts.user("alice")
	_, posterKey := ts.agent(alice, "Poster")
	room := ts.room(t, posterKey, alice.ID)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- ts.srv.Serve(ctx, ln, 5*time.Second) }()

	// connect opens a socket on the listener Serve serves and joins topic;
	// the reply says the server has registered the connection (it answers
	// frames only from a registered one), and so counted it in presence.
	connect := func(key, topic string) *listener {
		params := url.Values{"api_key": {key}, "vsn": {"2.0.0"}}
		raw, err := dialRaw(t, "ws://"+ln.Addr().String()+"/api/v1/socket/websocket?"+params.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		raw.send(t, `["1","1","`+topic+`","phx_join",{}]`)
		for m := raw.next(t); m[1] != "1"; m = raw.next(t) {
		}
		l := &listener{raw: raw, closed: make(chan struct{})}
		go l.read()
		return l
	}
	// alice reads the room, whose members' presence is pushed to her.
	sockets := []*listener{connect(aliceKey, "room_participants:"+room)}
	for i := range agents {
		agent, key := ts.agent(alice, fmt.Sprintf("Agent %d", i))
		expect(t, ts.do(t, "POST", agentChatsPath+"/"+room+"/participants", apiKey(posterKey), participantBody(agent.ID, "")), 201, "")
		sockets = append(sockets, connect(key, "agent_rooms:"+agent.ID))
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no presence read with sockets opening")
	}

	stopping.Store(true)
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	select {
	case err := <-heldRead:
		if err == nil {
			t.Errorf("the presence read under way at shutdown was not cut short")
		}
	default:
		t.Errorf("Serve returned with presence still reading the database")
	}
	if err := ts.db.Close(); err != nil {
		t.Fatal(err)
	}
	releaseRead()
	for _, l := range sockets {
		select {
		case <-l.closed:
		case <-time.After(10 * time.Second):
			t.Fatal("a socket stayed open after the server stopped")
		}
	}
	if n := late.Load(); n > 0 {
		t.Errorf("presence made %d reads after the server was told to stop", n)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "presence:") || strings.Contains(line, "database is closed") {
			t.Errorf("logged at shutdown: %s", line)
		}
	}
}
