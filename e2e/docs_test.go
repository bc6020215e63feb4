package e2e

// Tests that keep the manual true: README.md, CONTRIBUTING.md and docs/.
//
// TestDocsExamples runs the pages whose examples are executable
// (runnablePages) as a reader would, each against a fresh `chatd serve` on a
// new database, and fails when a documented command or answer stops
// matching. The rules such a page follows:
//
//   - Every ```sh block runs, in page order, with bash (set -euo pipefail),
//     in a new directory holding the chatd binary as ./chatd, with an
//     environment free of CHATD_* variables and an empty stdin. What a block
//     exports reaches the blocks after it: values such as $AGENT_KEY or $ROOM
//     are carried by the shell itself (export ROOM=$(curl … | jq -r .data.id)).
//   - A block whose command is ./chatd serve (after an optional
//     `go build -o chatd . &&`: the test built the binary already; before an
//     optional `| tee FILE`) starts the server in the background on a free
//     port. 127.0.0.1:8080 in the blocks
//     and answers after it stands for the address it listens on. The server
//     stops when the page ends.
//   - <!-- doctest: skip --> on the line before a block keeps it from
//     running (a build, go test, a systemd unit); <!-- doctest: exit N -->
//     says that the block ends with a command that fails with status N, as
//     the page shows.
//   - A ```json or ```text block right after a ```sh block (nothing but blank
//     lines between) is its answer. A ```json block is compared with what the
//     commands print on stdout, read as a stream of JSON values; a ```text
//     block with what they print on stdout and stderr together (for the
//     server's block, with the first lines the server prints).
//   - Answers may be abridged. In JSON, an object may leave fields out (those
//     shown must be there, with the values shown; "…": "…" marks the place
//     for a reader and is not compared), an array whose last
//     element is "…" may have more elements (otherwise arrays have the same
//     length), and the string "…" stands for any value. In a string or a line
//     of text, … stands for any text; a line holding only … for any number of
//     lines.
//   - What differs from run to run matches any value of its kind: ids
//     (UUIDs), timestamps (RFC 3339), API keys, grants and setup tokens
//     (band_a_…, band_u_…, band_g_…, band_s_…: the same prefix), JWTs and
//     paging cursors (eyJ…), and request ids (req_…), in values and in
//     object keys (delivery_status is keyed by agent id). The directory the
//     page runs in reads as /home/you/chatd.
//
// To write an example, put an empty ```json or ```text block after the
// command and run the test with CHATD_DOCS_UPDATE=1: it fills every empty
// answer block with what came back, to abridge by hand.
//
// The examples need bash, curl and jq. Without them the test says so and is
// skipped, unless CHATD_E2E_REQUIRED is set, as it is in CI.

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"
)

// repoFile is where a file of the repository, named from the repository's
// root as the manual and the test names name it, is from this folder.
func repoFile(name string) string { return filepath.Join("..", name) }

// runnablePages are the pages whose examples TestDocsExamples runs.
var runnablePages = []string{
	"README.md",
	"docs/quickstart.md",
	"docs/cli.md",
	"docs/api/overview.md",
	"docs/api/agent.md",
	"docs/api/human.md",
	"docs/api/extensions.md",
}

func TestDocsExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			why := tool + " is not installed: the documented examples need bash, curl and jq"
			if os.Getenv("CHATD_E2E_REQUIRED") != "" {
				t.Fatal(why)
			}
			t.Skip(why)
		}
	}
	for _, page := range runnablePages {
		t.Run(strings.ReplaceAll(page, "/", "_"), func(t *testing.T) {
			t.Parallel() // each page has its own directory and server
			runPage(t, page, os.Getenv("CHATD_DOCS_UPDATE") != "")
		})
	}
}

// mdBlock is a fenced code block of a Markdown page.
type mdBlock struct {
	info       string // the fence's info string: sh, json, text, ...
	body       string // its lines, without the fence's indentation
	line       int    // the line of the opening fence, from 1
	start, end int    // the body's byte offsets in the page
	annotation string // the <!-- doctest: ... --> on the line before, if any
	// follows is true when only blank lines separate the block from the
	// block before it.
	follows bool
}

