// Command webhook is a sample chatd agent that keeps no socket and never
// polls: chatd calls it. It registers a webhook for itself, checks each
// request's signature with the standard library (verify.go) and answers at
// once. A request is a doorbell: the agent then takes its messages from its
// inbox (GET /api/v1/agent/inbox/next?claim=true, which marks each one
// processing), answers the person who wrote each with a mention, and marks
// it /processed (or /failed). So a message that came while the agent was
// down, or whose request it answered and then crashed, is done all the
// same: the inbox keeps every message until it is processed. On SIGTERM or
// SIGINT it removes its webhook and exits once the message at hand is done.
//
// It needs two of the variables `chatd dev` prints for an agent:
//
//	BAND_REST_URL   where chatd is, e.g. http://127.0.0.1:8080
//	BAND_API_KEY    the agent's key, band_a_...
//
//	go run ./examples/webhook -listen 127.0.0.1:9000
//
// -url gives the address chatd should call when it is not http://<listen>/
// (behind a tunnel or a proxy). With WEBHOOK_SECRET set, the webhook is one
// registered already (by its owner, say) for that address: the agent
// neither registers nor removes it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "the address to listen on")
	public := flag.String("url", "", "the URL chatd calls (default http://<listen>/)")
	flag.Parse()
	log.SetFlags(0)
	c := &client{base: os.Getenv("BAND_REST_URL"), key: os.Getenv("BAND_API_KEY"), http: &http.Client{Timeout: 30 * time.Second}}
	if c.base == "" || c.key == "" {
		log.Fatal("webhook: set BAND_REST_URL and BAND_API_KEY (chatd dev prints them)")
	}
	if err := run(c, *listen, *public, os.Getenv("WEBHOOK_SECRET")); err != nil {
		log.Fatal("webhook: ", err)
	}
}

func run(c *client, listen, public, secret string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	if public == "" {
		public = "http://" + ln.Addr().String() + "/"
	}
	if secret == "" {
		hook, err := c.register(public)
		if err != nil {
			return fmt.Errorf("register %s: %w", public, err)
		}
		secret = hook.Secret
		defer c.unregister(hook.ID)
	}
	r := &receiver{secret: secret, bell: make(chan struct{}, 1)}
	r.bell <- struct{}{} // what came before the agent started
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Printf("listening on %s: chatd calls %s", ln.Addr(), public)

	done := make(chan struct{})
	go func() { defer close(done); c.workThrough(ctx, r.bell) }()
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(shutdown)
	<-done
	log.Print("stopped")
	return nil
}

// receiver answers chatd's requests: 401 for one it did not sign, 204
// once it has rung the bell. It answers before the work is done: a request
// that took longer than chatd waits (15 s) would be sent again.
type receiver struct {
	secret string
	bell   chan struct{}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	if err := verify(rc.secret, r.Header, body, time.Now()); err != nil {
		log.Printf("refused a request from %s: %v", r.RemoteAddr, err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if m, err := decodeEvent(body); err == nil {
		log.Printf("heard of %s in %s (webhook-id %s)", m.ID, m.RoomID, r.Header.Get("webhook-id"))
	}
	select {
	case rc.bell <- struct{}{}:
	default: // rung already: the worker will look
	}
	w.WriteHeader(http.StatusNoContent)
}
