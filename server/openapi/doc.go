// Package openapi is chatd's own description of its HTTP API: an OpenAPI 3.1
// document of every route chatd serves, the Band operations and chatd's
// extensions alike, each with the statuses and error codes it answers.
//
// The sources are hand-written YAML, one file per endpoint group
// (rooms.yaml, messages.yaml, ...) plus openapi.yaml (the document's head:
// info, tags in display order, security schemes) and components.yaml (the
// envelope, paging metadata and the schemas and responses several groups
// share). Hand-written rather than generated from Go types: the handlers
// render many bodies from maps and hand-built JSON (a text message's
// metadata), so types would describe only part of what is sent, and the
// document's prose (who may call a route, what each refusal means) is the
// point of it. The tests keep it honest instead: every response the server
// suite sees is validated against it, and every route the router registers
// must be in it.
//
// openapi.json is generated from the sources and committed; the chatd
// binary embeds it (JSON) and serves it at GET /api/v1/openapi.json, so the
// binary carries no YAML parser. `go test ./server/openapi -run TestGenerated
// -update` rewrites it; without -update that test fails when it is stale.
//
// The generator merges the files' paths and components (refusing any name
// defined twice) and renders two extensions into prose for readers of the
// reference: each error response's x-error-codes (the envelope codes it can
// carry, which the test validator also enforces) and each operation's
// x-chatd-extension (not part of the Band API). An error response written
// inline with only its x-error-codes (and perhaps a description) gets the
// error envelope as its content (ValidationError for 422).
//
// To add a route: describe it in its group's file (a new group: a new file,
// and its tag in openapi.yaml), with every status it answers and each error
// status's x-error-codes; run the -update command above; commit the YAML
// and openapi.json. The server's tests then fail for a response, status or
// code the document does not list, and for a route it lacks.
//
// internal/apitest validates against this document; TestBandCompatibility
// (compat_test.go) compares it with the official Band document when that
// is beside the repository.
package openapi

import _ "embed"

// JSON is the generated document (openapi.json).
//
//go:embed openapi.json
var JSON []byte
