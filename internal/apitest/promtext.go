package apitest

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Prometheus' text exposition format, version 0.0.4, checked strictly: a
// scraper that accepts chatd's /metrics must find nothing here to forgive.
// Besides the grammar of each line, a family's samples come together, after
// its one # HELP and one # TYPE line, each sample's name fits the family's
// type, no series appears twice, and a histogram's buckets are cumulative,
// ascending, end at +Inf and agree with its _count. Comments other than
// HELP and TYPE, empty lines and timestamps, which the format allows and
// chatd never writes, are refused too. Blanks after a label set's "{" or
// "," are read as Prometheus' own parser reads them (the Go runtime's
// series, written by VictoriaMetrics/metrics, have them).

// Family is one metric family of an exposition.
type Family struct {
	Name, Type, Help string
	HasHelp          bool
	Samples          []Sample
}

// Sample is one line of a family.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// ParsePrometheusText parses an exposition and checks it, returning its
// families by name, or the first thing wrong with it and its line.
func ParsePrometheusText(text string) (map[string]*Family, error) {
	if text == "" || !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("the text must be lines, each ending in a newline")
	}
	p := &promParser{families: map[string]*Family{}, series: map[string]bool{}}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if err := p.line(line); err != nil {
			return nil, fmt.Errorf("line %d %q: %w", i+1, line, err)
		}
	}
	for _, f := range p.families {
		if err := checkFamily(f); err != nil {
			return nil, fmt.Errorf("family %s: %w", f.Name, err)
		}
	}
	return p.families, nil
}

type promParser struct {
	families map[string]*Family
	current  *Family
	series   map[string]bool // name and labels of every sample seen
}

func (p *promParser) line(line string) error {
	if rest, ok := strings.CutPrefix(line, "# "); ok {
		return p.comment(rest)
	}
	if line == "" || strings.HasPrefix(line, "#") {
		return fmt.Errorf("an empty line or a comment other than HELP and TYPE")
	}
	s, err := parseSample(line)
	if err != nil {
		return err
	}
	f := p.current
	if f == nil || !belongs(f, s.Name) {
		return fmt.Errorf("sample %s outside its family's block (after its # HELP and # TYPE)", s.Name)
	}
	key := s.Name + "{" + canonicalLabels(s.Labels) + "}"
	if p.series[key] {
		return fmt.Errorf("series %s appears twice", key)
	}
	p.series[key] = true
	f.Samples = append(f.Samples, s)
	return nil
}

