package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/chatd/chatd/store"
)

// The OAuth endpoints answer refusals as the OAuth RFCs prescribe
// (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 7009 §2.2.1):
// {"error": "<code>", "error_description": "<message>"}, which is what
// OAuth clients parse. That is a deliberate exception to chatd's envelope;
// the request id is still in the x-request-id header and the log line. A
// refusal chatd decides in its own terms (a body too large, a rate limit, a
// full write queue) keeps its status and gets the nearest OAuth code.

// The OAuth error codes only this package decides: how the request arrived.
const (
	codeOAuthInvalidRequest          errorCode = "invalid_request"           // a parameter missing, repeated or malformed
	codeOAuthUnsupportedGrantType    errorCode = "unsupported_grant_type"    // neither authorization_code nor refresh_token
	codeOAuthUnsupportedResponseType errorCode = "unsupported_response_type" // a response_type other than code
	codeOAuthAccessDenied            errorCode = "access_denied"             // the person declined (authorization responses only)
	codeOAuthTemporarilyUnavailable  errorCode = "temporarily_unavailable"   // over a rate limit, or the write queue is full
	codeOAuthServerError             errorCode = "server_error"              // a bug or an I/O failure
)

// oauthCodeOf is the OAuth error code an error is answered with.
func oauthCodeOf(e *httpError) errorCode {
	switch e.Code {
	case errorCode(store.CodeInvalidGrant), errorCode(store.CodeInvalidClient), errorCode(store.CodeInvalidTarget),
		errorCode(store.CodeInvalidRedirectURI), errorCode(store.CodeInvalidClientMetadata), errorCode(store.CodeLimitReached),
		codeOAuthInvalidRequest, codeOAuthUnsupportedGrantType, codeOAuthUnsupportedResponseType:
		return e.Code
	case codeRateLimited, errorCode(store.CodeUnavailable):
		return codeOAuthTemporarilyUnavailable
	case errorCode(store.CodeInternal):
		return codeOAuthServerError
	}
	return codeOAuthInvalidRequest
}

// writeOAuthError answers err in OAuth's error format.
func (s *Server) writeOAuthError(w http.ResponseWriter, r *http.Request, err error) {
	e, status := s.classify(r, err)
	code := oauthCodeOf(e)
	noteErrorCode(r, code)
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterOf(err)))
		noteRetryReason(r, retryReasonOf(err))
	}
	if code == errorCode(store.CodeInvalidClient) && usedBasicAuth(r) {
		// RFC 6749 §5.2: a client refused after authenticating through the
		// Authorization header is answered 401 with a challenge of the
		// scheme it used.
		w.Header().Set("WWW-Authenticate", `Basic realm="chatd"`)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]string{"error": string(code), "error_description": e.Message})
}

// usedBasicAuth reports whether the request authenticated with HTTP Basic,
// well formed or not.
func usedBasicAuth(r *http.Request) bool {
	scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(scheme, "Basic")
}

// oauthEndpoint serves a public OAuth endpoint: within the request rate of
// its client address (the bucket a credential would have: these requests
// carry none), with its refusals in OAuth's error format.
func (s *Server) oauthEndpoint(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		err := s.limitAddress(w, r)
		if err == nil {
			err = h(w, r)
		}
		if err != nil {
			s.writeOAuthError(w, r, err)
		}
		return nil
	}
}

// limitAddress takes one request from the client address's bucket.
func (s *Server) limitAddress(w http.ResponseWriter, r *http.Request) error {
	if s.requests == nil {
		return nil
	}
	st := s.requests.allow("address:"+clientAddress(r), s.now())
	st.setHeaders(w.Header())
	if !st.allowed {
		return rateLimited(codeRateLimited, "rate_limit", "too many requests from this address; retry after the delay in Retry-After", st)
	}
	return nil
}