var (
	fenceRe      = regexp.MustCompile("^([ \t]*)(```+)[ \t]*([^`]*)$")
	annotationRe = regexp.MustCompile(`^<!--\s*doctest:\s*(.*?)\s*-->$`)
)

// parseBlocks returns the fenced code blocks of a Markdown page.
func parseBlocks(page string) []mdBlock {
	var blocks []mdBlock
	var open *mdBlock
	var indent, fence string
	lastNonBlank := ""
	blankSince := false // only blank lines since the last block closed
	offset := 0
	for i, line := range strings.SplitAfter(page, "\n") {
		text := strings.TrimRight(line, "\r\n")
		switch m := fenceRe.FindStringSubmatch(text); {
		case open == nil && m != nil:
			open = &mdBlock{info: strings.TrimSpace(m[3]), line: i + 1, start: offset + len(line), follows: blankSince}
			if a := annotationRe.FindStringSubmatch(strings.TrimSpace(lastNonBlank)); a != nil {
				open.annotation = a[1]
			}
			indent, fence = m[1], m[2]
		case open != nil && m != nil && m[3] == "" && len(m[2]) >= len(fence):
			open.end = offset
			blocks = append(blocks, *open)
			open = nil
			blankSince = true
			lastNonBlank = "```"
		case open != nil:
			open.body += strings.TrimPrefix(strings.TrimRight(line, "\r"), indent)
		default:
			if strings.TrimSpace(text) != "" {
				lastNonBlank = text
				blankSince = false
			}
		}
		offset += len(line)
	}
	return blocks
}

// pageRun is one run of a page's examples.
type pageRun struct {
	t       *testing.T
	name    string
	dir     string   // where the blocks run, holding ./chatd
	dirs    []string // dir as the commands may print it
	state   string   // the exported variables, carried from block to block
	addr    string   // the address the server listens on, once started
	servers []*exec.Cmd
}

func runPage(t *testing.T, name string, update bool) {
	raw, err := os.ReadFile(repoFile(name))
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	r := newPageRun(t, name)
	var edits []answerEdit
	blocks := parseBlocks(page)
	ran := 0
	for i, b := range blocks {
		if b.info != "sh" || b.annotation == "skip" {
			continue
		}
		var answer *mdBlock
		if i+1 < len(blocks) && blocks[i+1].follows && (blocks[i+1].info == "json" || blocks[i+1].info == "text") {
			answer = &blocks[i+1]
		}
		ran++
		if serve, ok := serverCommand(b.body); ok {
			lines := r.startServer(b, serve, answer)
			if answer != nil && strings.TrimSpace(answer.body) == "" && update {
				edits = append(edits, answerEdit{answer.start, answer.end, r.unsubstitute(strings.Join(lines, "\n")) + "\n"})
			}
			continue
		}
		if e, ok := r.runAnswered(b, answer, update); ok {
			edits = append(edits, e)
		}
	}
	if ran == 0 {
		t.Fatalf("%s has no runnable ```sh block", name)
	}
	if len(edits) > 0 {
		slices.SortFunc(edits, func(a, b answerEdit) int { return b.start - a.start })
		for _, e := range edits {
			page = page[:e.start] + e.text + page[e.end:]
		}
		if err := os.WriteFile(repoFile(name), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: filled %d answer blocks", name, len(edits))
	}
}

// newPageRun makes the directory a page's blocks run in, holding the
// binary as ./chatd and the file that carries exported variables.
func newPageRun(t *testing.T, name string) *pageRun {
	dir := t.TempDir()
	if err := os.Symlink(chatdBin, filepath.Join(dir, "chatd")); err != nil {
		t.Fatal(err)
	}
	r := &pageRun{t: t, name: name, dir: dir, dirs: []string{dir}, state: filepath.Join(dir, ".doctest-state")}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		r.dirs = append(r.dirs, real)
	}
	if err := os.WriteFile(r.state, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stopServers)
	return r
}

// answerEdit fills an empty answer block with what came back.
type answerEdit struct {
	start, end int
	text       string
}

