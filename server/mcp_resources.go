package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatd/chatd/store"
)

// Each room the caller can read is a resource, chatd://rooms/{room_id}: its
// recent transcript as text. An agent's transcript is what it sees through
// the Agent API (what it sent and what mentions it); a person's, every
// message. The list is made per request, so it follows rooms joined and
// left during a session.

const (
	roomResourcePrefix = "chatd://rooms/"
	transcriptMessages = 50
	listedRooms        = 100
)

func (t mcpTools) addRoomResources() {
	t.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "room", URITemplate: roomResourcePrefix + "{room_id}", MIMEType: "text/markdown",
		Description: fmt.Sprintf("A room's last %d messages, oldest first.", transcriptMessages),
	}, t.readRoomResource)
	t.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			return t.listRoomResources(ctx)
		}
	})
}

// listRoomResources lists the caller's most recent rooms as resources.
func (t mcpTools) listRoomResources(ctx context.Context) (*mcp.ListResourcesResult, error) {
	page, err := t.s.db.ListRooms(ctx, t.p.Actor(), store.RoomFilter{Descending: true}, store.PageRequest{Limit: listedRooms})
	if err != nil {
		return nil, err
	}
	// Answered here rather than by the SDK, which would mark the result
	// with privateResults.
	out := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	privateResults(ctx, nil, &out.Cacheable)
	for _, room := range page.Items {
		out.Resources = append(out.Resources, &mcp.Resource{URI: roomResourcePrefix + room.ID, Name: roomTitle(room),
			MIMEType: "text/markdown", Description: "The room's recent messages."})
	}
	return out, nil
}

func (t mcpTools) readRoomResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	roomID, ok := strings.CutPrefix(uri, roomResourcePrefix)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	room, err := t.s.db.Room(ctx, t.p.Actor(), store.NormalizeID(roomID))
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	msgs, err := t.recentMessages(ctx, room.ID)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI: uri, MIMEType: "text/markdown", Text: transcript(room, msgs),
	}}}, nil
}

// recentMessages is the caller's view of a room's last messages, oldest
// first.
func (t mcpTools) recentMessages(ctx context.Context, roomID string) ([]*store.Message, error) {
	actor := t.p.Actor()
	if !t.p.IsAgent() {
		page, err := t.s.db.ListHistory(ctx, actor, roomID, store.HistoryFilter{}, store.PageRequest{Limit: transcriptMessages})
		if err != nil {
			return nil, err
		}
		slices.Reverse(page.Items)
		return page.Items, nil
	}
	// The agent's context is listed oldest first: count it, then read its end.
	count, err := t.s.db.ListContext(ctx, actor, roomID, store.PageRequest{Limit: 1, WithTotal: true})
	if err != nil {
		return nil, err
	}
	page, err := t.s.db.ListContext(ctx, actor, roomID,
		store.PageRequest{Limit: transcriptMessages, Offset: max(0, count.Total-transcriptMessages)})
	if err != nil {
		return nil, err
	}
	return page.Items, nil
}

// transcript renders messages as the text of a room resource.
func transcript(room *store.Room, msgs []*store.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\nroom_id: %s\n\n", roomTitle(room), room.ID)
	if len(msgs) == 0 {
		b.WriteString("(no messages)\n")
	}
	for _, m := range msgs {
		kind := ""
		if m.Type != "text" {
			kind = " [" + m.Type + "]"
		}
		fmt.Fprintf(&b, "- %s %s%s (message_id %s): %s\n", store.FormatTime(m.InsertedAt), m.SenderName, kind, m.ID, m.Content)
	}
	return b.String()
}

func roomTitle(room *store.Room) string {
	if room.Title == nil || *room.Title == "" {
		return "Untitled room"
	}
	return *room.Title
}

// addAgentPrompt adds the prompt that frames an agent's turn in a room.
func (t mcpTools) addAgentPrompt() {
	t.srv.AddPrompt(&mcp.Prompt{
		Name:        "chatd_agent",
		Description: "Work as an agent in chatd rooms: wait, take, work, reply with a mention, mark processed.",
		Arguments:   []*mcp.PromptArgument{{Name: "room_id", Description: "work in this room only (optional)"}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		where := "in any of your rooms"
		wait := "wait_for_message"
		if id := req.Params.Arguments["room_id"]; id != "" {
			where = "in room " + id
			wait = fmt.Sprintf("wait_for_message with room_id %q", id)
		}
		text := fmt.Sprintf(`You are an agent in chatd, a chat server where people and agents work together %s.
Repeat:
1. Call %s. It returns the next message addressed to you and marks it processing for you; {"message": null} means nothing came, so wait again.
2. Read what is asked. If you need more of the conversation, call read_messages or read the room resource chatd://rooms/<room_id>.
3. Do the work. For long work, post_event with message_type thought keeps the room informed.
4. Answer with send_message in the same room, mentioning the sender (their handle or sender_id) so the answer reaches them.
5. Call mark_processed with the room_id and message_id. If you cannot do it, call mark_failed with a short error instead.`, where, wait)
		return &mcp.GetPromptResult{Description: "How to work as a chatd agent",
			Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
	})
}
