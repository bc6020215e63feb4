// Package phx speaks the Phoenix Channels protocol (serializer V2, JSON
// arrays) over WebSocket connections upgraded with gobwas/ws: framing,
// connections with bounded send queues, and topic subscriptions. It knows
// nothing of what the topics mean; the server decides who may join what and
// what to push.
//
// Wire facts the real clients depend on (phoenix.js, nshafer/phx, the Band
// Python client): messages are [join_ref, ref, topic, event, payload]; refs
// are strings on the wire (a number breaks the Go client); clients may send
// "" or null for a missing join_ref and null for an empty payload; pushes
// carry the subscriber's join_ref (the Python client drops any other).
package phx

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Message is one Phoenix message.
type Message struct {
	JoinRef string // "" when absent
	Ref     string // "" when absent
	Topic   string
	Event   string
	Payload json.RawMessage // an object; {} when the client sent null
}

// Caps on the fields of a client message that replies echo: without them a
// 64 KiB message could make a reply six times its size (JSON escapes "<" as
// \u003c), three times over for phx_leave, which echoes the join_ref in two
// frames. Real clients stay far below: refs are counters, the longest topic
// is "room_participants:<uuid>" (54 bytes), and the events a client may
// send are phx_join, phx_leave and heartbeat.
const (
	MaxRefLen   = 64 // join_ref and ref
	MaxTopicLen = 128
	MaxEventLen = 64
)

// fieldOverCap names the first field of m longer than its cap, or is "".
func (m Message) fieldOverCap() string {
	switch {
	case len(m.JoinRef) > MaxRefLen:
		return "join_ref"
	case len(m.Ref) > MaxRefLen:
		return "ref"
	case len(m.Topic) > MaxTopicLen:
		return "topic"
	case len(m.Event) > MaxEventLen:
		return "event"
	}
	return ""
}

// Errors of Decode.
var (
	ErrNotAMessage = errors.New("phx: a message is a JSON array [join_ref, ref, topic, event, payload]")
)

// Decode parses a V2 message. Refs may be strings, numbers or null; topic
// and event must be non-empty strings; a payload that is not an object reads
// as {}.
func Decode(b []byte) (Message, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != 5 {
		return Message{}, ErrNotAMessage
	}
	var m Message
	var err error
	if m.JoinRef, err = ref(parts[0]); err != nil {
		return Message{}, err
	}
	if m.Ref, err = ref(parts[1]); err != nil {
		return Message{}, err
	}
	if json.Unmarshal(parts[2], &m.Topic) != nil || m.Topic == "" {
		return Message{}, ErrNotAMessage
	}
	if json.Unmarshal(parts[3], &m.Event) != nil || m.Event == "" {
		return Message{}, ErrNotAMessage
	}
	m.Payload = json.RawMessage("{}")
	if p := bytes.TrimSpace(parts[4]); len(p) > 0 && p[0] == '{' {
		m.Payload = p
	}
	return m, nil
}

func ref(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", ErrNotAMessage
		}
		return s, nil
	default:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", ErrNotAMessage
		}
		return n.String(), nil
	}
}

// Encode renders a message; empty refs are null, non-empty refs strings.
// payload must be a JSON object.
func Encode(joinRef, ref, topic, event string, payload []byte) []byte {
	b := make([]byte, 0, len(payload)+len(topic)+len(event)+48)
	b = append(b, '[')
	b = appendRef(b, joinRef)
	b = append(b, ',')
	b = appendRef(b, ref)
	b = append(b, ',')
	b = appendString(b, topic)
	b = append(b, ',')
	b = appendString(b, event)
	b = append(b, ',')
	b = append(b, payload...)
	return append(b, ']')
}

func appendRef(b []byte, ref string) []byte {
	if ref == "" {
		return append(b, "null"...)
	}
	return appendString(b, ref)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// Reply renders a phx_reply to a client message.
func Reply(to Message, status string, response any) []byte {
	body, err := json.Marshal(map[string]any{"status": status, "response": response})
	if err != nil {
		body = []byte(`{"status":"error","response":{}}`)
	}
	return Encode(to.JoinRef, to.Ref, to.Topic, "phx_reply", body)
}