// runAnswered runs a block of commands, wants the exit status its
// annotation says (0 without one), and compares what it printed with its
// answer block, if it has one. An empty answer block is an error, unless
// update: then the edit that fills it is returned.
func (r *pageRun) runAnswered(b mdBlock, answer *mdBlock, update bool) (answerEdit, bool) {
	t, name := r.t, r.name
	wantExit := 0
	if n, ok := strings.CutPrefix(b.annotation, "exit "); ok {
		var err error
		if wantExit, err = strconv.Atoi(n); err != nil {
			t.Fatalf("%s:%d: bad annotation %q", name, b.line, b.annotation)
		}
	}
	stdoutOnly := answer != nil && answer.info == "json"
	out, code := r.runBlock(b, stdoutOnly)
	if code != wantExit {
		t.Fatalf("%s:%d: the block exited %d, the page says %d:\n%s\noutput:\n%s", name, b.line, code, wantExit, b.body, out)
	}
	if answer == nil {
		return answerEdit{}, false
	}
	if strings.TrimSpace(answer.body) == "" {
		if update {
			return answerEdit{answer.start, answer.end, r.unsubstitute(prettyAnswer(answer.info, out))}, true
		}
		t.Errorf("%s:%d: an empty answer block (run with CHATD_DOCS_UPDATE=1 to fill it); the block printed:\n%s", name, answer.line, out)
		return answerEdit{}, false
	}
	var mismatch error
	if answer.info == "json" {
		mismatch = matchJSONStream(r.substitute(answer.body), out)
	} else {
		mismatch = matchLines(r.substitute(answer.body), out)
	}
	if mismatch != nil {
		t.Errorf("%s:%d: the answer does not match what came back: %v\ncommand:\n%s\ncame back:\n%s", name, answer.line, mismatch, b.body, out)
	}
	return answerEdit{}, false
}

var serveLineRe = regexp.MustCompile(`^(?:go build -o chatd \. && )?(\./chatd serve(?: [^|]*)?(?: \| tee \S+)?)$`)

// serverCommand reports whether a block starts the server, and the command.
func serverCommand(body string) (string, bool) {
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if len(lines) != 1 {
		return "", false
	}
	m := serveLineRe.FindStringSubmatch(strings.TrimSpace(lines[0]))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// substitute puts the server's real address where a page says
// 127.0.0.1:8080.
func (r *pageRun) substitute(s string) string {
	if r.addr == "" {
		return s
	}
	return strings.ReplaceAll(s, "127.0.0.1:8080", r.addr)
}

// unsubstitute writes what came back as the page writes it.
func (r *pageRun) unsubstitute(s string) string {
	if r.addr != "" {
		s = strings.ReplaceAll(s, r.addr, "127.0.0.1:8080")
	}
	return s
}

// tidy writes the run's directory as /home/you/chatd.
func (r *pageRun) tidy(s string) string {
	for _, d := range r.dirs {
		s = strings.ReplaceAll(s, d, "/home/you/chatd")
	}
	return s
}

func (r *pageRun) env() []string {
	return append(cleanEnv(), "HOME="+r.dir)
}

// runBlock runs a block and returns what it printed (stdout alone, or
// stdout and stderr as they came) and its exit status.
func (r *pageRun) runBlock(b mdBlock, stdoutOnly bool) (string, int) {
	r.t.Helper()
	script := fmt.Sprintf("set -euo pipefail\nsource %q\n%s\nexport -p > %q\n", r.state, r.substitute(b.body), r.state)
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env, cmd.Stdin = r.dir, r.env(), nil
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	if stdoutOnly {
		cmd.Stderr = &errb
	} else {
		cmd.Stderr = &out
	}
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		r.t.Fatalf("%s:%d: the block did not finish in a minute:\n%s\noutput so far:\n%s%s", r.name, b.line, b.body, out.String(), errb.String())
	}
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	if code != 0 && stdoutOnly {
		out.WriteString(errb.String())
	}
	return r.tidy(out.String()), code
}

var listeningRe = regexp.MustCompile(`listening on http://(\S+)`)

