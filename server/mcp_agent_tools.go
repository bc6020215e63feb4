package server

import (
	"context"
	"net/url"
	"time"

	"github.com/chatd/chatd/store"
)

// The agent's tools: the Agent API's routes, and wait_for_message, which
// takes the next message addressed to the agent without a socket.

// defaultWaitSeconds is wait_for_message's wait when it names none; the
// longest is the long-poll's (maxWait).
const defaultWaitSeconds = 30

type (
	peersArgs struct {
		offsetArgs
		NotInRoom string `json:"not_in_room,omitempty" jsonschema:"only those not yet in this room (its id)"`
		Type      string `json:"type,omitempty" jsonschema:"User or Agent"`
	}
	renameArgs struct {
		roomArg
		Title string `json:"title" jsonschema:"the new title"`
	}
	readMessagesArgs struct {
		roomArg
		cursorArgs
		Status string `json:"status,omitempty" jsonschema:"pending, processing, processed, failed or all; omitted: everything not processed"`
	}
	waitArgs struct {
		RoomID         string `json:"room_id,omitempty" jsonschema:"wait in this room only (its id); omitted: in any of your rooms"`
		TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"how long to wait, 1 to 60 seconds (omitted or 0: 30)"`
	}
	messageRefArgs struct {
		roomArg
		MessageID string `json:"message_id" jsonschema:"the message's id, as wait_for_message or read_messages gave it"`
	}
	failedArgs struct {
		messageRefArgs
		Error string `json:"error" jsonschema:"what went wrong, in a sentence"`
	}
	eventArgs struct {
		roomArg
		MessageType string         `json:"message_type" jsonschema:"thought, tool_call, tool_result, error, task or attention"`
		Content     string         `json:"content" jsonschema:"the event's text"`
		Metadata    map[string]any `json:"metadata,omitempty" jsonschema:"an optional JSON object"`
	}
	memoryArgs struct {
		Content    string `json:"content" jsonschema:"what to remember"`
		Thought    string `json:"thought,omitempty" jsonschema:"why it is worth remembering"`
		System     string `json:"system,omitempty" jsonschema:"sensory, working or long_term (default long_term)"`
		Type       string `json:"type,omitempty" jsonschema:"semantic (default), episodic or procedural for long_term; iconic, echoic or haptic for sensory"`
		Segment    string `json:"segment,omitempty" jsonschema:"user, agent (default), tool or guideline"`
		Scope      string `json:"scope,omitempty" jsonschema:"agent (default: about yourself), subject (about subject_id) or organization"`
		SubjectID  string `json:"subject_id,omitempty" jsonschema:"whom the memory is about, for scope subject"`
		ChatRoomID string `json:"chat_room_id,omitempty" jsonschema:"the room it was learned in"`
	}
	listMemoriesArgs struct {
		cursorArgs
		Scope     string `json:"scope,omitempty" jsonschema:"subject, organization, agent or all"`
		SubjectID string `json:"subject_id,omitempty" jsonschema:"about whom (an id)"`
		Status    string `json:"status,omitempty" jsonschema:"active (default), superseded, archived or all"`
	}
	memoryRefArgs struct {
		MemoryID string `json:"memory_id" jsonschema:"the memory's id"`
	}
	addContactArgs struct {
		Handle  string `json:"handle" jsonschema:"whom to ask, e.g. bob or bob/assistant"`
		Message string `json:"message,omitempty" jsonschema:"a note sent with the request"`
	}
	respondContactArgs struct {
		Action    string `json:"action" jsonschema:"approve or reject"`
		RequestID string `json:"request_id,omitempty" jsonschema:"the request's id (or give handle)"`
		Handle    string `json:"handle,omitempty" jsonschema:"the handle of who asked (or give request_id)"`
	}
	goalArgs struct {
		roomArg
		GoalTitle   string `json:"goal_title" jsonschema:"the room's goal in a line"`
		GoalSummary string `json:"goal_summary,omitempty" jsonschema:"more about the goal"`
	}
)

func (t mcpTools) addAgentTools() {
	routeTool(t, "whoami", "Who you are: your id, handle, name and owner.", func(noArgs) routeCall {
		return routeCall{method: "GET", route: "/api/v1/agent/me", result: "agent"}
	})
	routeTool(t, "list_peers", "The people and agents you can add to rooms or mention.", func(a peersArgs) routeCall {
		return routeCall{method: "GET", route: "/api/v1/agent/peers",
			query: a.query(filters("not_in_chat", a.NotInRoom, "type", a.Type)), result: "peers"}
	})
	routeTool(t, "list_rooms", "The rooms you are in, newest first.", func(a offsetArgs) routeCall {
		return routeCall{method: "GET", route: "/api/v1/agent/chats", query: a.query(url.Values{}), result: "rooms"}
	})
	routeTool(t, "create_room", "Create a room; you are its owner and first participant.", func(a titleArgs) routeCall {
		return routeCall{method: "POST", route: "/api/v1/agent/chats", body: a.roomBody(), result: "room", bodyKey: "chat"}
	})
	routeTool(t, "rename_room", "Change a room's title.", func(a renameArgs) routeCall {
		return routeCall{method: "PATCH", route: "/api/v1/agent/chats/:chat_id", params: []string{a.RoomID},
			body: map[string]any{"chat": map[string]any{"title": a.Title}}, result: "room", bodyKey: "chat"}
	})
	t.addRoomTools("/api/v1/agent/chats")
	t.addDeliveryTools()
	t.addAgentMemoryTools()
	t.addAgentContactTools()
	t.addBoardTools()
	searchTool(t, "/api/v1/agent/search", "Search what you see in your rooms (what you sent, and the messages that mention you) "+
		"for words, most relevant first; each result has a snippet with the matches between « and ».")
}

// addRoomTools adds the tools both kinds of caller have in a room.
func (t mcpTools) addRoomTools(rooms string) {
	routeTool(t, "list_participants", "Who is in a room.", func(a struct {
		roomArg
		cursorArgs
	}) routeCall {
		return routeCall{method: "GET", route: rooms + "/:chat_id/participants", params: []string{a.RoomID},
			query: a.query(url.Values{}), result: "participants"}
	})
	ownTool(t, "add_participant", "Add a person or agent to a room, by handle or id.",
		func(ctx context.Context, a participantArgs) (map[string]any, error) {
			return t.addParticipant(ctx, rooms+"/:chat_id/participants", a)
		})
	routeTool(t, "send_message", "Send a text message to a room, addressed (mentioned) to at least one participant.",
		func(a messageArgs) routeCall {
			return routeCall{method: "POST", route: rooms + "/:chat_id/messages", params: []string{a.RoomID},
				body: a.messageBody(), result: "message", bodyKey: "message"}
		})
}

func (t mcpTools) addDeliveryTools() {
	routeTool(t, "read_messages", "The messages addressed to you in a room, oldest first, with your processing state.",
		func(a readMessagesArgs) routeCall {
			return routeCall{method: "GET", route: "/api/v1/agent/chats/:chat_id/messages", params: []string{a.RoomID},
				query: a.query(filters("status", a.Status)), result: "messages"}
		})
	ownTool(t, "wait_for_message", "Wait for the next message addressed to you, in one room or any of yours, and take it: "+
		"it is marked processing for you. Returns {\"message\": null} when none arrives in time.",
		func(ctx context.Context, a waitArgs) (map[string]any, error) { return t.waitForMessage(ctx, a) })
	routeTool(t, "mark_processed", "Report that you finished a message.", func(a messageRefArgs) routeCall {
		return routeCall{method: "POST", route: "/api/v1/agent/chats/:chat_id/messages/:id/processed",
			params: []string{a.RoomID, a.MessageID}, result: "delivery"}
	})
	routeTool(t, "mark_failed", "Report that you could not finish a message; it can be retried.", func(a failedArgs) routeCall {
		return routeCall{method: "POST", route: "/api/v1/agent/chats/:chat_id/messages/:id/failed",
			params: []string{a.RoomID, a.MessageID}, body: map[string]any{"error": a.Error}, result: "delivery"}
	})
	routeTool(t, "post_event", "Post an event to a room: a thought, tool call or result, error, task or attention record. Mentions no one.",
		func(a eventArgs) routeCall {
			event := map[string]any{"message_type": a.MessageType, "content": a.Content}
			if a.Metadata != nil {
				event["metadata"] = a.Metadata
			}
			return routeCall{method: "POST", route: "/api/v1/agent/chats/:chat_id/events", params: []string{a.RoomID},
				body: map[string]any{"event": event}, result: "event", bodyKey: "event"}
		})
}

// errMCPSessionEnded answers a wait its session's end stopped: the
// credential ended, the agent was deleted, the client ended the session,
// or the server is stopping.
var errMCPSessionEnded = &store.Error{Code: store.CodeUnauthorized,
	Message: "this MCP session ended while the call waited (its credential ended, its agent was deleted, or the server is stopping); open a new session"}

// sessionEnded reports whether the session of these tools has ended.
func (t mcpTools) sessionEnded() bool {
	select {
	case <-t.ended:
		return true
	default:
		return false
	}
}

// waitForMessage is wait_for_message: the claimed message, in the agent's
// view, or null.
func (t mcpTools) waitForMessage(ctx context.Context, a waitArgs) (map[string]any, error) {
	seconds := a.TimeoutSeconds
	switch {
	case seconds == 0:
		seconds = defaultWaitSeconds
	case seconds < 1 || seconds > int(maxWait/time.Second):
		return nil, &toolError{Code: "validation_error", Message: "timeout_seconds must be 1 to 60",
			Details: map[string][]string{"/timeout_seconds": {"must be 1 to 60"}}}
	}
	msg, err := t.s.claimWithin(ctx, t.p.Actor(), a.RoomID, time.Duration(seconds)*time.Second, t.ended)
	if err == nil && msg == nil && t.sessionEnded() {
		return nil, errMCPSessionEnded
	}
	if err != nil || msg == nil {
		return map[string]any{"message": nil}, err
	}
	return map[string]any{"message": newMessageView(msg, agentReader(t.p.Agent.ID)), "room_id": msg.RoomID}, nil
}

func (t mcpTools) addAgentMemoryTools() {
	routeTool(t, "store_memory", "Remember something for later sessions.", func(a memoryArgs) routeCall {
		return routeCall{method: "POST", route: "/api/v1/agent/memories", body: map[string]any{"memory": a.memory()},
			result: "memory", bodyKey: "memory"}
	})
	routeTool(t, "list_memories", "What you remember, newest first.", func(a listMemoriesArgs) routeCall {
		q := filters("scope", a.Scope, "subject_id", a.SubjectID, "status", a.Status)
		return routeCall{method: "GET", route: "/api/v1/agent/memories", query: a.query(q), result: "memories"}
	})
	routeTool(t, "archive_memory", "Forget a memory (it is archived).", func(a memoryRefArgs) routeCall {
		return routeCall{method: "POST", route: "/api/v1/agent/memories/:id/archive", params: []string{a.MemoryID}, result: "memory"}
	})
}

// memory is the REST memory the arguments describe, with the defaults a
// model can rely on.
func (a memoryArgs) memory() map[string]any {
	m := map[string]any{"content": a.Content, "thought": a.Thought,
		"system": orDefault(a.System, "long_term"), "type": orDefault(a.Type, "semantic"),
		"segment": orDefault(a.Segment, "agent"), "scope": orDefault(a.Scope, "agent")}
	if a.SubjectID != "" {
		m["subject_id"] = a.SubjectID
	}
	if a.ChatRoomID != "" {
		m["chat_room_id"] = a.ChatRoomID
	}
	return m
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (t mcpTools) addAgentContactTools() {
	routeTool(t, "list_contacts", "Your contacts.", func(a offsetArgs) routeCall {
		return routeCall{method: "GET", route: "/api/v1/agent/contacts", query: a.query(url.Values{}), result: "contacts"}
	})
	routeTool(t, "add_contact", "Ask someone, by handle, to become your contact.", func(a addContactArgs) routeCall {
		body := map[string]any{"handle": a.Handle}
		if a.Message != "" {
			body["message"] = a.Message
		}
		return routeCall{method: "POST", route: "/api/v1/agent/contacts/add", body: body, result: "request"}
	})
	routeTool(t, "respond_contact_request", "Approve or reject a contact request made to you.", func(a respondContactArgs) routeCall {
		body := map[string]any{"action": a.Action}
		if a.RequestID != "" {
			body["request_id"] = a.RequestID
		}
		if a.Handle != "" {
			body["handle"] = a.Handle
		}
		return routeCall{method: "POST", route: "/api/v1/agent/contacts/requests/respond", body: body, result: "request"}
	})
}

func (t mcpTools) addBoardTools() {
	routeTool(t, "get_board", "A room's board: its goal.", func(a roomArg) routeCall {
		return routeCall{method: "GET", route: "/api/v1/agent/chats/:chat_id/board", params: []string{a.RoomID}, result: "board"}
	})
	routeTool(t, "set_board_goal", "Set a room's goal.", func(a goalArgs) routeCall {
		body := map[string]any{"goal_title": a.GoalTitle}
		if a.GoalSummary != "" {
			body["goal_summary"] = a.GoalSummary
		}
		return routeCall{method: "PUT", route: "/api/v1/agent/chats/:chat_id/board", params: []string{a.RoomID},
			body: body, result: "board"}
	})
}
