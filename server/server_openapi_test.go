package server

import (
	"bytes"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chatd/chatd/internal/apitest"
	"github.com/chatd/chatd/server/openapi"
)

// routeKey is a route with its parameters' names left out (the router names
// the room :chat_id everywhere, the document names it {id} where the Band
// document does), so the two can be compared.
func routeKey(method, path string) string {
	return strings.ToUpper(method) + " " + pathParam.ReplaceAllString(path, "{}")
}

var pathParam = regexp.MustCompile(`:[a-z_]+|\{[a-z_]+\}`)

// Every route the router serves is documented, with the credentials its
// audience takes, and every documented operation is served: the document
// cannot fall behind the router, nor promise what chatd does not do.
func TestEveryRouteIsDocumented(t *testing.T) {
	ts := newTestServer(t)
	documented := map[string]apitest.Operation{}
	for _, op := range ts.oas.Operations() {
		documented[routeKey(op.Method, op.Path)] = op
	}
	served := map[string]bool{}
	for _, rt := range registeredRoutes(ts.srv) {
		key := routeKey(rt.method, rt.path)
		served[key] = true
		op, ok := documented[key]
		if !ok {
			t.Errorf("%s %s is served but not in server/openapi (add it to the group's YAML)", rt.method, rt.path)
			continue
		}
		if got, want := securitySchemes(op), audienceSchemes[rt.aud]; !slices.Equal(got, want) && rt.path != "/api/v1/socket/websocket" {
			t.Errorf("%s %s: documented credentials %v, but the route takes %v", rt.method, rt.path, got, want)
		}
	}
	for key, op := range documented {
		if !served[key] {
			t.Errorf("%s %s is documented but chatd does not serve it", op.Method, op.Path)
		}
	}
}

// audienceSchemes are the security schemes that document each audience.
var audienceSchemes = map[audience][]string{
	public:     nil,
	agentsOnly: {"agentKey"},
	humansOnly: {"bearerToken", "humanKey"},
	anyCaller:  {"agentKey", "bearerToken", "humanKey", "oauth"},
}

func securitySchemes(op apitest.Operation) []string {
	var names []string
	if op.Op.Security != nil {
		for _, req := range *op.Op.Security {
			for name := range req {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Every error code the document lists is answered with the status it is
// listed under, as the one table of codes (errors.go) says. The OAuth
// endpoints' nearest codes for chatd's own refusals are the exception
// (oauth_errors.go): a rate limit keeps its 429 as temporarily_unavailable,
// a body too large its 413 as invalid_request.
func TestDocumentedErrorCodesMatchTheirStatus(t *testing.T) {
	ts := newTestServer(t)
	nearest := map[string]bool{"temporarily_unavailable": true, "invalid_request": true, "server_error": true}
	for _, op := range ts.oas.Operations() {
		for status, codes := range apitest.ErrorStatuses(op.Op) {
			for _, code := range codes {
				if strings.HasPrefix(op.Path, "/oauth/") && nearest[code] {
					continue
				}
				if got, ok := statusOf[errorCode(code)]; !ok || got != status {
					t.Errorf("%s %s: code %s is listed under %d, but chatd answers it with %d", op.Method, op.Path, code, status, got)
				}
			}
		}
	}
}

// The document is served to anyone, as built into the binary, and
// revalidates by its strong ETag.
func TestServesItsOpenAPIDocument(t *testing.T) {
	ts := newTestServer(t)
	r := ts.do(t, "GET", "/api/v1/openapi.json", noCred, nil)
	expect(t, r, 200, "")
	if !bytes.Equal(r.body, openapi.JSON) {
		t.Fatal("the served document is not the embedded one")
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	etag := r.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) {
		t.Fatalf("no strong ETag: %q", etag)
	}
	req, _ := http.NewRequest("GET", ts.http.URL+"/api/v1/openapi.json", nil)
	req.Header.Set("If-None-Match", etag)
	res, err := ts.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match with the ETag: %d, want 304", res.StatusCode)
	}
	ts.checkResponse(t, "GET", "/api/v1/openapi.json", &response{status: res.StatusCode, header: res.Header})
}