// startServer runs the server's block in the background and waits until it
// listens and printed as many lines as its answer shows, which it compares.
// It returns the lines the server printed.
func (r *pageRun) startServer(b mdBlock, command string, answer *mdBlock) []string {
	r.t.Helper()
	command = strings.ReplaceAll(command, "127.0.0.1:8080", "127.0.0.1:0")
	cmd := exec.Command("bash", "-c", fmt.Sprintf("set -euo pipefail\nsource %q\nexec %s\n", r.state, command))
	cmd.Dir, cmd.Env = r.dir, append(r.env(), "CHATD_ADDR=127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.servers = append(r.servers, cmd)
	want := 1
	if answer != nil && strings.TrimSpace(answer.body) != "" {
		want = max(want, len(strings.Split(strings.TrimRight(answer.body, "\n"), "\n")))
	} else if answer != nil {
		want = 4 // what an empty database prints, for CHATD_DOCS_UPDATE
	}
	var mu sync.Mutex
	var lines []string
	enough := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			if len(lines) == want {
				close(enough)
			}
			mu.Unlock()
		}
	}()
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		r.t.Fatalf("%s:%d: the server printed %d lines, not %d:\n%s\nstderr:\n%s", r.name, b.line, len(lines), want, strings.Join(lines, "\n"), stderr.String())
	}
	mu.Lock()
	got := r.tidy(strings.Join(lines[:want], "\n"))
	mu.Unlock()
	m := listeningRe.FindStringSubmatch(got)
	if m == nil {
		r.t.Fatalf("%s:%d: the server printed no address:\n%s", r.name, b.line, got)
	}
	r.addr = m[1]
	if answer != nil && strings.TrimSpace(answer.body) != "" {
		if err := matchLines(r.substitute(answer.body), got); err != nil {
			r.t.Errorf("%s:%d: what the server prints does not match: %v\nit printed:\n%s", r.name, answer.line, err, got)
		}
	}
	return strings.Split(got, "\n")
}

// stopServers stops the servers a page started, as Ctrl-C would.
func (r *pageRun) stopServers() {
	for _, cmd := range r.servers {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
}

// prettyAnswer is what came back, as an answer block shows it.
func prettyAnswer(info, out string) string {
	if info != "json" {
		return strings.TrimRight(out, "\n") + "\n"
	}
	var b strings.Builder
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			return out
		}
		var ind bytes.Buffer
		json.Indent(&ind, raw, "", "  ")
		b.Write(ind.Bytes())
		b.WriteString("\n")
	}
	return b.String()
}

// decodeStream reads every JSON value of s.
func decodeStream(s string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var vals []any
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			return vals, nil
		} else if err != nil {
			return nil, err
		}
		vals = append(vals, v)
	}
}

// matchJSONStream compares the JSON values a page shows with those that
// came back.
func matchJSONStream(want, got string) error {
	w, err := decodeStream(want)
	if err != nil {
		return fmt.Errorf("the page's answer is not JSON: %v", err)
	}
	g, err := decodeStream(got)
	if err != nil {
		return fmt.Errorf("what came back is not JSON: %v", err)
	}
	if len(w) != len(g) {
		return fmt.Errorf("the page shows %d JSON values, %d came back", len(w), len(g))
	}
	for i := range w {
		if err := matchJSON(w[i], g[i], ""); err != nil {
			if len(w) > 1 {
				return fmt.Errorf("value %d: %v", i+1, err)
			}
			return err
		}
	}
	return nil
}

// matchJSON compares a value the page shows with the one that came back,
// by the rules of TestDocsExamples; the error names the JSON Pointer.
func matchJSON(want, got any, ptr string) error {
	at := ptr
	if at == "" {
		at = "/"
	}
	if s, ok := want.(string); ok && s == "…" {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		return matchObject(w, got, ptr, at)
	case []any:
		return matchArray(w, got, ptr, at)
	case string:
		g, ok := got.(string)
		if !ok || !textPattern(w, true).MatchString(g) {
			return fmt.Errorf("%s: the page shows %q, %s came back", at, w, brief(got))
		}
	case json.Number:
		g, ok := got.(json.Number)
		wf, _ := w.Float64()
		gf, _ := g.Float64()
		if !ok || wf != gf {
			return fmt.Errorf("%s: the page shows %s, %s came back", at, w, brief(got))
		}
	default:
		if want != got {
			return fmt.Errorf("%s: the page shows %v, %s came back", at, want, brief(got))
		}
	}
	return nil
}

// matchObject compares an object the page shows: the fields it shows must
// be there with the values shown, others may be too.
func matchObject(w map[string]any, got any, ptr, at string) error {
	g, ok := got.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: the page shows an object, %s came back", at, brief(got))
	}
	used := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(w)) {
		if k == "…" {
			continue // "…": "…" marks the fields left out
		}
		if gv, ok := g[k]; ok {
			used[k] = true
			if err := matchJSON(w[k], gv, ptr+"/"+k); err != nil {
				return err
			}
			continue
		}
		if err := matchKeyOfKind(k, w[k], g, used, ptr); err != nil {
			return err
		}
	}
	return nil
}

