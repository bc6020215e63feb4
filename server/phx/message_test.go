package phx

import (
	"encoding/json"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		in                  string
		joinRef, ref, topic string
		event, payload      string
		ok                  bool
	}{
		{`["1","2","room:1","phx_join",{"a":1}]`, "1", "2", "room:1", "phx_join", `{"a":1}`, true},
		{`["","7","phoenix","heartbeat",null]`, "", "7", "phoenix", "heartbeat", `{}`, true}, // nshafer/phx
		{`[null,"5","phoenix","heartbeat",{}]`, "", "5", "phoenix", "heartbeat", `{}`, true}, // phoenix.js
		{`[3,4,"t","e",[]]`, "3", "4", "t", "e", `{}`, true},                                 // numeric refs, non-object payload
		{`["1","2","","e",{}]`, "", "", "", "", "", false},
		{`["1","2","t","",{}]`, "", "", "", "", "", false},
		{`["1","2","t","e"]`, "", "", "", "", "", false},
		{`{"topic":"t"}`, "", "", "", "", "", false},
		{`["1",{},"t","e",{}]`, "", "", "", "", "", false},
		{`not json`, "", "", "", "", "", false},
	} {
		m, err := Decode([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("Decode(%s): err = %v", tc.in, err)
			continue
		}
		if tc.ok && (m.JoinRef != tc.joinRef || m.Ref != tc.ref || m.Topic != tc.topic || m.Event != tc.event || string(m.Payload) != tc.payload) {
			t.Errorf("Decode(%s) = %+v", tc.in, m)
		}
	}
}

func TestEncodeEmitsStringRefsAndNull(t *testing.T) {
	got := string(Encode("3", "", "chat_room:x", "message_created", []byte(`{"id":"1"}`)))
	if want := `["3",null,"chat_room:x","message_created",{"id":"1"}]`; got != want {
		t.Fatalf("Encode = %s, want %s", got, want)
	}
	weird := string(Encode("a\"b\x00", "\u2028", "t", "e", []byte(`{}`)))
	var parts []any
	if err := json.Unmarshal([]byte(weird), &parts); err != nil || parts[0] != "a\"b\x00" || parts[1] != "\u2028" {
		t.Fatalf("Encode does not escape refs as JSON: %s (%v)", weird, err)
	}
}

// FuzzDecode: whatever a client sends, Decode neither panics nor returns a
// message that does not encode back to valid JSON.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`["1","2","room:1","phx_join",{"a":1}]`, `["","7","phoenix","heartbeat",null]`, `[null,"5","phoenix","heartbeat",{}]`,
		`[3,4,"t","e",[]]`, `[]`, `[[],[],[],[],[]]`, `["1","2","t","e",{"x":[1,2,{"y":null}]}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		if m.Topic == "" || m.Event == "" {
			t.Fatalf("decoded an empty topic or event from %q", b)
		}
		if !json.Valid(Encode(m.JoinRef, m.Ref, m.Topic, m.Event, m.Payload)) {
			t.Fatalf("re-encoding %q gives invalid JSON", b)
		}
	})
}
