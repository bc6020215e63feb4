package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/chatd/chatd/store"
)

// The authorization endpoint and the consent. GET /oauth/authorize checks
// the client and where its answer goes, then sends the person's browser to
// the web app's consent screen (#/oauth/<the request>), where they sign in
// if they are not and choose whom the client acts as. The screen reads the
// request through GET /api/v1/me/oauth/authorization and answers through
// POST on it, which checks everything again (a request may be forged), and
// answers where to send the browser: back to the client with a one-time
// code, or with access_denied.
//
// A client or redirect URI that does not check out is answered to the
// browser, never redirected to (RFC 6749 §4.1.2.1); any other problem goes
// back to the client's redirect URI as an error with its state. Every
// authorization response carries iss (RFC 9207), which chatd's metadata
// announces, so that a client talking to several servers can tell whose
// answer it got.

// maxOAuthParamLen bounds each parameter of an authorization request.
const maxOAuthParamLen = 2000

// authorizationRequest is an authorization request's parameters, in the
// query of GET /oauth/authorize and of the consent's GET, and in the body
// of the consent's POST.
type authorizationRequest struct {
	ClientID            string `json:"client_id"`
	RedirectURI         string `json:"redirect_uri"`
	ResponseType        string `json:"response_type"`
	CodeChallenge       string `json:"code_challenge"`
	CodeChallengeMethod string `json:"code_challenge_method"`
	State               string `json:"state"`
	Scope               string `json:"scope"`
	Resource            string `json:"resource"`
}

// authorizationProblem is what is wrong with an authorization request: the
// parameter, the OAuth error code, and what is wrong with the parameter
// (a sentence without its name, which the consent's 422 gives as the
// pointer).
type authorizationProblem struct {
	param  string
	code   errorCode
	detail string
}

// message is the problem as a sentence naming the parameter, for an OAuth
// error_description.
func (p *authorizationProblem) message() string { return p.param + " " + p.detail }

// authorizationParams are the parameters of an authorization request, in
// the order they are checked.
var authorizationParams = []string{"client_id", "redirect_uri", "response_type", "code_challenge",
	"code_challenge_method", "state", "scope", "resource"}

// fields are the request's parameters by name.
func (a *authorizationRequest) fields() map[string]*string {
	return map[string]*string{"client_id": &a.ClientID, "redirect_uri": &a.RedirectURI, "response_type": &a.ResponseType,
		"code_challenge": &a.CodeChallenge, "code_challenge_method": &a.CodeChallengeMethod, "state": &a.State,
		"scope": &a.Scope, "resource": &a.Resource}
}

// authorizationRequestFrom reads the parameters of a query; each may come
// once (RFC 6749 §3.1).
func authorizationRequestFrom(q url.Values) (authorizationRequest, *authorizationProblem) {
	var a authorizationRequest
	var problem *authorizationProblem
	fields := a.fields()
	for _, name := range authorizationParams {
		vs := q[name]
		if len(vs) > 0 {
			*fields[name] = vs[0]
		}
		if len(vs) > 1 && problem == nil {
			problem = &authorizationProblem{name, codeOAuthInvalidRequest, "is repeated"}
		}
	}
	a.ClientID = store.NormalizeID(a.ClientID)
	return a, problem
}

// query is the request as the consent screen's link carries it.
func (a *authorizationRequest) query() url.Values {
	q := url.Values{}
	for name, v := range a.fields() {
		if *v != "" {
			q.Set(name, *v)
		}
	}
	return q
}

// resolveClient returns the request's client and settles its redirect URI
// (the one registered, when the request names none and there is one).
// Problems here are the ones never sent to the redirect URI; an unknown
// client is not found.
func (s *Server) resolveClient(ctx context.Context, a *authorizationRequest) (*store.OAuthClient, *authorizationProblem, error) {
	client, err := s.db.OAuthClient(ctx, a.ClientID)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case a.RedirectURI == "" && len(client.RedirectURIs) == 1:
		a.RedirectURI = client.RedirectURIs[0]
	case a.RedirectURI == "":
		return nil, &authorizationProblem{"redirect_uri", codeOAuthInvalidRequest, "is required: the client registered several"}, nil
	case store.OAuthRedirectURIProblem(a.RedirectURI) != "":
		return nil, &authorizationProblem{"redirect_uri", codeOAuthInvalidRequest, store.OAuthRedirectURIProblem(a.RedirectURI)}, nil
	case !client.AllowsRedirect(a.RedirectURI):
		return nil, &authorizationProblem{"redirect_uri", codeOAuthInvalidRequest, "is not one of the client's registered redirect URIs"}, nil
	}
	return client, nil, nil
}