// matchKeyOfKind matches a key the page shows that did not come back, if it
// is an id (delivery_status is keyed by agent), to a key of its kind not
// matched yet whose value matches.
func matchKeyOfKind(k string, want any, g map[string]any, used map[string]bool, ptr string) error {
	var firstErr error
	if pat := textPattern(k, false); pat.String() != "^"+regexp.QuoteMeta(k)+"$" {
		for _, gk := range slices.Sorted(maps.Keys(g)) {
			if used[gk] || !pat.MatchString(gk) {
				continue
			}
			if err := matchJSON(want, g[gk], ptr+"/"+gk); err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			used[gk] = true
			return nil
		}
	}
	return cmp.Or(firstErr, fmt.Errorf("%s/%s: not in the answer", ptr, k))
}

// matchArray compares an array the page shows: as many elements, or at
// least as many when its last is "…", each matching.
func matchArray(w []any, got any, ptr, at string) error {
	g, ok := got.([]any)
	if !ok {
		return fmt.Errorf("%s: the page shows an array, %s came back", at, brief(got))
	}
	n := len(w)
	if n > 0 && w[n-1] == "…" {
		n--
		if len(g) < n {
			return fmt.Errorf("%s: the page shows at least %d elements, %d came back", at, n, len(g))
		}
	} else if len(g) != n {
		return fmt.Errorf("%s: the page shows %d elements, %d came back", at, n, len(g))
	}
	for i := 0; i < n; i++ {
		if err := matchJSON(w[i], g[i], fmt.Sprintf("%s/%d", ptr, i)); err != nil {
			return err
		}
	}
	return nil
}

