package e2e

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/oasdiff/yaml"

	"github.com/chatd/chatd/internal/apitest"
)

// The dashboard and the alert rules of docs/monitoring name only series a
// running chatd exposes (after some traffic: a histogram's series appear
// with its first observation), and the manual describes every family of
// chatd's own that it exposes.
func TestMonitoringUsesOnlyExposedMetrics(t *testing.T) {
	families := scrapeBusyServer(t)
	exposed := map[string]bool{}
	for _, f := range families {
		for _, s := range f.Samples {
			exposed[s.Name] = true
		}
	}

	uses := map[string][]string{} // series name -> where it is used
	for where, expr := range dashboardQueries(t) {
		for _, name := range seriesNames(expr) {
			uses[name] = append(uses[name], where)
		}
	}
	for where, expr := range alertQueries(t) {
		for _, name := range seriesNames(expr) {
			uses[name] = append(uses[name], where)
		}
	}
	if len(uses) < 30 {
		t.Fatalf("only %d series named in docs/monitoring: the queries were not read", len(uses))
	}
	for name, where := range uses {
		if !exposed[name] {
			sort.Strings(where)
			t.Errorf("%s, used by %s, is not a series chatd exposes", name, strings.Join(where, "; "))
		}
	}

	manual, err := os.ReadFile(repoFile("docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range families {
		if strings.HasPrefix(name, "chatd_") && !strings.Contains(string(manual), "`"+name) {
			t.Errorf("docs/operations.md does not describe %s", name)
		}
	}
}

// scrapeBusyServer runs chatd serve with its metrics on, makes a few
// requests (answered, refused, and no route's) and scrapes it.
func scrapeBusyServer(t *testing.T) map[string]*apitest.Family {
	db, alice := newDatabaseWithAlice(t)
	srv := startServer(t, db, "--metrics-addr", "127.0.0.1:0")
	metricsURL := srv.awaitMetrics(t)
	for _, call := range []struct {
		path, key string
		status    int
	}{{"/api/v1/me", alice.APIKey, 200}, {"/api/v1/me", "ak_wrong", 401}, {"/api/v1/no/such/route", "", 404}} {
		if status, body := srv.call(t, "GET", call.path, call.key, nil); status != call.status {
			t.Fatalf("GET %s: %d %s", call.path, status, body)
		}
	}
	families, err := apitest.ParsePrometheusText(scrapeMetrics(t, metricsURL))
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// dashboardQueries returns every query of the Grafana dashboard by where
// it is: each panel's targets, and the variables' label_values(…).
func dashboardQueries(t *testing.T) map[string]string {
	b, err := os.ReadFile(repoFile("docs/monitoring/chatd-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Name, Definition string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("chatd-dashboard.json: %v", err)
	}
	queries := map[string]string{}
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for i, target := range p.Targets {
			queries["dashboard panel "+p.Title+" #"+string(rune('A'+i))] = target.Expr
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),\s*[a-zA-Z_]+\)$`)
	for _, v := range dash.Templating.List {
		if v.Definition == "" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("dashboard variable %s: %q is not label_values(series, label)", v.Name, v.Definition)
			continue
		}
		queries["dashboard variable "+v.Name] = m[1]
	}
	return queries
}

// alertQueries returns each alerting rule's expression by its name, and
// checks that each has what an alert needs to be acted on.
func alertQueries(t *testing.T) map[string]string {
	b, err := os.ReadFile(repoFile("docs/monitoring/chatd-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("chatd-alerts.yml: %v", err)
	}
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(j)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("chatd-alerts.yml: %v", err)
	}
	queries := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			switch {
			case r.Alert == "" || r.Expr == "":
				t.Errorf("rule %+v: no alert name or no expression", r)
			case r.Labels["severity"] == "" || r.Annotations["summary"] == "":
				t.Errorf("alert %s: no severity label or no summary", r.Alert)
			}
			if _, dup := queries["alert "+r.Alert]; dup {
				t.Errorf("alert %s twice", r.Alert)
			}
			queries["alert "+r.Alert] = r.Expr
		}
	}
	return queries
}

var (
	// What in a PromQL expression names no series: strings (label values),
	// label matchers, ranges and the label lists of by, without, on,
	// ignoring and group_left/right.
	promStrings    = regexp.MustCompile(`"(\\.|[^"\\])*"|'(\\.|[^'\\])*'`)
	promBraces     = regexp.MustCompile(`\{[^{}]*\}|\[[^\[\]]*\]`)
	promLabelLists = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promIdentifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
)

// seriesNames returns the series names a PromQL expression reads: its
// identifiers that are neither a function (followed by "(") nor a keyword,
// once strings, label matchers, ranges and grouping lists are gone. An
// identifier right after a digit is a number's exponent or a duration's
// unit.
func seriesNames(expr string) []string {
	expr = promStrings.ReplaceAllString(expr, `""`)
	expr = promBraces.ReplaceAllString(expr, " ")
	expr = promLabelLists.ReplaceAllString(expr, " ")
	var names []string
	for _, loc := range promIdentifier.FindAllStringIndex(expr, -1) {
		name, before, after := expr[loc[0]:loc[1]], byte(' '), strings.TrimLeft(expr[loc[1]:], " \t\n")
		if loc[0] > 0 {
			before = expr[loc[0]-1]
		}
		if (before >= '0' && before <= '9') || before == '.' || strings.HasPrefix(after, "(") || promKeywords[strings.ToLower(name)] {
			continue
		}
		names = append(names, name)
	}
	return names
}

func TestSeriesNamesOfPromQL(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (status_class) (rate(chatd_http_requests_total{instance=~"$instance",route!~"a|b"}[$__rate_interval]))`: "chatd_http_requests_total",
		`histogram_quantile(0.99, sum by (le) (rate(x_bucket{le="0.5"}[5m]))) > 0.25`:                                   "x_bucket",
		`sum by (instance) (a) >= on (instance) b_limit`:                                                                "a b_limit",
		"a / b > 1e9 and c offset 5m": "a b c",
		`absent(chatd_build_info)`:    "chatd_build_info",
		`topk(10, sum by (method, route) (rate(m_total{x="sum(y)"}[1m]))) or vector(0)`:            "m_total",
		`sum without (le) (rate(h_sum[5m])) / ignoring (job) group_left (route) rate(h_count[5m])`: "h_sum h_count",
	} {
		if got := strings.Join(seriesNames(expr), " "); got != want {
			t.Errorf("seriesNames(%s) = %q, want %q", expr, got, want)
		}
	}
}