// authorizationRequestProblems is what else is wrong with the request, to
// be reported to the client: every problem, in the order of
// authorizationParams; none when it checks out.
func (s *Server) authorizationRequestProblems(r *http.Request, a *authorizationRequest) []*authorizationProblem {
	var problems []*authorizationProblem
	add := func(param string, code errorCode, detail string) {
		problems = append(problems, &authorizationProblem{param, code, detail})
	}
	fields := a.fields()
	tooLong := map[string]bool{}
	for _, name := range authorizationParams {
		if len(*fields[name]) > maxOAuthParamLen {
			tooLong[name] = true
			add(name, codeOAuthInvalidRequest, fmt.Sprintf("is too long: at most %d characters", maxOAuthParamLen))
		}
	}
	switch {
	case tooLong["response_type"]:
	case a.ResponseType == "":
		add("response_type", codeOAuthInvalidRequest, "is required: code")
	case a.ResponseType != "code":
		add("response_type", codeOAuthUnsupportedResponseType, "must be code")
	}
	switch {
	case tooLong["code_challenge"]:
	case a.CodeChallenge == "":
		add("code_challenge", codeOAuthInvalidRequest, "is required: PKCE's S256 challenge, 43 characters of base64url")
	case !store.ValidCodeChallenge(a.CodeChallenge):
		add("code_challenge", codeOAuthInvalidRequest, "must be PKCE's S256 challenge: 43 characters of base64url")
	}
	if !tooLong["code_challenge_method"] && a.CodeChallengeMethod != "S256" {
		add("code_challenge_method", codeOAuthInvalidRequest, "must be S256")
	}
	if msg := s.oauthResourceProblem(r, a.Resource); msg != "" && !tooLong["resource"] {
		add("resource", errorCode(store.CodeInvalidTarget), strings.TrimPrefix(msg, "resource "))
	}
	slices.SortStableFunc(problems, func(x, y *authorizationProblem) int {
		return slices.Index(authorizationParams, x.param) - slices.Index(authorizationParams, y.param)
	})
	return problems
}

// authorizationResponse is where the browser goes to give the client its
// answer: the redirect URI with params, the request's state and chatd's
// iss.
func (s *Server) authorizationResponse(r *http.Request, a *authorizationRequest, params url.Values) string {
	params.Set("state", a.State)
	params.Set("iss", s.publicBase(r))
	return withQuery(a.RedirectURI, params)
}

// oauthAuthorize is GET /oauth/authorize: a redirect to the consent screen,
// or to the client with an error; a client or redirect URI that does not
// check out is refused here.
func (s *Server) oauthAuthorize(w http.ResponseWriter, r *http.Request) error {
	a, problem := authorizationRequestFrom(r.URL.Query())
	if problem != nil && (problem.param == "client_id" || problem.param == "redirect_uri") {
		return errorf(problem.code, "%s", problem.message())
	}
	_, clientProblem, err := s.resolveClient(r.Context(), &a)
	if store.ErrorCode(err) == store.CodeNotFound {
		return errorf(codeOAuthInvalidRequest, "client_id names no registered client")
	}
	if err != nil {
		return err
	}
	if clientProblem != nil {
		return errorf(clientProblem.code, "%s", clientProblem.message())
	}
	// An error redirect must carry the state exactly as received (RFC 6749
	// §4.1.2.1: "REQUIRED if a state parameter was present"), so a state
	// refused for its length cannot be sent back: not whole (a Location of
	// any size the request chose), nor cut or left out (the client would
	// take the answer for a forgery, and rightly). It is answered to the
	// browser instead, as the RFC has a bad redirect URI answered.
	if len(a.State) > maxOAuthParamLen {
		return errorf(codeOAuthInvalidRequest, "state is too long: at most %d characters", maxOAuthParamLen)
	}
	if problem == nil {
		if problems := s.authorizationRequestProblems(r, &a); len(problems) > 0 {
			problem = problems[0]
		}
	}
	if problem != nil {
		return found(w, s.authorizationResponse(r, &a, url.Values{"error": {string(problem.code)},
			"error_description": {problem.message()}}))
	}
	return found(w, "/#/oauth/"+url.PathEscape(a.query().Encode()))
}

// found redirects the browser to location, with no body and nothing cached.
func found(w http.ResponseWriter, location string) error {
	w.Header().Set("Location", location)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusFound)
	return nil
}