func brief(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// volatileRe finds what differs from run to run in a page's answer; each is
// matched by the pattern of its kind.
var volatileRe = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}` +
	`|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)` +
	`|\b(?:band|thnv)_[a-z]_[a-z0-9]+` +
	`|\beyJ[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)+` +
	`|\breq_[a-z0-9]+` +
	`|…`)

var volatileKinds = []struct {
	re      *regexp.Regexp
	pattern func(match string) string
}{
	{regexp.MustCompile(`^[0-9a-f]{8}-`), func(string) string { return `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}` }},
	{regexp.MustCompile(`^\d{4}-`), func(string) string { return `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)` }},
	{regexp.MustCompile(`^(?:band|thnv)_[a-z]_`), func(m string) string { return regexp.QuoteMeta(m[:7]) + `[a-z0-9]+` }},
	{regexp.MustCompile(`^eyJ`), func(string) string { return `eyJ[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)+` }},
	{regexp.MustCompile(`^req_`), func(string) string { return `req_[a-z0-9]+` }},
}

var patternCache sync.Map

// textPattern compiles what a page shows into a pattern for what may come
// back: … stands for any text (within a line, unless multiline), and ids,
// timestamps, keys, tokens and request ids for any of their kind.
func textPattern(want string, multiline bool) *regexp.Regexp {
	key := fmt.Sprint(multiline, want)
	if re, ok := patternCache.Load(key); ok {
		return re.(*regexp.Regexp)
	}
	var b strings.Builder
	b.WriteString("^")
	if multiline {
		b.WriteString("(?s)")
	}
	last := 0
	for _, loc := range volatileRe.FindAllStringIndex(want, -1) {
		b.WriteString(regexp.QuoteMeta(want[last:loc[0]]))
		m := want[loc[0]:loc[1]]
		last = loc[1]
		if m == "…" {
			b.WriteString(".*?")
			continue
		}
		for _, k := range volatileKinds {
			if k.re.MatchString(m) {
				b.WriteString(k.pattern(m))
				break
			}
		}
	}
	b.WriteString(regexp.QuoteMeta(want[last:]))
	b.WriteString("$")
	re := regexp.MustCompile(b.String())
	patternCache.Store(key, re)
	return re
}

// matchLines compares the text a page shows with what came back, line by
// line, trailing spaces and blank lines aside.
func matchLines(want, got string) error {
	split := func(s string) []string {
		lines := strings.Split(strings.TrimRightFunc(s, unicode.IsSpace), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRightFunc(l, unicode.IsSpace)
		}
		return lines
	}
	w, g := split(want), split(got)
	// match reports whether w[i:] matches g[j:]; a line holding only …
	// matches any number of lines.
	memo := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if v, ok := memo[[2]int{i, j}]; ok {
			return v
		}
		var ok bool
		switch {
		case i == len(w):
			ok = j == len(g)
		case strings.TrimSpace(w[i]) == "…":
			ok = match(i+1, j) || (j < len(g) && match(i, j+1))
		default:
			ok = j < len(g) && textPattern(w[i], false).MatchString(g[j]) && match(i+1, j+1)
		}
		memo[[2]int{i, j}] = ok
		return ok
	}
	if match(0, 0) {
		return nil
	}
	// Name the first line that differs, for the message.
	for i := range w {
		if strings.TrimSpace(w[i]) == "…" {
			break
		}
		if i >= len(g) {
			return fmt.Errorf("the page shows more lines (%d) than came back (%d)", len(w), len(g))
		}
		if !textPattern(w[i], false).MatchString(g[i]) {
			return fmt.Errorf("line %d: the page shows %q, %q came back", i+1, w[i], g[i])
		}
	}
	return fmt.Errorf("the page shows %d lines, %d came back", len(w), len(g))
}

// TestDocsMatcher holds the comparison rules to what TestDocsExamples's
// comment says.
func TestDocsMatcher(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{`{"a": 1}`, `{"a": 1, "b": 2}`, true},
		{`{"a": 1, "b": 2}`, `{"a": 1}`, false},
		{`{"a": 1, "…": "…"}`, `{"a": 1, "b": 2}`, true},
		{`{"a": 1}`, `{"a": 2}`, false},
		{`{"a": [1, "…"]}`, `{"a": [1, 2, 3]}`, true},
		{`{"a": [1]}`, `{"a": [1, 2]}`, false},
		{`{"a": [1, 2, "…"]}`, `{"a": [1]}`, false},
		{`{"a": "…"}`, `{"a": {"deep": [1]}}`, true},
		{`{"id": "01a212dc-05b3-72c3-b0d2-c038966a0bff"}`, `{"id": "01a212dc-aaaa-72c3-b0d2-c038966a0bff"}`, true},
		{`{"id": "01a212dc-05b3-72c3-b0d2-c038966a0bff"}`, `{"id": "alice"}`, false},
		{`{"at": "2026-11-25T13:19:03.386640Z"}`, `{"at": "2027-01-01T00:00:00Z"}`, true},
		{`{"at": "2026-11-25T13:19:03.386640Z"}`, `{"at": null}`, false},
		{`{"key": "band_a_a77uavv7utt4wmc2hh3e35hx"}`, `{"key": "band_a_zzz"}`, true},
		{`{"key": "band_a_a77uavv7utt4wmc2hh3e35hx"}`, `{"key": "band_u_zzz"}`, false},
		{`{"m": "chat room … found"}`, `{"m": "chat room not found"}`, true},
		{`{"m": "chat room … found"}`, `{"m": "chat not found"}`, false},
		{`{"r": "req_5zw2s3h1q4nqd9dxa19g"}`, `{"r": "req_0000000000"}`, true},
		{`{"c": "eyJjIjoiYWdlbnQ.8GetV4_NYMSQ"}`, `{"c": "eyJhIjoxfQ.abc"}`, true},
		{`{"s": {"01a212e0-3804-76b2-becb-ad8e2e30c5cf": {"status": "processed"}}}`,
			`{"s": {"01a212e0-0000-76b2-becb-ad8e2e30c5cf": {"status": "pending"}, "01a212e0-1111-76b2-becb-ad8e2e30c5cf": {"status": "processed"}}}`, true},
		{`{"s": {"01a212e0-3804-76b2-becb-ad8e2e30c5cf": {"status": "processed"}}}`,
			`{"s": {"01a212e0-0000-76b2-becb-ad8e2e30c5cf": {"status": "pending"}}}`, false},
		{`1 2`, `1 2`, true},
		{`1 2`, `1`, false},
	} {
		err := matchJSONStream(c.want, c.got)
		if (err == nil) != c.ok {
			t.Errorf("JSON %s against %s: %v, want match %v", c.want, c.got, err, c.ok)
		}
	}
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"a\nb", "a\nb\n\n", true},
		{"a\n…\nd", "a\nb\nc\nd", true},
		{"a\n…\nd", "a\nd", true},
		{"a\n…\nd", "a\nb", false},
		{"created … at 5", "created /x/y at 5", true},
		{"id 01a212dc-05b3-72c3-b0d2-c038966a0bff.", "id 01a212dc-0000-72c3-b0d2-c038966a0bff.", true},
		{"a", "b", false},
	} {
		err := matchLines(c.want, c.got)
		if (err == nil) != c.ok {
			t.Errorf("text %q against %q: %v, want match %v", c.want, c.got, err, c.ok)
		}
	}
}

// docPages are the manual's pages: the README, CONTRIBUTING.md and docs/.
func docPages(t *testing.T) []string {
	pages := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(repoFile("docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			name, _ := filepath.Rel(repoFile("."), path)
			pages = append(pages, name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

var (
	linkRe       = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	inlineCodeRe = regexp.MustCompile("`[^`]*`")
)

