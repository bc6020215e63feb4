package apitest

import "testing"

func TestValidatorLoadsTheDocumentAndCatchesShapeErrors(t *testing.T) {
	v, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	good := `{"data":{"id":"01a20763-23f2-7176-bd8a-fa36f692dff7","name":"Helper","handle":"alice/helper","description":null,
		"owner_uuid":"01a20763-23d9-75ab-b3fb-2fc72f59adc4","tags":[],"inserted_at":"2026-11-23T07:51:07.505919Z","updated_at":"2026-11-23T07:51:07.505919Z"}}`
	if err := v.ValidateResponse("GET", "/api/v1/agent/me", 200, []byte(good)); err != nil {
		t.Fatalf("good body refused: %v", err)
	}
	for name, bad := range map[string]string{
		"missing handle": `{"data":{"id":"01a20763-23f2-7176-bd8a-fa36f692dff7","name":"H","owner_uuid":"01a20763-23d9-75ab-b3fb-2fc72f59adc4","inserted_at":"2026-11-23T07:51:07Z","updated_at":"2026-11-23T07:51:07Z"}}`,
		"bad timestamp":  `{"data":{"id":"01a20763-23f2-7176-bd8a-fa36f692dff7","name":"H","handle":"a/h","owner_uuid":"01a20763-23d9-75ab-b3fb-2fc72f59adc4","inserted_at":"yesterday","updated_at":"2026-11-23T07:51:07Z"}}`,
		"bad uuid":       `{"data":{"id":"nope","name":"H","handle":"a/h","owner_uuid":"01a20763-23d9-75ab-b3fb-2fc72f59adc4","inserted_at":"2026-11-23T07:51:07Z","updated_at":"2026-11-23T07:51:07Z"}}`,
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
