package server

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatd/chatd/store"
)

// The MCP tools. Their names and argument names are fixed (docs/mcp.md),
// so that instructions written for one chatd work on every chatd. Each
// acts as the caller whose credential opened the session; most are a REST
// route called in-process (mcp_call.go).

const mcpInstructions = `chatd is a chat server where people and AI agents talk in rooms.
As an agent: call wait_for_message to take the next message addressed to you (it is marked processing),
do the work, answer with send_message (mention whom you answer), then mark_processed (or mark_failed).
Room and message ids are UUIDs; people and agents are named by handles such as "alice" or "alice/helper".`

// newMCPServer makes the MCP server of one session, with the tools of p's
// kind (an agent's or a person's), acting as p; sessionID names the
// session, and ended is closed when it ends.
func (s *Server) newMCPServer(p *store.Principal, sessionID func() string, ended <-chan struct{}) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "chatd", Version: s.version},
		&mcp.ServerOptions{Instructions: mcpInstructions, SchemaCache: s.mcpSchemas, GetSessionID: sessionID,
			SetCacheable: privateResults})
	t := mcpTools{s: s, p: p, srv: srv, ended: ended}
	if p.IsAgent() {
		t.addAgentTools()
	} else {
		t.addHumanTools()
	}
	t.addRoomResources()
	t.addAgentPrompt()
	return srv
}

// privateResults marks every result a cache may keep as the caller's own:
// the tools differ by the credential's kind, and a room's transcript holds
// what its reader may see. The protocol's default, "public", would let a
// shared cache hand them to another caller.
func privateResults(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" }

// mcpTools adds tools to one session's server.
type mcpTools struct {
	s     *Server
	p     *store.Principal
	srv   *mcp.Server
	ended <-chan struct{} // the session's end
}

// routeTool adds a tool answered by a REST route: call turns the tool's
// arguments into the request.
func routeTool[In any](t mcpTools, name, description string, call func(In) routeCall) {
	mcp.AddTool(t.srv, &mcp.Tool{Name: name, Description: description},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, map[string]any, error) {
			out, err := t.s.callRoute(ctx, t.p, call(in))
			return nil, out, err
		})
}

// ownTool adds a tool with its own handler.
func ownTool[In any](t mcpTools, name, description string, h func(context.Context, In) (map[string]any, error)) {
	mcp.AddTool(t.srv, &mcp.Tool{Name: name, Description: description},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, map[string]any, error) {
			out, err := h(ctx, in)
			if err != nil {
				err = t.s.toolError(err, "")
			}
			return nil, out, err
		})
}

// The arguments tools share.
type (
	noArgs  struct{}
	roomArg struct {
		RoomID string `json:"room_id" jsonschema:"the room's id, e.g. 0193f5a2-7c1e-7d3f-9a4b-5c6d7e8f9a0b"`
	}
	cursorArgs struct {
		Cursor string `json:"cursor,omitempty" jsonschema:"metadata.next_cursor of the previous page; omit for the first page"`
		Limit  int    `json:"limit,omitempty" jsonschema:"how many to return, 1 to 100"`
	}
	offsetArgs struct {
		Page     int `json:"page,omitempty" jsonschema:"the page number, from 1"`
		PageSize int `json:"page_size,omitempty" jsonschema:"how many per page, 1 to 100"`
	}
	messageArgs struct {
		roomArg
		Content       string   `json:"content" jsonschema:"the text; start it with the @handle of whom you address"`
		Mentions      []string `json:"mentions,omitempty" jsonschema:"handles or ids of the participants addressed, e.g. [\"alice\"]; at least one"`
		AttachmentIDs []string `json:"attachment_ids,omitempty" jsonschema:"ids of files uploaded to the room"`
		ReplyToID     string   `json:"reply_to_id,omitempty" jsonschema:"the id of the message of the room this one answers, if any"`
	}
	participantArgs struct {
		roomArg
		Participant string `json:"participant" jsonschema:"the handle (e.g. alice/helper) or id of the person or agent to add"`
		Role        string `json:"role,omitempty" jsonschema:"owner, admin or member (the default)"`
	}
	titleArgs struct {
		Title string `json:"title,omitempty" jsonschema:"the room's title, e.g. Release planning"`
	}
	searchArgs struct {
		cursorArgs
		Query       string `json:"query" jsonschema:"the words to find (all must match); \"a quoted phrase\"; deploy* for a prefix"`
		RoomID      string `json:"room_id,omitempty" jsonschema:"only this room (its id)"`
		SenderID    string `json:"sender_id,omitempty" jsonschema:"only what this person or agent sent (their id)"`
		MessageType string `json:"message_type,omitempty" jsonschema:"only this type: text, thought, tool_call, tool_result, error, task or attention"`
		After       string `json:"after,omitempty" jsonschema:"only messages sent after this time, e.g. 2026-01-15T10:30:00Z"`
		Before      string `json:"before,omitempty" jsonschema:"only messages sent before this time"`
		Sort        string `json:"sort,omitempty" jsonschema:"relevance (the default) or newest"`
	}
)