// TestDocsLinks checks that every relative link of the manual names a file
// that exists, and a heading of that page when it names one (#anchor, as
// GitHub spells headings).
func TestDocsLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		raw, err := os.ReadFile(repoFile(page))
		if err != nil {
			t.Fatal(err)
		}
		anchors[page] = headingAnchors(string(raw))
		return anchors[page]
	}
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(repoFile(page))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range proseLines(string(raw)) {
			for _, m := range linkRe.FindAllStringSubmatch(inlineCodeRe.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Clean(filepath.Join(filepath.Dir(page), file))
				}
				if _, err := os.Stat(repoFile(path)); err != nil {
					t.Errorf("%s:%d: %s: no such file", page, i+1, target)
					continue
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
					t.Errorf("%s:%d: %s: %s has no heading #%s", page, i+1, target, path, anchor)
				}
			}
		}
	}
}

// proseLines returns a page's lines with those of fenced code blocks blank,
// so that line numbers stay.
func proseLines(page string) []string {
	lines := strings.Split(page, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

var headingRe = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// headingAnchors returns the anchors GitHub gives a page's headings:
// lower case, punctuation dropped, spaces as hyphens, repeats numbered.
func headingAnchors(page string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(page) {
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// TestReadmeIsAFrontPage keeps the README short: the manual is docs/.
func TestReadmeIsAFrontPage(t *testing.T) {
	info, err := os.Stat(repoFile("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() > 10_000 {
		t.Errorf("README.md is %d bytes; keep it under 10 KB (10,000 bytes) and move the rest to docs/", info.Size())
	}
}

// helpFlag is a flag as `chatd <command> --help` lists it.
type helpFlag struct {
	name, env, def string
}

var (
	helpFlagRe = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z][a-z0-9-]*)(?: \w+)?\s{2,}(.*)$`)
	helpEnvRe  = regexp.MustCompile(`\(env (CHATD_[A-Z0-9_]+)\)`)
	helpDefRe  = regexp.MustCompile(`\(default (.*)\)$`)
)

// helpFlags returns the flags of a --help text, its own and the global ones.
func helpFlags(help string) (own, global []helpFlag) {
	section := ""
	for _, line := range strings.Split(help, "\n") {
		switch strings.TrimSpace(line) {
		case "Flags:", "Global Flags:":
			section = strings.TrimSpace(line)
			continue
		case "":
			section = ""
			continue
		}
		m := helpFlagRe.FindStringSubmatch(line)
		if section == "" || m == nil || m[1] == "help" {
			continue
		}
		f := helpFlag{name: m[1]}
		if e := helpEnvRe.FindStringSubmatch(m[2]); e != nil {
			f.env = e[1]
		}
		if d := helpDefRe.FindStringSubmatch(m[2]); d != nil {
			f.def = strings.Trim(d[1], `"`)
		}
		if section == "Flags:" {
			own = append(own, f)
		} else {
			global = append(global, f)
		}
	}
	return own, global
}

// docSection returns the part of a page under the heading that is exactly
// heading, up to the next heading of the same or a higher level.
func docSection(page, heading string) (string, bool) {
	level := strings.IndexByte(heading, ' ')
	lines := strings.Split(page, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != heading {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if m := regexp.MustCompile(`^(#+) `).FindStringSubmatch(lines[j]); m != nil && len(m[1]) <= level {
				end = j
				break
			}
		}
		return strings.Join(lines[i:end], "\n"), true
	}
	return "", false
}

// flagRows returns the table rows of a section that document a flag, by
// flag name: | `--name` | env | default | what it does |.
func flagRows(section string) map[string][]string {
	rows := map[string][]string{}
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "| `--") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		name := strings.TrimPrefix(strings.Trim(cells[0], "`"), "--")
		rows[name] = cells
	}
	return rows
}

