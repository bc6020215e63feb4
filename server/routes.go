package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/chatd/chatd/store"
)

// buildRouter makes s.router, with every route. Only what a route names is
// served: no redirects to a path with or without a trailing slash or in
// another case, and no OPTIONS; anything else answers in the envelope.
func (s *Server) buildRouter() {
	s.router = httprouter.New()
	s.router.RedirectTrailingSlash = false
	s.router.RedirectFixedPath = false
	s.router.HandleOPTIONS = false
	s.router.HandleMethodNotAllowed = true
	s.router.NotFound = http.HandlerFunc(s.notFound)
	s.router.MethodNotAllowed = http.HandlerFunc(s.methodNotAllowed)
	s.named = map[string]map[string]namedRoute{}
	s.handlers = map[string]registeredRoute{}
	s.routes()
}

// routes registers every endpoint, one group at a time: each group's
// <group>Routes, in its server_<group>.go, registers its own routes next to
// their handlers. The chat id segment is named :chat_id on every route:
// httprouter requires one name per position.
func (s *Server) routes() {
	s.healthRoutes()
	s.openAPIRoutes()
	s.socketRoutes()
	s.mcpRoutes()
	s.oauthRoutes()
	s.identityRoutes()
	s.roomRoutes()
	s.participantRoutes()
	s.messageRoutes()
	s.messageChangeRoutes()
	s.searchRoutes()
	s.deliveryRoutes()
	s.boardRoutes()
	s.myAgentRoutes()
	s.bulkRoutes()
	s.retentionRoutes()
	s.fileRoutes()
	s.contactRoutes()
	s.memoryRoutes()
	s.webhookRoutes()
	if s.roomTasks {
		s.taskRoutes()
	}
	s.attentionRoutes()
	s.invitationRoutes()
	s.peopleRoutes()
	s.delegationRoutes()
	s.accountRoutes()
}

// handlerFunc is an endpoint: it writes a success response or returns the
// error to answer. It reads the route's parameters with r.PathValue.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

type registeredRoute struct {
	method, path string
	aud          audience
	scope        string      // what a delegated token needs (delegationScope)
	h            handlerFunc // nil for a fixed name handleNamed dispatches
}

// handle registers h for method and path, serving the callers aud admits.
func (s *Server) handle(method, path string, aud audience, h handlerFunc) {
	scope := delegationScope(method, path)
	rt := registeredRoute{method, path, aud, scope, h}
	s.registered = append(s.registered, rt)
	s.handlers[method+" "+path] = rt
	stats := s.metrics.routeStats(method, path)
	s.router.Handle(method, path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		noteRoute(r, stats)
		s.serve(w, r, ps, aud, scope, h)
	})
}

// serve authenticates the caller as aud requires (a delegated caller also
// needs scope), within the rate limits, and runs h.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, ps httprouter.Params, aud audience, scope string, h handlerFunc) {
	// Every path parameter is an id (or a task's board number): one
	// normalization here serves every route.
	for _, param := range ps {
		r.SetPathValue(param.Key, store.NormalizeID(param.Value))
	}
	if aud != public {
		p, err := s.authenticateLimited(w, r, codeRateLimited, func(cachedOnly bool) (*store.Principal, error) {
			return s.authenticate(r, aud, cachedOnly)
		})
		if err == nil {
			err = allowedFor(p, scope)
		}
		if err != nil {
			if aud == anyCaller && store.ErrorCode(err) == store.CodeUnauthorized {
				s.challengeMCPClient(w, r)
			}
			s.writeError(w, r, err)
			return
		}
		noteCaller(r, p)
		r = r.WithContext(withCaller(r.Context(), p))
	}
	if err := h(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

// withCaller is ctx carrying the authenticated caller, as handlers read it.
func withCaller(ctx context.Context, p *store.Principal) context.Context {
	ctx = context.WithValue(ctx, principalKey, p)
	if p.Delegation != nil {
		ctx = store.WithDelegation(ctx, p.Delegation)
	}
	return ctx
}

// route returns the route registered for method and path (as registered,
// with its :parameters).
func (s *Server) route(method, path string) (registeredRoute, bool) {
	rt, ok := s.handlers[method+" "+path]
	return rt, ok
}

// namedRoute is one fixed name served at a parameter's position.
type namedRoute struct {
	aud   audience
	scope string
	h     handlerFunc
	stats *routeStats
}

// handleNamed serves a fixed name (POST /me/agents/register) at a path
// position where the same method also takes an id (POST
// /me/agents/:id/delegations): httprouter cannot hold both, so the names
// are dispatched from the parameter. Each name is registered by the group
// it belongs to (register by my agents, bulk-delete by bulk deletion); the
// first one at a path installs the dispatcher. Any other value answers as
// the router would for a path without the method: 405 with what the path
// does take.
func (s *Server) handleNamed(method, path, name string, aud audience, h handlerFunc) {
	param := path[strings.LastIndexByte(path, ':')+1:]
	named := strings.Replace(path, ":"+param, name, 1)
	s.registered = append(s.registered, registeredRoute{method: method, path: named, aud: aud})
	key := method + " " + path
	route := namedRoute{aud, delegationScope(method, named), h, s.metrics.routeStats(method, named)}
	if names, ok := s.named[key]; ok {
		names[name] = route
		return
	}
	names := map[string]namedRoute{name: route}
	s.named[key] = names
	s.router.Handle(method, path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		route, ok := names[ps.ByName(param)]
		if !ok {
			s.notNamed(w, r, method)
			return
		}
		noteRoute(r, route.stats)
		s.serve(w, r, ps, route.aud, route.scope, route.h)
	})
}

// notNamed answers a value at a named position that is none of the names:
// 405 with the methods the path takes other than method, or 404.
func (s *Server) notNamed(w http.ResponseWriter, r *http.Request, method string) {
	var allowed []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if h, _, _ := s.router.Lookup(m, r.URL.Path); h != nil && m != method {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) == 0 {
		s.notFound(w, r)
		return
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	s.methodNotAllowed(w, r)
}

// methodNotAllowed answers 405 with the methods the path does take.
// httprouter always lists OPTIONS, which chatd does not serve, so it is
// dropped from the Allow header.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range strings.Split(w.Header().Get("Allow"), ",") {
		if m = strings.TrimSpace(m); m != "" && m != http.MethodOptions {
			allowed = append(allowed, m)
		}
	}
	allow := strings.Join(allowed, ", ")
	w.Header().Set("Allow", allow)
	s.writeError(w, r, errorf(codeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
}
