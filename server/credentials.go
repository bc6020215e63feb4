package server

import (
	"context"
	"time"

	"github.com/chatd/chatd/server/phx"
	"github.com/chatd/chatd/store"
)

// A real-time connection lives no longer than the credential that opened
// it. The REST API checks credentials on every request; a socket checks
// them once, on upgrade, so the server closes it when its credential ends:
//
//   - an API key deleted (a person's, through the API or the web app) or
//     replaced (an agent's key rotation), or its agent deleted;
//   - a session ended by signing out, or by the person's password being
//     set (through the API or `chatd set-password`);
//   - a bearer token's expiry (a session's, or one from `chatd token`):
//     a timer set when the connection registers;
//   - the person removed by an admin, whatever they connected with.
//
// Each such write publishes store.CredentialsEnded; a write by another
// process (a chatd command) is noticed within a second as
// store.OtherProcessWrote. Either makes the server recheck the credentials
// of every open connection in one read and close those that ended, with
// 1008 (policy violation), which the Band SDKs treat as final rather than
// reconnecting with the dead credential.

// closeEndedCredentials closes the connections among conns whose key or
// session no longer authenticates. A connection opened with a new key, even
// before this runs, stays.
func (rt *realtime) closeEndedCredentials(conns []*phx.Conn) {
	held := make([]heldCredential, len(conns))
	for i, conn := range conns {
		held[i] = conn.Value.(*socketConn).heldCredential
	}
	ended, err := rt.s.endedCredentials(held)
	if err != nil {
		rt.log.Warn("checking the credentials of open connections failed", "err", err)
		return
	}
	for i, conn := range conns {
		switch {
		case ended[held[i].keyID]:
			conn.Close(phx.ClosePolicy, "the API key was deleted or replaced")
		case ended[held[i].sessionID]:
			conn.Close(phx.ClosePolicy, "the session ended")
		case ended[held[i].personID]:
			conn.Close(phx.ClosePolicy, "the person was removed")
		}
	}
}

// heldCredential is what a connection or MCP session was opened with: an
// API key, a sign-in session (a bearer token's, which signing out ends), or
// an OAuth grant (an access token's, /mcp only: the grant outlives each
// hour-long access token, and its revocation is the credential's end); and
// the person it acts as, whose removal ends all of them (a token from
// `chatd token` has nothing else to end).
type heldCredential struct{ keyID, sessionID, grantID, personID string }

// endedIn reports whether ended (endedCredentials's answer) holds h's
// credential.
func (h heldCredential) endedIn(ended map[string]bool) bool {
	return ended[h.keyID] || ended[h.sessionID] || ended[h.grantID] || ended[h.personID]
}

// heldBy is what p holds, as a connection opened with it keeps it.
func heldBy(p *store.Principal) heldCredential {
	h := heldCredential{keyID: p.KeyID, sessionID: p.SessionID, grantID: p.OAuthGrantID}
	if p.User != nil {
		h.personID = p.User.ID
	}
	return h
}

// endedCredentials returns which of the held keys, sessions, grants and
// people no longer authenticate, by id, in one read.
func (s *Server) endedCredentials(held []heldCredential) (map[string]bool, error) {
	var ids store.HeldCredentials
	for _, h := range held {
		for _, c := range []struct {
			id   string
			list *[]string
		}{{h.keyID, &ids.Keys}, {h.sessionID, &ids.Sessions}, {h.grantID, &ids.Grants}, {h.personID, &ids.People}} {
			if c.id != "" {
				*c.list = append(*c.list, c.id)
			}
		}
	}
	if len(ids.Keys)+len(ids.Sessions)+len(ids.Grants)+len(ids.People) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.db.EndedCredentials(ctx, ids)
}

// endWithCredentials ends, with end, those of open (what is called what in
// the log) whose credential no longer authenticates, checked in one read.
func endWithCredentials[T any](s *Server, what string, open []T, held func(T) heldCredential, end func(T)) {
	if len(open) == 0 {
		return
	}
	creds := make([]heldCredential, len(open))
	for i, o := range open {
		creds[i] = held(o)
	}
	ended, err := s.endedCredentials(creds)
	if err != nil {
		s.log.Warn("checking the credentials of open "+what+" failed", "err", err)
		return
	}
	for i, o := range open {
		if creds[i].endedIn(ended) {
			end(o)
		}
	}
}

// recheckIfCredentialsEnded rechecks a new connection's credential if
// credentials ended while it was being authenticated (ended is
// credentialsEnded from before that): the recheck of all connections may
// have run before this one was registered.
func (rt *realtime) recheckIfCredentialsEnded(c *phx.Conn, ended int64) {
	if rt.credentialsEnded.Load() != ended {
		rt.closeEndedCredentials([]*phx.Conn{c})
	}
}
