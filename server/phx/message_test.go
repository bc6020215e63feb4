package phx

import (
	"bytes"
	"encoding/json"
	"reflect"
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
// message that does not encode back to the JSON it was decoded from, up to
// what Decode documents it normalizes: refs become strings ("" and null
// both mean absent), and a payload that is not an object becomes {}.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`["1","2","room:1","phx_join",{"a":1}]`, `["","7","phoenix","heartbeat",null]`, `[null,"5","phoenix","heartbeat",{}]`,
		`[3,4,"t","e",[]]`, `[]`, `[[],[],[],[],[]]`, `["1","2","t","e",{"x":[1,2,{"y":null}]}]`,
		`[1e3,-0.5,"t\u0000","\ud800",{"a":"\u2028"}]`, `[ "1" , null , "t" , "e" , { } ]`, `["1","2","t","e",{"a":1,"a":2}]`,
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
		out := Encode(m.JoinRef, m.Ref, m.Topic, m.Event, m.Payload)
		var sent, back []any
		if err := unmarshalNumbers(b, &sent); err != nil {
			t.Fatalf("Decode accepted %q, which is not JSON: %v", b, err)
		}
		if err := unmarshalNumbers(out, &back); err != nil || len(back) != 5 {
			t.Fatalf("re-encoding %q gives %s, not a five-element array (%v)", b, out, err)
		}
		for i, want := range []any{normalRef(sent[0]), normalRef(sent[1]), sent[2], sent[3]} {
			if !reflect.DeepEqual(back[i], want) {
				t.Fatalf("element %d of %q re-encodes as %#v, want %#v", i, b, back[i], want)
			}
		}
		wantPayload := sent[4]
		if _, isObject := wantPayload.(map[string]any); !isObject {
			wantPayload = map[string]any{}
		}
		if !reflect.DeepEqual(back[4], wantPayload) {
			t.Fatalf("the payload of %q re-encodes as %#v, want %#v", b, back[4], wantPayload)
		}
		if again, err := Decode(out); err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("the re-encoding %s of %q decodes as %+v (%v), not %+v", out, b, again, err, m)
		}
	})
}

// normalRef is a ref as Encode writes it back: a string, or null when absent.
func normalRef(v any) any {
	switch r := v.(type) {
	case json.Number:
		return string(r)
	case string:
		if r != "" {
			return r
		}
	}
	return nil
}

func unmarshalNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
