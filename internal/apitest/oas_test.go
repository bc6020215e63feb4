package apitest

import "testing"

const agentMe = `{"data":{"id":"01a20763-23f2-7176-bd8a-fa36f692dff7","name":"Helper","handle":"alice/helper","description":null,"bio":null,
	"owner_uuid":"01a20763-23d9-75ab-b3fb-2fc72f59adc4","is_external":true,"listed_in_directory":false,"tags":[],
	"feature_flags":{"ff_room_tasks":true},"inserted_at":"2026-11-23T07:51:07.505919Z","updated_at":"2026-11-23T07:51:07.505919Z"}}`

func TestValidatorLoadsTheDocumentAndCatchesShapeErrors(t *testing.T) {
	v, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.ValidateResponse("GET", "/api/v1/agent/me", 200, []byte(agentMe)); err != nil {
		t.Fatalf("good body refused: %v", err)
	}
	for name, bad := range map[string]string{
		"missing handle": `{"data":{"id":"01a20763-23f2-7176-bd8a-fa36f692dff7","name":"H","owner_uuid":"01a20763-23d9-75ab-b3fb-2fc72f59adc4","inserted_at":"2026-11-23T07:51:07Z","updated_at":"2026-11-23T07:51:07Z"}}`,
		"bad timestamp":  `{"data":{"id":"01a20763-23f2-7176-bd8a-fa36f692dff7","name":"H","handle":"a/h","owner_uuid":"01a20763-23d9-75ab-b3fb-2fc72f59adc4","inserted_at":"yesterday","updated_at":"2026-11-23T07:51:07Z"}}`,
		"bad uuid":       `{"data":{"id":"nope","name":"H","handle":"a/h","owner_uuid":"01a20763-23d9-75ab-b3fb-2fc72f59adc4","inserted_at":"2026-11-23T07:51:07Z","updated_at":"2026-11-23T07:51:07Z"}}`,
		"unknown field":  `{"data":{"id":"01a20763-23f2-7176-bd8a-fa36f692dff7","name":"Helper","handle":"alice/helper","description":null,"bio":null,"owner_uuid":"01a20763-23d9-75ab-b3fb-2fc72f59adc4","is_external":true,"listed_in_directory":false,"tags":[],"feature_flags":{},"inserted_at":"2026-11-23T07:51:07.505919Z","updated_at":"2026-11-23T07:51:07.505919Z","secret":"x"}}`,
	} {
		if err := v.ValidateResponse("GET", "/api/v1/agent/me", 200, []byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := v.ValidateResponse("GET", "/api/v1/agent/me", 401, []byte(`{"error":{"code":"unauthorized","message":"m","request_id":"r"}}`)); err != nil {
		t.Errorf("error envelope refused: %v", err)
	}
	if err := v.ValidateResponse("GET", "/api/v1/agent/me", 401, []byte(`{"error":{"code":"unauthorized"}}`)); err == nil {
		t.Error("incomplete envelope accepted")
	}
	if err := v.ValidateResponse("PUT", "/api/v1/me/profile", 422, []byte(`{"error":{"code":"validation_error","message":"m","request_id":"r"}}`)); err == nil {
		t.Error("422 without details accepted")
	}
	if !v.Documented("DELETE", "/api/v1/me/agents/01a20763-23f2-7176-bd8a-fa36f692dff7") || v.Documented("GET", "/api/v1/nope") {
		t.Error("route lookup is wrong")
	}
}

// What the document does not say the server answers is a failure: a status
// the operation does not list, a code its status does not list, a success
// for a request no operation matches.
func TestValidatorRefusesWhatIsNotDocumented(t *testing.T) {
	v, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	envelope := func(code string) []byte {
		return []byte(`{"error":{"code":"` + code + `","message":"m","request_id":"r"}}`)
	}
	for name, tc := range map[string]struct {
		method, path string
		status       int
		body         []byte
	}{
		"undocumented status":         {"GET", "/api/v1/agent/me", 409, envelope("conflict")},
		"code of another status":      {"GET", "/api/v1/agent/me", 401, envelope("forbidden")},
		"unknown code":                {"GET", "/api/v1/agent/me", 403, envelope("limit_reached")},
		"success for no operation":    {"GET", "/api/v1/nope", 200, []byte(`{}`)},
		"other error for a bad route": {"GET", "/api/v1/nope", 401, envelope("unauthorized")},
		"body where none is said":     {"DELETE", "/api/v1/me/keys/01a20763-23f2-7176-bd8a-fa36f692dff7", 204, []byte(`{}`)},
	} {
		if err := v.ValidateResponse(tc.method, tc.path, tc.status, tc.body); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, tc := range map[string]struct {
		method, path string
		status       int
		body         []byte
	}{
		"router 404":      {"GET", "/api/v1/nope", 404, envelope("not_found")},
		"router 405":      {"PUT", "/api/v1/agent/me", 405, envelope("method_not_allowed")},
		"a web app file":  {"GET", "/app.js", 200, []byte("export {}")},
		"a file download": {"GET", "/api/v1/me/chats/01a20763-23f2-7176-bd8a-fa36f692dff7/files/01a20763-23f2-7176-bd8a-fa36f692dff7", 200, []byte("raw bytes")},
	} {
		if err := v.ValidateResponse(tc.method, tc.path, tc.status, tc.body); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
}
