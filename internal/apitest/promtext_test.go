package apitest

import (
	"strings"
	"testing"
)

const goodExposition = `# HELP chatd_requests_total Requests.
# TYPE chatd_requests_total counter
chatd_requests_total{method="GET",route="/a/:id"} 3
chatd_requests_total{method="POST",route="/a"} 1
# HELP chatd_latency_seconds Latency.
# TYPE chatd_latency_seconds histogram
chatd_latency_seconds_bucket{route="/a",le="0.1"} 1
chatd_latency_seconds_bucket{route="/a",le="1"} 2
chatd_latency_seconds_bucket{route="/a",le="+Inf"} 3
chatd_latency_seconds_sum{route="/a"} 2.5
chatd_latency_seconds_count{route="/a"} 3
# HELP go_info Information about the Go environment.
# TYPE go_info gauge
go_info{version="go1.26", quote="a \"b\" \\ c\n"} 1
# HELP go_gc_duration_seconds
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 1e-05
go_gc_duration_seconds_sum 0.5
go_gc_duration_seconds_count 7
`

func TestParsePrometheusText(t *testing.T) {
	families, err := ParsePrometheusText(goodExposition)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckChatdConventions(families, "chatd_"); err != nil {
		t.Fatal(err)
	}
	h := families["chatd_latency_seconds"]
	if h.Type != "histogram" || len(h.Samples) != 5 || h.Samples[2].Labels["le"] != "+Inf" {
		t.Fatalf("histogram %+v", h)
	}
	if got := families["go_info"].Samples[0].Labels["quote"]; got != "a \"b\" \\ c\n" {
		t.Fatalf("escaped label value read as %q", got)
	}
}

// Each change breaks the exposition in one way the checker must catch.
func TestParsePrometheusTextRefuses(t *testing.T) {
	for name, change := range map[string][2]string{
		"no newline at the end":    {"go_gc_duration_seconds_count 7\n", "go_gc_duration_seconds_count 7"},
		"an empty line":            {"# HELP go_info", "\n# HELP go_info"},
		"TYPE without HELP":        {"# HELP chatd_requests_total Requests.\n", ""},
		"sample before TYPE":       {"# TYPE chatd_requests_total counter\n", ""},
		"a family split":           {"# HELP go_info", "chatd_requests_total{method=\"PUT\",route=\"/b\"} 1\n# HELP go_info"},
		"a second HELP":            {"# HELP go_info Information", "# HELP chatd_requests_total x\n# HELP go_info Information"},
		"an unknown type":          {"# TYPE go_info gauge", "# TYPE go_info gauges"},
		"a sample of another name": {"go_info{version", "go_infos{version"},
		"a duplicate series":       {`chatd_requests_total{method="POST",route="/a"} 1`, `chatd_requests_total{route="/a/:id",method="GET"} 1`},
		"a bad label name":         {`{method="GET"`, `{1method="GET"`},
		"a reserved label name":    {`{method="GET"`, `{__name__="GET"`},
		"an unquoted label value":  {`method="GET"`, `method=GET`},
		"a bad escape":             {`\\ c`, `\t c`},
		"a missing comma":          {`method="GET",route`, `method="GET" route`},
		"a timestamp":              {"chatd_latency_seconds_count{route=\"/a\"} 3", "chatd_latency_seconds_count{route=\"/a\"} 3 1700000000"},
		"a bad value":              {"_sum{route=\"/a\"} 2.5", "_sum{route=\"/a\"} 2,5"},
		"a negative counter":       {"route=\"/a\"} 1\n", "route=\"/a\"} -1\n"},
		"buckets not cumulative":   {`le="1"} 2`, `le="1"} 0`},
		"buckets not ascending":    {`le="1"} 2`, `le="0.05"} 2`},
		"no +Inf bucket":           {"chatd_latency_seconds_bucket{route=\"/a\",le=\"+Inf\"} 3\n", ""},
		"_count unlike +Inf":       {"_count{route=\"/a\"} 3", "_count{route=\"/a\"} 4"},
		"le outside the buckets":   {"_sum{route=\"/a\"}", "_sum{route=\"/a\",le=\"1\"}"},
		"quantile outside summary": {`go_info{version=`, `go_info{quantile="1",version=`},
		"a comment":                {"# HELP go_info", "# just saying\n# HELP go_info"},
	} {
		text := strings.Replace(goodExposition, change[0], change[1], 1)
		if text == goodExposition {
			t.Fatalf("%s: the change does not apply", name)
		}
		if _, err := ParsePrometheusText(text); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckChatdConventions(t *testing.T) {
	for name, change := range map[string][2]string{
		"no help text":             {"# HELP chatd_requests_total Requests.", "# HELP chatd_requests_total"},
		"a counter without _total": {"chatd_requests_total", "chatd_requests"},
		"a gauge with _total":      {"# TYPE chatd_requests_total counter", "# TYPE chatd_requests_total gauge"},
		"a histogram without _sum": {"chatd_latency_seconds_sum{route=\"/a\"} 2.5\n", ""},
	} {
		text := strings.ReplaceAll(goodExposition, change[0], change[1])
		families, err := ParsePrometheusText(text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := CheckChatdConventions(families, "chatd_"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
