package server

import (
	"context"
	"net/url"
)

// A person's tools, so that their own assistant can act for them: the
// Human API's routes, and message_status.

type (
	historyArgs struct {
		roomArg
		cursorArgs
		MessageType string `json:"message_type,omitempty" jsonschema:"only messages of this type: text, thought, tool_call, tool_result, error, task or attention"`
	}
	listAgentsArgs struct {
		cursorArgs
	}
)

func (t mcpTools) addHumanTools() {
	routeTool(t, "whoami", "Who you are: your id, handle and name.", func(noArgs) routeCall {
		return routeCall{method: "GET", route: "/api/v1/me", result: "user"}
	})
	routeTool(t, "list_rooms", "The rooms you can read, newest first.", func(a cursorArgs) routeCall {
		return routeCall{method: "GET", route: "/api/v1/me/chats", query: a.query(url.Values{}), result: "rooms"}
	})
	routeTool(t, "create_room", "Create a room; you are its owner.", func(a titleArgs) routeCall {
		return routeCall{method: "POST", route: "/api/v1/me/chats", body: a.roomBody(), result: "room", bodyKey: "chat"}
	})
	routeTool(t, "read_messages", "A room's messages, newest first, with each agent's delivery state.",
		func(a historyArgs) routeCall {
			return routeCall{method: "GET", route: "/api/v1/me/chats/:chat_id/messages", params: []string{a.RoomID},
				query: a.query(filters("message_type", a.MessageType)), result: "messages"}
		})
	routeTool(t, "list_agents", "The agents you own.", func(a listAgentsArgs) routeCall {
		return routeCall{method: "GET", route: "/api/v1/me/agents", query: a.query(url.Values{}), result: "agents"}
	})
	ownTool(t, "message_status", "Where a message stands with each agent it addresses: metadata.delivery_status "+
		"holds each one's status (pending, processing, processed, failed) and attempts.",
		func(ctx context.Context, a messageRefArgs) (map[string]any, error) {
			msg, err := t.s.db.Message(ctx, t.p.Actor(), a.RoomID, a.MessageID)
			if err != nil {
				return nil, err
			}
			return map[string]any{"message": newMessageView(msg, personReader(t.p.Actor().ID))}, nil
		})
	t.addRoomTools("/api/v1/me/chats")
	searchTool(t, "/api/v1/me/search", "Search the messages of every room you read for words, most relevant first; "+
		"each result has a snippet with the matches between « and ».")
}