// searchArgNames are the search route's parameters that searchArgs name
// otherwise.
var searchArgNames = map[string]string{"/q": "/query", "/chat_id": "/room_id"}

// searchTool adds search, answered by route (the caller's API's search).
func searchTool(t mcpTools, route, description string) {
	routeTool(t, "search", description, func(a searchArgs) routeCall {
		q := filters("q", a.Query, "chat_id", a.RoomID, "sender_id", a.SenderID, "message_type", a.MessageType,
			"after", a.After, "before", a.Before, "sort", a.Sort)
		if a.Query == "" {
			q.Set("q", "") // refused at /query, as an empty q is
		}
		return routeCall{method: "GET", route: route, query: a.query(q), result: "results", renamed: searchArgNames}
	})
}

// query renders the paging arguments as the route's query.
func (c cursorArgs) query(q url.Values) url.Values {
	if c.Cursor != "" {
		q.Set("cursor", c.Cursor)
	}
	if c.Limit != 0 {
		q.Set("limit", strconv.Itoa(c.Limit))
	}
	return q
}

func (o offsetArgs) query(q url.Values) url.Values {
	if o.Page != 0 {
		q.Set("page", strconv.Itoa(o.Page))
	}
	if o.PageSize != 0 {
		q.Set("page_size", strconv.Itoa(o.PageSize))
	}
	return q
}

// filters is the query of the filters a tool was given: name, value
// pairs, the empty values left out.
func filters(pairs ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	return q
}

// roomBody is the body that creates a room: an untitled one without title.
func (a titleArgs) roomBody() map[string]any {
	chat := map[string]any{}
	if a.Title != "" {
		chat["title"] = a.Title
	}
	return map[string]any{"chat": chat}
}

// messageBody is the REST body of a text message; a mention that is a UUID
// names a participant by id, anything else by handle.
func (a messageArgs) messageBody() map[string]any {
	mentions := make([]map[string]string, len(a.Mentions))
	for i, m := range a.Mentions {
		if id := store.NormalizeID(m); store.ValidID(id) {
			mentions[i] = map[string]string{"id": id}
		} else {
			mentions[i] = map[string]string{"handle": strings.TrimPrefix(m, "@")}
		}
	}
	msg := map[string]any{"content": a.Content, "mentions": mentions}
	if a.AttachmentIDs != nil {
		msg["attachment_ids"] = a.AttachmentIDs
	}
	if a.ReplyToID != "" {
		msg["reply_to_id"] = a.ReplyToID
	}
	return map[string]any{"message": msg}
}

// addParticipant adds a participant named by handle or id through the
// route of the caller's API.
func (t mcpTools) addParticipant(ctx context.Context, route string, a participantArgs) (map[string]any, error) {
	id := store.NormalizeID(a.Participant)
	if !store.ValidID(id) {
		party, err := t.s.db.ResolveHandle(ctx, strings.TrimPrefix(a.Participant, "@"))
		if err != nil {
			return nil, t.s.toolError(err, "")
		}
		id = party.ID
	}
	participant := map[string]any{"participant_id": id}
	if a.Role != "" {
		participant["role"] = a.Role
	}
	return t.s.callRoute(ctx, t.p, routeCall{method: "POST", route: route, params: []string{a.RoomID},
		body: map[string]any{"participant": participant}, result: "participant", bodyKey: "participant"})
}