// sameDefault reports whether the default a page shows is the one --help
// prints (durations compared as durations: 10m is 10m0s).
func sameDefault(doc, help string) bool {
	doc = strings.Trim(doc, "`\"")
	if doc == help {
		return true
	}
	d1, err1 := time.ParseDuration(doc)
	d2, err2 := time.ParseDuration(help)
	return err1 == nil && err2 == nil && d1 == d2
}

// TestConfigurationListsEveryFlag runs `chatd <command> --help` for every
// command and fails when docs/configuration.md lacks one of its flags, names
// another environment variable or default for it, or lists a flag the
// command does not have. Each command has a section headed
// "## `chatd <command>`"; the flags every command takes (--db) are under
// "## Every command".
func TestConfigurationListsEveryFlag(t *testing.T) {
	raw, err := os.ReadFile(repoFile("docs/configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	root := runChatd(t, nil, "--help").ok(t).stdout
	var commands []string
	inCommands := false
	for _, l := range strings.Split(root, "\n") {
		switch {
		case strings.TrimSpace(l) == "Available Commands:":
			inCommands = true
		case inCommands && strings.TrimSpace(l) == "":
			inCommands = false
		case inCommands:
			if name := strings.Fields(l)[0]; name != "help" {
				commands = append(commands, name)
			}
		}
	}
	if len(commands) < 10 {
		t.Fatalf("found %d commands in chatd --help:\n%s", len(commands), root)
	}
	rootOwn, _ := helpFlags(root)
	globals := map[string]helpFlag{}
	for _, f := range rootOwn {
		globals[f.name] = f
	}
	check := func(heading string, flags []helpFlag) {
		t.Helper()
		section, ok := docSection(page, heading)
		if !ok {
			t.Errorf("docs/configuration.md has no section %q", heading)
			return
		}
		rows := flagRows(section)
		have := map[string]bool{}
		for _, f := range flags {
			have[f.name] = true
			row, ok := rows[f.name]
			if !ok {
				t.Errorf("docs/configuration.md, %s: --%s is missing", heading, f.name)
				continue
			}
			if len(row) < 4 {
				t.Errorf("docs/configuration.md, %s: the row of --%s is not | flag | environment | default | meaning |", heading, f.name)
				continue
			}
			if env := strings.Trim(row[1], "`"); (f.env == "" && env != "—") || (f.env != "" && env != f.env) {
				t.Errorf("docs/configuration.md, %s: --%s reads %q from the environment, not %q (— for none)", heading, f.name, f.env, row[1])
			}
			if f.def != "" && !sameDefault(row[2], f.def) {
				t.Errorf("docs/configuration.md, %s: --%s defaults to %q, not %s", heading, f.name, f.def, row[2])
			}
		}
		for name := range rows {
			if !have[name] {
				t.Errorf("docs/configuration.md, %s: --%s is no flag of this command", heading, name)
			}
		}
	}
	var globalFlags []helpFlag
	for _, f := range globals {
		globalFlags = append(globalFlags, f)
	}
	slices.SortFunc(globalFlags, func(a, b helpFlag) int { return strings.Compare(a.name, b.name) })
	check("## Every command", globalFlags)
	for _, c := range commands {
		own, global := helpFlags(runChatd(t, nil, c, "--help").ok(t).stdout)
		for _, g := range global {
			if _, ok := globals[g.name]; !ok {
				t.Errorf("chatd %s --help lists a global flag --%s that chatd --help does not", c, g.name)
			}
		}
		check("## `chatd "+c+"`", own)
	}
}