// comment reads "HELP name text" or "TYPE name type": HELP starts a
// family, TYPE follows it, both before any of its samples.
func (p *promParser) comment(c string) error {
	keyword, rest, _ := strings.Cut(c, " ")
	name, value, _ := strings.Cut(rest, " ")
	if !metricName.MatchString(name) {
		return fmt.Errorf("invalid metric name %q", name)
	}
	switch keyword {
	case "HELP":
		if _, seen := p.families[name]; seen {
			return fmt.Errorf("a second HELP for %s, or one after its samples", name)
		}
		if strings.Contains(strings.NewReplacer(`\\`, "", `\n`, "").Replace(value), `\`) {
			return fmt.Errorf("help text with an escape other than \\\\ and \\n")
		}
		p.current = &Family{Name: name, Help: value, HasHelp: true}
		p.families[name] = p.current
	case "TYPE":
		f := p.current
		if f == nil || f.Name != name || f.Type != "" || len(f.Samples) > 0 {
			return fmt.Errorf("TYPE of %s not right after its HELP", name)
		}
		switch value {
		case "counter", "gauge", "histogram", "summary", "untyped":
			f.Type = value
		default:
			return fmt.Errorf("unknown type %q", value)
		}
	default:
		return fmt.Errorf("a comment other than HELP and TYPE")
	}
	return nil
}

// belongs reports whether a sample named name is one of family f's.
func belongs(f *Family, name string) bool {
	switch f.Type {
	case "histogram":
		return name == f.Name+"_bucket" || name == f.Name+"_sum" || name == f.Name+"_count"
	case "summary":
		return name == f.Name || name == f.Name+"_sum" || name == f.Name+"_count"
	case "":
		return false
	}
	return name == f.Name
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	end := strings.IndexAny(line, "{ ")
	if end < 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name, line = line[:end], line[end:]
	if !metricName.MatchString(s.Name) {
		return s, fmt.Errorf("invalid metric name %q", s.Name)
	}
	if strings.HasPrefix(line, "{") {
		var err error
		if line, err = parseLabels(line[1:], s.Labels); err != nil {
			return s, err
		}
	}
	value, ok := strings.CutPrefix(line, " ")
	if !ok || value == "" || strings.ContainsAny(value, " \t") {
		return s, fmt.Errorf("not one space and a value (timestamps are not written)")
	}
	v, err := parseValue(value)
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// parseLabels reads name="value" pairs up to the closing brace into
// labels, and returns what follows the brace.
func parseLabels(rest string, labels map[string]string) (string, error) {
	for {
		rest = strings.TrimLeft(rest, " \t")
		if after, ok := strings.CutPrefix(rest, "}"); ok {
			return after, nil
		}
		eq := strings.Index(rest, `="`)
		if eq < 0 {
			return "", fmt.Errorf("a label without =\"value\"")
		}
		name := rest[:eq]
		if !labelName.MatchString(name) || strings.HasPrefix(name, "__") {
			return "", fmt.Errorf("invalid label name %q", name)
		}
		if _, dup := labels[name]; dup {
			return "", fmt.Errorf("label %s twice", name)
		}
		value, after, err := readLabelValue(rest[eq+2:])
		if err != nil {
			return "", err
		}
		labels[name] = value
		switch {
		case strings.HasPrefix(after, ","):
			rest = after[1:]
		case strings.HasPrefix(after, "}"):
			rest = after
		default:
			return "", fmt.Errorf("label %s not followed by , or }", name)
		}
	}
}

// readLabelValue reads a quoted value's rest up to its closing quote: the
// only escapes are \\, \" and \n.
func readLabelValue(s string) (value, after string, err error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\n':
			return "", "", fmt.Errorf("a raw newline in a label value")
		case '\\':
			if i+1 == len(s) {
				return "", "", fmt.Errorf("an unfinished escape")
			}
			i++
			switch s[i] {
			case '\\', '"':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			default:
				return "", "", fmt.Errorf("the escape \\%c in a label value", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("an unterminated label value")
}

func parseValue(v string) (float64, error) {
	switch v {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || strings.ContainsAny(v, "_xXpPiInN") {
		return 0, fmt.Errorf("invalid value %q", v)
	}
	return f, nil
}

func canonicalLabels(labels map[string]string) string {
	pairs := make([]string, 0, len(labels))
	for k, v := range labels {
		pairs = append(pairs, k+"="+strconv.Quote(v))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// checkFamily checks what spans a family's samples: its type is given,
// counters are not negative, and each histogram's buckets hold together.
func checkFamily(f *Family) error {
	if f.Type == "" {
		return fmt.Errorf("no TYPE")
	}
	for _, s := range f.Samples {
		if f.Type == "counter" && !(s.Value >= 0) {
			return fmt.Errorf("counter %v", s.Value)
		}
		if _, le := s.Labels["le"]; le != (s.Name == f.Name+"_bucket") {
			return fmt.Errorf("le on %s, or a bucket without one", s.Name)
		}
		if _, q := s.Labels["quantile"]; q && (f.Type != "summary" || s.Name != f.Name) {
			return fmt.Errorf("quantile on %s", s.Name)
		}
	}
	if f.Type == "histogram" {
		return checkHistogram(f)
	}
	return nil
}

// checkHistogram checks each series of a histogram (its samples of one
// label set, le aside): ascending bounds ending at +Inf, cumulative counts,
// and a _count equal to the +Inf bucket, if there is a _count.
func checkHistogram(f *Family) error {
	type series struct {
		bounds, counts []float64
		count          float64
		hasCount       bool
	}
	all := map[string]*series{}
	var order []string
	for _, s := range f.Samples {
		labels := map[string]string{}
		for k, v := range s.Labels {
			if k != "le" {
				labels[k] = v
			}
		}
		key := canonicalLabels(labels)
		h := all[key]
		if h == nil {
			h = &series{}
			all[key] = h
			order = append(order, key)
		}
		switch s.Name {
		case f.Name + "_bucket":
			le, err := parseValue(s.Labels["le"])
			if err != nil || math.IsNaN(le) {
				return fmt.Errorf("bucket bound %q", s.Labels["le"])
			}
			h.bounds, h.counts = append(h.bounds, le), append(h.counts, s.Value)
		case f.Name + "_count":
			h.count, h.hasCount = s.Value, true
		}
	}
	for _, key := range order {
		h := all[key]
		n := len(h.bounds)
		if n == 0 || !math.IsInf(h.bounds[n-1], 1) {
			return fmt.Errorf("series {%s}: buckets do not end at +Inf", key)
		}
		for i := 1; i < n; i++ {
			if h.bounds[i] <= h.bounds[i-1] || h.counts[i] < h.counts[i-1] {
				return fmt.Errorf("series {%s}: buckets not ascending, or counts not cumulative, at le=%v", key, h.bounds[i])
			}
		}
		if h.hasCount && h.count != h.counts[n-1] {
			return fmt.Errorf("series {%s}: _count %v, +Inf bucket %v", key, h.count, h.counts[n-1])
		}
	}
	return nil
}

// CheckChatdConventions checks, beyond the format, the conventions of
// Prometheus' naming guide that chatd's own families (those named with
// prefix) keep: a help text, _total on counters and only on them, and a
// histogram's _sum and _count beside its buckets.
func CheckChatdConventions(families map[string]*Family, prefix string) error {
	for name, f := range families {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if strings.TrimSpace(f.Help) == "" {
			return fmt.Errorf("%s has no help text", name)
		}
		if (f.Type == "counter") != strings.HasSuffix(name, "_total") {
			return fmt.Errorf("%s is a %s: only counters, and all of them, end in _total", name, f.Type)
		}
		if f.Type != "histogram" {
			continue
		}
		kinds := map[string]int{}
		for _, s := range f.Samples {
			kinds[strings.TrimPrefix(s.Name, name)]++
		}
		if kinds["_sum"] != kinds["_count"] || (kinds["_bucket"] > 0 && kinds["_count"] == 0) {
			return fmt.Errorf("histogram %s: %d _sum, %d _count for its buckets", name, kinds["_sum"], kinds["_count"])
		}
	}
	return nil
}
