package apitest

import (
	"strings"
	"testing"
)

func TestCheckStory(t *testing.T) {
	env := func(code, message, details string) []byte {
		b := `{"error":{"code":"` + code + `","message":"` + message + `","request_id":"r"`
		if details != "" {
			b += `,"details":` + details
		}
		return []byte(b + "}}")
	}
	twoProblems := `{"/message/attachment_ids/0":["is not a file of this room: x"],"/message/mentions/0/id":["is not a participant of this room"]}`
	for _, tc := range []struct {
		name   string
		status int
		body   []byte
		wrong  string // "" when the envelope tells one story; else part of the complaint
	}{
		{"the code's problem leads", 422,
			env("mentioned_participant_not_in_room", "/message/mentions/0/id is not a participant of this room (and 1 more)", twoProblems), ""},
		{"another problem leads (the audited bug)", 422,
			env("mentioned_participant_not_in_room", "/message/attachment_ids/0 is not a file of this room: x (and 1 more)", twoProblems), "not the code's"},
		{"a miscount of the others", 422,
			env("mentioned_participant_not_in_room", "/message/mentions/0/id is not a participant of this room (and 2 more)", twoProblems), "counts 2"},
		{"a message of no detail", 422,
			env("validation_error", "something is wrong", `{"/name":["can't be blank"]}`), "does not lead"},
		{"the whole request", 422, env("validation_error", "can't be empty", `{"":["can't be empty"]}`), ""},
		{"a conflict naming its field", 409,
			env("conflict", "handle bob is already taken", `{"/handle":["is already taken"]}`), ""},
		{"a conflict naming another field", 409,
			env("conflict", "handle bob is already taken", `{"/email":["is already in use"]}`), "does not lead"},
		{"a refinement without details that names its problem", 403,
			env("cannot_remove_sole_owner", "cannot remove the only owner of the room", ""), ""},
		{"a refinement without details that does not", 403,
			env("execution_stopped", "not permitted", ""), "says nothing"},
		{"details that are no pointers", 403, env("forbidden", "the scope exceeds the grant", `{"granted":["chats:read"]}`), ""},
		{"a quota's figures", 403, env("limit_reached", "limit reached: at most 2 agents", `{"resource":"agents","limit":2,"current":2}`), ""},
		{"a success", 200, []byte(`{"data":{}}`), ""},
	} {
		err := CheckStory(tc.status, tc.body)
		switch {
		case tc.wrong == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wrong != "" && (err == nil || !strings.Contains(err.Error(), tc.wrong)):
			t.Errorf("%s: got %v, want a complaint of %q", tc.name, err, tc.wrong)
		}
	}
}
